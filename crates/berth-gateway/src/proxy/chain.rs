//! Responses chains on the response side: the id of a Responses answer, found in its first
//! bytes as they pass (the `id` of a non-streamed body, or the response's `id` in a stream's
//! first event, `response.created`), is remembered under the request's routing key
//! (`chains.rs`). Nothing is buffered: the scan keeps a copy of at most [`SCAN_LIMIT`] bytes
//! and every frame goes on as it came, except that with `--sticky-store` the frame holding the
//! id waits for the store write (one bounded round trip), so the mapping is stored before the
//! client has the id, let alone the response's last byte.
//!
//! A keyless response (the policy placed it at random) gets a key all the same: its own id,
//! with its worker pinned under it (here, and placed in the store unless already there), so
//! the next turn of the chain reaches that worker. In PD mode both legs' workers are pinned
//! under it (the decode router's pin scoped `Leg::Decode`, the prefill router's `Leg::Prefill`;
//! there is no sticky store in PD mode).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;

use crate::chains::MAX_ID_BYTES;
use crate::routing::{Leg, WorkerId};
use crate::state::AppState;

/// Bytes of a response searched for its id (a Responses body or stream names it first).
pub(crate) const SCAN_LIMIT: usize = 4096;

/// Finds the first `"id": "<value>"` member in the first [`SCAN_LIMIT`] bytes.
#[derive(Debug, Default)]
pub(crate) struct IdScan {
    seen: Vec<u8>,
    done: bool,
}

impl IdScan {
    /// Feeds the next bytes; the id once found (then never again).
    pub(crate) fn feed(&mut self, data: &[u8]) -> Option<String> {
        if self.done {
            return None;
        }
        let room = SCAN_LIMIT - self.seen.len();
        self.seen.extend_from_slice(&data[..data.len().min(room)]);
        match find_id(&self.seen) {
            Found::Id(id) => {
                self.done = true;
                self.seen = Vec::new();
                Some(id)
            }
            Found::Incomplete if self.seen.len() < SCAN_LIMIT => None,
            _ => {
                self.done = true;
                self.seen = Vec::new();
                None
            }
        }
    }
}

enum Found {
    Id(String),
    /// Not (yet) found: more bytes may complete it.
    Incomplete,
    /// The first `"id"` member's value is not a plain string: give up.
    Invalid,
}

fn find_id(buf: &[u8]) -> Found {
    const NAME: &[u8] = b"\"id\"";
    let Some(at) = buf.windows(NAME.len()).position(|w| w == NAME) else {
        return Found::Incomplete;
    };
    let mut rest = &buf[at + NAME.len()..];
    let skip_ws = |r: &mut &[u8]| {
        while let [b' ' | b'\t' | b'\r' | b'\n', tail @ ..] = *r {
            *r = tail;
        }
    };
    skip_ws(&mut rest);
    match rest {
        [] => return Found::Incomplete,
        [b':', tail @ ..] => rest = tail,
        _ => return Found::Invalid,
    }
    skip_ws(&mut rest);
    match rest {
        [] => return Found::Incomplete,
        [b'"', tail @ ..] => rest = tail,
        _ => return Found::Invalid,
    }
    match rest.iter().position(|b| *b == b'"' || *b == b'\\') {
        None if rest.len() > MAX_ID_BYTES => Found::Invalid,
        None => Found::Incomplete,
        Some(end) if rest[end] == b'"' && end > 0 && end <= MAX_ID_BYTES => {
            match std::str::from_utf8(&rest[..end]) {
                Ok(id) if id.bytes().all(|b| b.is_ascii_graphic()) => Found::Id(id.to_owned()),
                _ => Found::Invalid,
            }
        }
        Some(_) => Found::Invalid,
    }
}

/// The store write a frame waits for.
type Write = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Watches one Responses answer for its id (carried by the response's guard).
pub(crate) struct ChainWatch {
    scan: IdScan,
    /// The request's routing key; `None`: keyless (the id becomes the key).
    key: Option<String>,
    state: Arc<AppState>,
    worker: WorkerId,
    /// PD mode: the prefill leg's worker (`worker` is then the decode worker).
    prefill: Option<WorkerId>,
    model: Option<String>,
    write: Option<Write>,
}

impl std::fmt::Debug for ChainWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainWatch")
            .field("key", &self.key)
            .field("worker", &self.worker)
            .finish_non_exhaustive()
    }
}

impl ChainWatch {
    /// A watch for a successful Responses answer from `worker` (in PD mode the decode worker,
    /// with `prefill` the prefill leg's), when chains key requests.
    pub(crate) fn new(
        state: &Arc<AppState>,
        key: Option<&str>,
        worker: WorkerId,
        prefill: Option<WorkerId>,
        model: Option<&str>,
    ) -> Option<Self> {
        state.router.follows_chains().then(|| Self {
            scan: IdScan::default(),
            key: key.map(str::to_owned),
            state: Arc::clone(state),
            worker,
            prefill,
            model: model.map(str::to_owned),
            write: None,
        })
    }

    /// Scans a frame on its way out; records the id once found.
    pub(crate) fn on_data(&mut self, data: &Bytes) {
        if let Some(id) = self.scan.feed(data) {
            self.found(id);
        }
    }

    fn found(&mut self, id: String) {
        let state = &self.state;
        let now = state.clock.now();
        let (key, pin) = match self.key.take() {
            Some(key) => (key, None),
            None => {
                // Keyless: the id is the chain's key, its worker pinned under it (only a router
                // that keeps pins can follow a keyless chain).
                let model = self.model.as_deref();
                let leg = match (&state.pd, self.prefill) {
                    (Some(legs), Some(prefill)) => {
                        if let Some(hash) = legs.router.pin_hash(&id, model, Leg::Prefill) {
                            let view = legs.registry.view();
                            legs.router
                                .install_pin(hash, &[prefill], now, &view.snapshot);
                        }
                        Leg::Decode
                    }
                    _ => Leg::Regular,
                };
                let Some(hash) = state.router.pin_hash(&id, model, leg) else {
                    return;
                };
                let view = state.registry.view();
                if !state
                    .router
                    .install_pin(hash, &[self.worker], now, &view.snapshot)
                {
                    return;
                }
                (id.clone(), Some(hash))
            }
        };
        state.chains.record(&id, &key, now);
        if let Some(store) = state.store.clone() {
            let state = Arc::clone(state);
            self.write = Some(Box::pin(async move {
                if !store.write_chain(&*state, &id, &key, pin).await {
                    state.chains.metrics().count("store_error");
                }
            }));
        }
    }

    /// Ready once the store write (if any) is done.
    pub(crate) fn poll_release(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if let Some(w) = self.write.as_mut() {
            if w.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.write = None;
        }
        Poll::Ready(())
    }
}

/// The key for a request's `previous_response_id`: this replica's map, else (with a store)
/// the store's entry, remembered here once found.
pub(crate) async fn key_for(state: &AppState, id: &str) -> Option<String> {
    if id.is_empty() || id.len() > MAX_ID_BYTES {
        return None;
    }
    let now = state.clock.now();
    if let Some(key) = state.chains.lookup(id, now) {
        return Some(key);
    }
    let store = state.store.as_ref()?;
    match store.read_chain(id).await {
        Some(Some(key)) => {
            state.chains.metrics().count("store_hit");
            state.chains.record(id, &key, now);
            Some(key)
        }
        Some(None) => {
            state.chains.metrics().count("store_miss");
            None
        }
        None => {
            state.chains.metrics().count("store_error");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(frames: &[&str]) -> Option<String> {
        let mut s = IdScan::default();
        frames.iter().find_map(|f| s.feed(f.as_bytes()))
    }

    #[test]
    fn finds_the_first_id_across_frames() {
        assert_eq!(
            scan(&[r#"{"created_at":1,"id":"resp_1","output":[{"id":"msg_1"}]}"#]).as_deref(),
            Some("resp_1")
        );
        assert_eq!(
            scan(&[
                "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"i",
                "d\" : \"resp_",
                "2\",\"status\":\"in_progress\"}}\n\n"
            ])
            .as_deref(),
            Some("resp_2")
        );
        // `previous_response_id` is not `id`
        assert_eq!(
            scan(&[r#"{"previous_response_id":"x","id":"resp_3"}"#]).as_deref(),
            Some("resp_3")
        );
    }

    #[test]
    fn gives_up_on_odd_values_and_past_the_limit() {
        assert_eq!(scan(&[r#"{"id":7,"x":"y"}"#]), None);
        assert_eq!(scan(&[r#"{"id":"a\"b"}"#]), None);
        assert_eq!(scan(&[&format!(r#"{{"id":"{}"}}"#, "x".repeat(200))]), None);
        let pad = format!(r#"{{"pad":"{}","#, "p".repeat(SCAN_LIMIT));
        assert_eq!(scan(&[&pad, r#""id":"late"}"#]), None);
        // once found, never again
        let mut s = IdScan::default();
        assert!(s.feed(br#"{"id":"a"}"#).is_some());
        assert!(s.feed(br#"{"id":"b"}"#).is_none());
    }
}

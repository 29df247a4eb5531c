//! The start of a streamed body, read before routing to learn its top-level `model` and, when a
//! body source may name the routing key, the members that settle it.
//!
//! A streamed body is not buffered, but an unknown `model` must be refused (404
//! `model_not_found`) before any byte reaches a worker. So the gateway reads the body's first
//! frames through [`ModelScan`] until the scan answers, the body ends, or [`LOOKAHEAD_LIMIT`]
//! bytes are held; those frames are then the first bytes sent (see `upstream/replay.rs`). A model that
//! comes later (an SDK that writes `messages` first and the body is large) is checked as the rest
//! streams: an unknown one then cuts the worker's request off before the body is complete (the
//! worker never runs it) and the client still gets 404.
//!
//! A key member ([`KeyHold`]) is different: routing cannot start without it, so the frames are
//! held until the members seen settle the key (`KeyConfig::body_settled`), or the top-level
//! object (or the body) ends, past [`LOOKAHEAD_LIMIT`] if need be. Frames held past the limit
//! take their bytes from the buffered-body budget (`budget.rs`), so many large keyless bodies
//! at once wait or get 503 `body_budget_exhausted` as buffered ones do.

use std::sync::{Arc, OnceLock};

use super::budget::{BodyBudget, WAIT};
use super::client::ClientBody;
use bytes::Bytes;
use futures_util::FutureExt;
use http_body_util::BodyExt;
use tokio::time::Instant;

use super::deadline::BodyDeadline;
use crate::error::GatewayError;
use crate::model_scan::{Field, Found, Kept, ModelScan};

/// Most bytes held while looking for the model (the replay capture's size).
pub(crate) const LOOKAHEAD_LIMIT: usize = CAPTURE_LIMIT;

/// Largest streamed body kept for replay on a retry (`upstream/replay.rs`); the lookahead holds
/// at most as much, since what it read is the replay's first frames.
pub(crate) const CAPTURE_LIMIT: usize = 256 * 1024;

/// What was read ahead.
#[derive(Debug, Default)]
pub(crate) struct Lookahead {
    /// The frames read, to be sent first.
    pub(crate) prefix: Frames,
    pub(crate) len: usize,
    /// The scan, answered or (past the limit) still running.
    pub(crate) scan: ModelScan,
}

/// Frames in arrival order. The first is kept inline: most bodies arrive in one frame, and
/// a list for it was an allocation (and its release) per request.
#[derive(Debug, Default)]
pub(crate) struct Frames {
    first: Option<Bytes>,
    /// The frames after the first.
    rest: Vec<Bytes>,
}

impl Frames {
    /// Adds the next frame.
    pub(crate) fn push(&mut self, frame: Bytes) {
        if self.first.is_none() {
            self.first = Some(frame);
        } else {
            self.rest.push(frame);
        }
    }

    /// The frames as a list.
    pub(crate) fn into_vec(self) -> Vec<Bytes> {
        let Some(first) = self.first else {
            return Vec::new();
        };
        let mut all = Vec::with_capacity(1 + self.rest.len());
        all.push(first);
        all.extend(self.rest);
        all
    }

    /// The frames as one buffer (no copy for a single frame).
    pub(crate) fn concat(self) -> Bytes {
        match self.first {
            None => Bytes::new(),
            Some(first) if self.rest.is_empty() => first,
            Some(first) => {
                let mut all = Vec::with_capacity(
                    first.len() + self.rest.iter().map(Bytes::len).sum::<usize>(),
                );
                all.extend_from_slice(&first);
                for frame in &self.rest {
                    all.extend_from_slice(frame);
                }
                all.into()
            }
        }
    }
}

/// What a lookahead waits for besides the model: the members that settle the key.
pub(crate) struct KeyHold<'a> {
    /// Whether the members the scan has seen settle the key (called when it sees more).
    pub(crate) settled: &'a (dyn Fn(&ModelScan) -> bool + Send + Sync),
    /// Where frames held past [`LOOKAHEAD_LIMIT`] take their bytes from.
    pub(crate) budget: &'a Arc<BodyBudget>,
}

/// Reads `body` until its model is known (if `want_model`) and `hold`'s key is settled, it
/// ends, or (for the model alone) [`LOOKAHEAD_LIMIT`] bytes are held, within the body's
/// deadline and `--max-payload-size`. The scan keeps the members `fields` it passes.
pub(crate) async fn read_ahead(
    body: &mut ClientBody,
    max: usize,
    deadline: BodyDeadline,
    want_model: bool,
    fields: &[Field],
    hold: Option<KeyHold<'_>>,
) -> Result<Lookahead, GatewayError> {
    let mut ahead = Lookahead::default();
    ahead.scan.want_only(want_model, fields);
    let mut settled = hold.as_ref().is_none_or(|h| (h.settled)(&ahead.scan));
    let mut progress = ahead.scan.progress();
    // When the last bytes came: read from the clock only when a wait needs it (`None`: just
    // now, nothing has waited since)
    let mut last: Option<Instant> = None;
    loop {
        let model_pending = want_model && ahead.scan.found().is_none();
        if settled && !(model_pending && ahead.len < LOOKAHEAD_LIMIT) {
            break;
        }
        // A frame already there needs no timer (nor the clock).
        let frame = match body.frame().now_or_never() {
            Some(frame) => frame,
            None => {
                let since = *last.get_or_insert_with(Instant::now);
                match deadline.next(since) {
                    Some(at) => tokio::time::timeout_at(at, body.frame())
                        .await
                        .map_err(|_| deadline.error(since))?,
                    None => body.frame().await,
                }
            }
        };
        let mut data = match frame {
            None => {
                ahead.scan.finish();
                break;
            }
            Some(Err(e)) => return Err(GatewayError::ClientBody(e.to_string())),
            Some(Ok(frame)) => match frame.into_data() {
                Ok(d) => d,
                Err(_) => continue,
            },
        };
        last = None;
        let past_limit = ahead.len + data.len() > LOOKAHEAD_LIMIT;
        ahead.len += data.len();
        if ahead.len > max {
            return Err(GatewayError::PayloadTooLarge(max));
        }
        if let Some(h) = hold.as_ref().filter(|_| past_limit && !settled) {
            let now = *last.insert(Instant::now());
            let mut r = h.budget.empty();
            r.grow_to(data.len(), now + WAIT).await?;
            data = r.attach(data);
        }
        // The body's last bytes: what the scan has no question left for is passed over.
        if http_body::Body::is_end_stream(&*body) {
            ahead.scan.feed_last(&data);
        } else {
            ahead.scan.feed(&data);
        }
        ahead.prefix.push(data);
        if let Some(h) = hold.as_ref().filter(|_| !settled) {
            let now = ahead.scan.progress();
            if now != progress {
                progress = now;
                settled = ahead.scan.ended() || (h.settled)(&ahead.scan);
            }
        }
    }
    Ok(ahead)
}

/// Where the streamed body's `nvext` member is published once the scan has seen it (the
/// handler applies its session control after the response).
pub(crate) type NvextSlot = Arc<OnceLock<Kept>>;

/// The rest of a scan still running as the body streams on: checks the model (when the lookahead
/// had no answer and workers list models) and watches for `nvext`.
#[derive(Debug)]
pub(crate) struct LateCheck {
    pub(crate) scan: ModelScan,
    /// The models the workers serve (`None`: no model check).
    pub(crate) known: Option<Vec<Arc<str>>>,
    /// Where `nvext` goes once seen (`None`: not watched).
    pub(crate) nvext: Option<NvextSlot>,
}

impl LateCheck {
    /// A check for what `scan` has not answered yet: `None` when nothing is left to watch.
    pub(crate) fn new(
        mut scan: ModelScan,
        known: Option<Vec<Arc<str>>>,
        nvext: Option<NvextSlot>,
    ) -> Option<Self> {
        let known = known.filter(|_| scan.found().is_none());
        let mut watch = None;
        if let Some(slot) = nvext {
            match scan.kept(Field::Nvext) {
                Some(k) => {
                    let _ = slot.set(k.clone());
                }
                None if !scan.ended() => watch = Some(slot),
                None => {}
            }
        }
        if known.is_none() && watch.is_none() {
            return None;
        }
        let fields: &[Field] = if watch.is_some() {
            &[Field::Nvext]
        } else {
            &[]
        };
        scan.want_only(known.is_some(), fields);
        Some(Self {
            scan,
            known,
            nvext: watch,
        })
    }

    /// Feeds the next bytes: `Err(model)` when they complete an unknown model; `Ok(true)` once
    /// nothing is left to watch.
    pub(crate) fn feed(&mut self, data: &[u8]) -> Result<bool, String> {
        let done = self.scan.feed(data);
        if let Some(found) = self.scan.found()
            && let Some(known) = self.known.take()
            && let Found::Model(m) = found
            && !known.iter().any(|k| k.as_bytes() == m.as_bytes())
        {
            return Err(m.as_str().to_owned());
        }
        if let Some(slot) = &self.nvext
            && let Some(k) = self.scan.kept(Field::Nvext)
        {
            let _ = slot.set(k.clone());
            self.nvext = None;
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_keep_their_order_as_a_list_and_as_one_buffer() {
        assert!(Frames::default().into_vec().is_empty());
        assert!(Frames::default().concat().is_empty());
        let of = |parts: &[&'static str]| {
            let mut f = Frames::default();
            for p in parts {
                f.push(Bytes::from_static(p.as_bytes()));
            }
            f
        };
        let one = Bytes::from_static(b"{\"model\":1}");
        let mut single = Frames::default();
        single.push(one.clone());
        // one frame is handed on as it is, not copied
        assert_eq!(single.concat().as_ptr(), one.as_ptr());
        for parts in [&["a"][..], &["a", "bc"], &["a", "bc", "", "def"]] {
            let want: Vec<Bytes> = parts
                .iter()
                .map(|p| Bytes::from_static(p.as_bytes()))
                .collect();
            assert_eq!(of(parts).into_vec(), want);
            assert_eq!(of(parts).concat(), Bytes::from(parts.concat()));
        }
    }

    fn known() -> Option<Vec<Arc<str>>> {
        Some(vec![Arc::from("m")])
    }

    #[test]
    fn the_late_check_watches_what_the_lookahead_left() {
        // Model found and nvext not watched: nothing left.
        let mut scan = ModelScan::new();
        scan.feed(br#"{"model":"m","messages":["#);
        assert!(LateCheck::new(scan, known(), None).is_none());
        // nvext after the lookahead: published once the rest of the body shows it, split
        // across frames.
        let mut scan = ModelScan::new();
        scan.want_only(true, &[Field::Nvext]);
        scan.feed(br#"{"model":"m","messages":["#);
        let slot = NvextSlot::default();
        let mut late = LateCheck::new(scan, known(), Some(slot.clone())).unwrap();
        assert_eq!(late.feed(br#""x"],"nvext":{"session_con"#), Ok(false));
        assert!(slot.get().is_none());
        assert_eq!(late.feed(br#"trol":{"action":"close"}}}"#), Ok(true));
        assert_eq!(
            slot.get(),
            Some(&Kept::Raw(
                br#"{"session_control":{"action":"close"}}"#.to_vec()
            ))
        );
        // An unknown model after the lookahead is refused, with nvext still watched.
        let mut scan = ModelScan::new();
        scan.want_only(true, &[Field::Nvext]);
        scan.feed(br#"{"messages":["#);
        let mut late = LateCheck::new(scan, known(), Some(NvextSlot::default())).unwrap();
        assert_eq!(
            late.feed(br#""x"],"model":"other"}"#),
            Err("other".to_owned())
        );
        // A body that ended in the lookahead leaves nothing to watch.
        let mut scan = ModelScan::new();
        scan.want_only(false, &[Field::Nvext]);
        scan.feed(br#"{"messages":[]}"#);
        assert!(LateCheck::new(scan, None, Some(NvextSlot::default())).is_none());
    }
}

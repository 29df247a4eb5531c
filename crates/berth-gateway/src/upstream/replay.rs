//! A streamed request body: counted against `--max-payload-size`, and re-sendable on a retry.
//!
//! When the body path is `streamed` the gateway does not read the body before routing: bytes go
//! to the worker as the client sends them. Two things still need the bytes that pass through:
//!
//! - the payload limit: a body without `Content-Length` (chunked) is counted as it streams, and
//!   one that goes over the limit is cut off and answered with 413;
//! - retries: the frames sent are also kept (up to `capture_limit` bytes). A retry replays the kept
//!   frames and then continues from the client's stream where the failed attempt stopped. A body
//!   larger than the capture limit is not retried. Each attempt gets a new generation; a stale
//!   attempt's body (still held by a dying connection) ends at once instead of stealing frames;
//! - the client's time: while the worker's connection waits for the next bytes from the client,
//!   the body's [`BodyDeadline`] runs (see `deadline.rs`); when it passes the body ends with an
//!   error (the worker's request is cut off) and the attempt fails as the client's fault. The
//!   handler learns when the upload has ended ([`Replayable::upload_done`]) so its
//!   `--request-timeout-secs` clock only starts then, and whether a still-running upload waits
//!   on the client or on the worker ([`Replayable::worker_stalled_until`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};

use crate::error::GatewayError;
use crate::request_body::{BodyDeadline, ClientBody, LateCheck, Lookahead};

/// Error type of request bodies sent to workers.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

struct State {
    source: Option<ClientBody>,
    kept: Vec<Bytes>,
    kept_len: usize,
    capture_limit: usize,
    /// Nothing more can be replayed (captured too much, or the source failed).
    overflow: bool,
    pulled: u64,
    max_len: u64,
    too_large: bool,
    /// The client's stream failed (it went away mid-body): the client's fault, not the worker's.
    client_error: Option<String>,
    /// The body's deadline passed while waiting on the client (the 408's message).
    timed_out: Option<String>,
    /// The model check still running on the streamed bytes (the lookahead had no answer).
    late_check: Option<LateCheck>,
    /// The late check found a model no worker serves.
    refused_model: Option<String>,
    generation: u32,
    deadline: BodyDeadline,
    /// When the last body byte came from the client.
    last_byte: Instant,
    /// When the worker's connection last asked for more of the body.
    last_polled: Instant,
    /// The last poll found nothing from the client yet (the upload waits on the client).
    waiting_on_client: bool,
    timer: Option<Pin<Box<Sleep>>>,
    /// Set once the client's body has ended (completely, or by failing).
    done: watch::Sender<bool>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("pulled", &self.pulled)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl State {
    /// The client's body is over (ended, broke, too large or too slow): no more bytes come.
    fn finish(&mut self) {
        self.source = None;
        self.timer = None;
        self.done.send_replace(true);
    }

    fn fail(&mut self) {
        self.overflow = true;
        self.finish();
    }
}

/// The shared source of every attempt's body.
#[derive(Debug, Clone)]
pub(crate) struct Replayable(Arc<Mutex<State>>);

impl Replayable {
    /// Streams `ahead`'s frames then the rest of `source`, keeping up to `capture_limit` bytes
    /// for retries (0: no retries), cutting it off past `max_len` bytes, when `deadline` passes
    /// waiting on the client, or when `late_check` finds a model no worker serves.
    pub(crate) fn new(
        source: ClientBody,
        ahead: Lookahead,
        late_check: Option<LateCheck>,
        capture_limit: usize,
        max_len: usize,
        deadline: BodyDeadline,
    ) -> Self {
        let now = Instant::now();
        Self(Arc::new(Mutex::new(State {
            source: Some(source),
            kept: ahead.prefix.into_vec(),
            kept_len: ahead.len,
            capture_limit,
            overflow: capture_limit == 0 || ahead.len > capture_limit,
            pulled: ahead.len as u64,
            max_len: max_len as u64,
            too_large: false,
            client_error: None,
            timed_out: None,
            late_check,
            refused_model: None,
            generation: 0,
            deadline,
            last_byte: now,
            last_polled: now,
            waiting_on_client: false,
            timer: None,
            done: watch::Sender::new(false),
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a retry could still re-send the whole body.
    pub(crate) fn replayable(&self) -> bool {
        !self.lock().overflow
    }

    /// Why the client's body failed, if it did (an attempt that ended then failed because of
    /// the client, not the worker): over the payload limit, too slow, or broken.
    pub(crate) fn client_failure(&self) -> Option<GatewayError> {
        let s = self.lock();
        if s.too_large {
            return Some(GatewayError::PayloadTooLarge(s.max_len as usize));
        }
        if let Some(why) = &s.timed_out {
            return Some(GatewayError::RequestBodyTimeout(why.clone()));
        }
        if let Some(model) = &s.refused_model {
            return Some(GatewayError::ModelNotFound(model.clone()));
        }
        s.client_error.clone().map(GatewayError::ClientBody)
    }

    /// Resolves to `true` once the client's body has ended (completely or not).
    pub(crate) fn upload_done(&self) -> watch::Receiver<bool> {
        self.lock().done.subscribe()
    }

    /// While the upload runs: `None` when the worker's connection has not asked for more of the
    /// body for `timeout` although the client's bytes were there (the worker stopped taking the
    /// body: its fault), else when to look again. Time waiting on the client never counts.
    pub(crate) fn worker_stalled_until(&self, timeout: Duration) -> Option<Instant> {
        let s = self.lock();
        let now = Instant::now();
        if s.waiting_on_client || s.source.is_none() {
            return Some(now + timeout);
        }
        let at = s.last_polled + timeout;
        (at > now).then_some(at)
    }

    /// A body for the next attempt, or `None` when it cannot be (re-)sent.
    pub(crate) fn attempt(&self) -> Option<ReplayBody> {
        let mut s = self.lock();
        if s.generation > 0 && s.overflow {
            return None;
        }
        s.generation += 1;
        Some(ReplayBody {
            shared: self.clone(),
            generation: s.generation,
            pos: 0,
        })
    }
}

/// One attempt's view of the body.
#[derive(Debug)]
pub(crate) struct ReplayBody {
    shared: Replayable,
    generation: u32,
    pos: usize,
}

impl Body for ReplayBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let mut guard = this.shared.lock();
        let s = &mut *guard;
        if s.generation != this.generation {
            return Poll::Ready(None);
        }
        if let Some(b) = s.kept.get(this.pos) {
            let b = b.clone();
            this.pos += 1;
            return Poll::Ready(Some(Ok(Frame::data(b))));
        }
        let Some(source) = s.source.as_mut() else {
            return Poll::Ready(None);
        };
        let now = Instant::now();
        s.last_polled = now;
        let frame = match Pin::new(source).poll_frame(cx) {
            Poll::Pending => {
                s.waiting_on_client = true;
                let Some(at) = s.deadline.next(s.last_byte) else {
                    return Poll::Pending;
                };
                let timer = s
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
                if timer.deadline() != at {
                    timer.as_mut().reset(at);
                }
                if timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                let why = s.deadline.reason(s.last_byte);
                s.timed_out = Some(why.clone());
                s.fail();
                return Poll::Ready(Some(Err(why.into())));
            }
            Poll::Ready(None) => {
                s.finish();
                return Poll::Ready(None);
            }
            Poll::Ready(Some(Err(e))) => {
                s.client_error = Some(e.to_string());
                s.fail();
                return Poll::Ready(Some(Err(e.into())));
            }
            Poll::Ready(Some(Ok(frame))) => frame,
        };
        s.waiting_on_client = false;
        if let Some(data) = frame.data_ref() {
            s.last_byte = now;
            s.pulled += data.len() as u64;
            if s.pulled > s.max_len {
                s.too_large = true;
                s.fail();
                return Poll::Ready(Some(Err("request body exceeds --max-payload-size".into())));
            }
            if let Some(check) = s.late_check.as_mut() {
                match check.feed(data) {
                    Ok(false) => {}
                    Ok(true) => s.late_check = None,
                    Err(model) => {
                        s.refused_model = Some(model);
                        s.fail();
                        return Poll::Ready(Some(Err("model not served by any worker".into())));
                    }
                }
            }
            if !s.overflow && s.kept_len + data.len() <= s.capture_limit {
                s.kept_len += data.len();
                s.kept.push(data.clone());
                this.pos += 1;
            } else {
                s.overflow = true;
                s.kept = Vec::new();
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn size_hint(&self) -> SizeHint {
        let s = self.shared.lock();
        let unsent_kept: u64 = s.kept.iter().skip(self.pos).map(|b| b.len() as u64).sum();
        match &s.source {
            None => SizeHint::with_exact(unsent_kept),
            Some(src) => {
                let rest = src.size_hint();
                let mut h = SizeHint::new();
                h.set_lower(rest.lower() + unsent_kept);
                if let Some(u) = rest.upper() {
                    h.set_upper(u + unsent_kept);
                }
                h
            }
        }
    }
}

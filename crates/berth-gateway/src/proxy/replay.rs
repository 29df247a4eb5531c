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
//!   attempt's body (still held by a dying connection) ends at once instead of stealing frames.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

/// Largest streamed body kept for replay.
pub(crate) const CAPTURE_LIMIT: usize = 256 * 1024;

/// Error type of request bodies sent to workers.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug)]
struct State {
    source: Option<Incoming>,
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
    generation: u32,
}

/// The shared source of every attempt's body.
#[derive(Debug, Clone)]
pub(crate) struct Replayable(Arc<Mutex<State>>);

impl Replayable {
    /// Streams `source`, keeping up to `capture_limit` bytes for retries (0: no retries) and
    /// cutting it off past `max_len` bytes.
    pub(crate) fn new(source: Incoming, capture_limit: usize, max_len: usize) -> Self {
        Self(Arc::new(Mutex::new(State {
            source: Some(source),
            kept: Vec::new(),
            kept_len: 0,
            capture_limit,
            overflow: capture_limit == 0,
            pulled: 0,
            max_len: max_len as u64,
            too_large: false,
            client_error: None,
            generation: 0,
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a retry could still re-send the whole body.
    pub(crate) fn replayable(&self) -> bool {
        !self.lock().overflow
    }

    /// Whether the body went over the payload limit (the attempt failed because of the client).
    pub(crate) fn too_large(&self) -> bool {
        self.lock().too_large
    }

    /// The error of the client's body stream, if it failed (the attempt failed because of the
    /// client).
    pub(crate) fn client_error(&self) -> Option<String> {
        self.lock().client_error.clone()
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
        let mut s = this.shared.lock();
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
        let frame = match Pin::new(source).poll_frame(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(None) => {
                s.source = None;
                return Poll::Ready(None);
            }
            Poll::Ready(Some(Err(e))) => {
                s.source = None;
                s.overflow = true;
                s.client_error = Some(e.to_string());
                return Poll::Ready(Some(Err(e.into())));
            }
            Poll::Ready(Some(Ok(frame))) => frame,
        };
        if let Some(data) = frame.data_ref() {
            s.pulled += data.len() as u64;
            if s.pulled > s.max_len {
                s.source = None;
                s.overflow = true;
                s.too_large = true;
                return Poll::Ready(Some(Err("request body exceeds --max-payload-size".into())));
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

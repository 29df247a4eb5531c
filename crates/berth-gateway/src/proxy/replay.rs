//! A streamed request body that can still be re-sent on a retry.
//!
//! When the body path is `streamed` the gateway does not read the body before routing: bytes go
//! to the worker as the client sends them. To keep retries possible anyway, the frames that pass
//! through are also kept (up to [`CAPTURE_LIMIT`] bytes). A retry replays the kept frames and
//! then continues from the client's stream where the failed attempt stopped. A body larger than
//! the limit is not retried. Each attempt gets a new generation; a stale attempt's body (still
//! held by a dying connection) ends at once instead of stealing frames from the retry.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

/// Largest streamed body kept for replay.
pub(crate) const CAPTURE_LIMIT: usize = 256 * 1024;

#[derive(Debug)]
struct State {
    source: Option<Incoming>,
    kept: Vec<Bytes>,
    kept_len: usize,
    overflow: bool,
    generation: u32,
}

/// The shared source of every attempt's body.
#[derive(Debug, Clone)]
pub(crate) struct Replayable(Arc<Mutex<State>>);

impl Replayable {
    pub(crate) fn new(source: Incoming) -> Self {
        Self(Arc::new(Mutex::new(State {
            source: Some(source),
            kept: Vec::new(),
            kept_len: 0,
            overflow: false,
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

    /// A body for the next attempt, or `None` when what was already sent cannot be replayed.
    pub(crate) fn attempt(&self) -> Option<ReplayBody> {
        let mut s = self.lock();
        if s.overflow {
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
    type Error = hyper::Error;

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
        let polled = Pin::new(source).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    if !s.overflow && s.kept_len + data.len() <= CAPTURE_LIMIT {
                        s.kept_len += data.len();
                        s.kept.push(data.clone());
                        this.pos += 1;
                    } else {
                        s.overflow = true;
                        s.kept = Vec::new();
                    }
                }
            }
            Poll::Ready(None) => s.source = None,
            Poll::Ready(Some(Err(_))) => {
                s.source = None;
                s.overflow = true;
            }
            Poll::Pending => {}
        }
        polled
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

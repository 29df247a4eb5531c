//! Response bodies: either bytes the gateway made, or a worker's body streamed through.
//!
//! A proxied body holds the routing `Lease` and a [`RequestGuard`] until
//! it ends or is dropped, so a client that disconnects mid-stream releases its in-flight counts
//! (per worker and per key) and drops the upstream connection, which cancels the worker's request.
//! Frames are passed on as they arrive: no added buffering.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

use crate::clock::Clock;
use crate::metrics::Metrics;
use crate::pool::Conn;
use crate::routing::Lease;

/// The body of every response the gateway sends.
#[derive(Debug)]
pub enum ResBody {
    /// A complete body made by the gateway (errors, admin, `/v1/models`).
    Full(Option<Bytes>),
    /// A worker's body, streamed through with its lease.
    Proxied(Box<ProxiedBody>),
}

impl ResBody {
    /// A complete body.
    pub fn full(bytes: impl Into<Bytes>) -> Self {
        Self::Full(Some(bytes.into()))
    }

    /// An empty body.
    pub fn empty() -> Self {
        Self::Full(None)
    }
}

/// What to do when a proxied response ends (or is abandoned): release and record.
#[derive(Debug)]
pub struct RequestGuard {
    pub(crate) lease: Option<Lease>,
    /// The worker connection: back to the pool on a clean end, closed otherwise.
    pub(crate) conn: Option<Conn>,
    pub(crate) start: Instant,
    pub(crate) metrics: std::sync::Arc<Metrics>,
    /// The routing clock, for the lease's first-byte time (`ttft_aware` learns from it).
    pub(crate) clock: std::sync::Arc<Clock>,
    /// The response is a server-sent event stream, so its first data frame is the first token.
    pub(crate) event_stream: bool,
    pub(crate) first_byte_seen: bool,
}

impl RequestGuard {
    /// The response was read to its end: the connection can serve another request.
    fn finish(mut self) {
        if let Some(conn) = self.conn.take() {
            conn.release();
        }
    }

    fn on_data(&mut self) {
        if !self.first_byte_seen {
            self.first_byte_seen = true;
            if let Some(lease) = self.lease.as_mut() {
                lease.first_byte(self.clock.now(), self.event_stream);
            }
            self.metrics
                .ttft
                .observe(self.start.elapsed().as_secs_f64());
        }
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.lease.take();
        self.metrics
            .duration
            .observe(self.start.elapsed().as_secs_f64());
    }
}

/// A worker's response body with the request's guard attached.
#[derive(Debug)]
pub struct ProxiedBody {
    pub(crate) inner: Incoming,
    pub(crate) guard: Option<RequestGuard>,
}

impl Drop for ProxiedBody {
    fn drop(&mut self) {
        // An empty or already-ended body may never be polled to its end by the server.
        if let (true, Some(g)) = (self.inner.is_end_stream(), self.guard.take()) {
            g.finish();
        }
    }
}

impl Body for ResBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.get_mut() {
            Self::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Self::Proxied(p) => {
                let polled = Pin::new(&mut p.inner).poll_frame(cx);
                match &polled {
                    Poll::Ready(Some(Ok(frame))) => {
                        if let (true, Some(g)) = (frame.is_data(), p.guard.as_mut()) {
                            g.on_data();
                        }
                    }
                    // End of stream: release now, not when hyper drops us.
                    Poll::Ready(None) => {
                        if let Some(g) = p.guard.take() {
                            g.finish();
                        }
                    }
                    Poll::Ready(Some(Err(_))) => {
                        p.guard.take();
                    }
                    Poll::Pending => {}
                }
                polled
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Full(b) => b.is_none(),
            Self::Proxied(p) => p.inner.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Self::Full(None) => SizeHint::with_exact(0),
            Self::Proxied(p) => p.inner.size_hint(),
        }
    }
}

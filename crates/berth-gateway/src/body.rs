//! Response bodies: either bytes the gateway made, or a worker's body streamed through.
//!
//! A proxied body holds the routing `Lease` and a [`RequestGuard`] until
//! it ends or is dropped, so a client that disconnects mid-stream releases its in-flight counts
//! (per worker and per key) and drops the upstream connection, which cancels the worker's request.
//! Frames are passed on as they arrive: no added buffering.
//!
//! A worker that breaks off a server-sent-event stream (it died, or cut the connection) is a
//! failure of that worker (its breaker is told, `smg_router_upstream_stream_errors_total`
//! counts it), but the client gets a readable end instead of a broken transfer: one
//! `data: {"error": {...}}` event in the gateway's error shape (`upstream_stream_error`), then
//! the chunked body ends cleanly. A broken non-stream body still ends with a transfer error.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

use crate::admission::Permit;
use crate::clock::Clock;
use crate::error::{GatewayError, SseStyle};
use crate::metrics::Metrics;
use crate::pool::Conn;
use crate::registry::{Registry, Worker};
use crate::routing::{Lease, Outcome};

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
    /// Told when the worker breaks off its response.
    pub(crate) registry: std::sync::Arc<Registry>,
    pub(crate) worker: std::sync::Arc<Worker>,
}

impl RequestGuard {
    /// The response was read to its end: the connection can serve another request.
    fn finish(mut self) {
        if let Some(conn) = self.conn.take() {
            conn.release();
        }
    }

    /// The worker broke off its response: a failure of the worker.
    fn broken(self) {
        self.metrics.stream_errors.inc();
        self.registry.report(&self.worker, Outcome::Failure);
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
    /// A server-sent-event stream: a break ends with an error event (see the module docs).
    pub(crate) sse: Option<SseEnd>,
    /// The admission permit (`--max-concurrent-requests`), held until the body ends or is
    /// dropped.
    pub(crate) permit: Option<Permit>,
}

/// Keeps `permit` for as long as `resp`'s body lasts: to its end for a worker's body; a
/// response the gateway made is complete, so the permit goes at once.
pub(crate) fn hold_permit(resp: &mut http::Response<ResBody>, permit: Permit) {
    if let ResBody::Proxied(body) = resp.body_mut() {
        body.permit = Some(permit);
    }
}

/// How a broken server-sent-event stream ends.
#[derive(Debug)]
pub(crate) struct SseEnd {
    /// The worker's URL (for the error message).
    pub(crate) worker: std::sync::Arc<str>,
    /// The bytes so far end on an event boundary (a blank line).
    pub(crate) at_boundary: bool,
    /// The error event has been sent: the body is over.
    pub(crate) ended: bool,
    /// The stream's dialect (set from the endpoint by [`set_sse_style`]).
    pub(crate) style: SseStyle,
}

/// Makes a broken stream in `resp` end with an error event of this dialect.
pub(crate) fn set_sse_style(resp: &mut http::Response<ResBody>, style: SseStyle) {
    if let ResBody::Proxied(body) = resp.body_mut()
        && let Some(sse) = body.sse.as_mut()
    {
        sse.style = style;
    }
}

impl SseEnd {
    pub(crate) fn new(worker: std::sync::Arc<str>) -> Self {
        Self {
            worker,
            at_boundary: true,
            ended: false,
            style: SseStyle::OpenAi,
        }
    }
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
                if p.sse.as_ref().is_some_and(|s| s.ended) {
                    return Poll::Ready(None);
                }
                let polled = Pin::new(&mut p.inner).poll_frame(cx);
                match &polled {
                    Poll::Ready(Some(Ok(frame))) => {
                        if let Some(data) = frame.data_ref() {
                            if let Some(g) = p.guard.as_mut() {
                                g.on_data();
                            }
                            if let (Some(sse), false) = (p.sse.as_mut(), data.is_empty()) {
                                sse.at_boundary =
                                    data.ends_with(b"\n\n") || data.ends_with(b"\r\n\r\n");
                            }
                        }
                    }
                    // End of stream: release now, not when hyper drops us.
                    Poll::Ready(None) => {
                        if let Some(g) = p.guard.take() {
                            g.finish();
                        }
                    }
                    Poll::Ready(Some(Err(e))) => {
                        if let Some(g) = p.guard.take() {
                            g.broken();
                        }
                        if let Some(sse) = p.sse.as_mut() {
                            sse.ended = true;
                            let err = GatewayError::UpstreamStream {
                                worker: sse.worker.to_string(),
                                reason: e.to_string(),
                            };
                            tracing::warn!(error = %err, "worker stream broke; ending it with an error event");
                            let event = err.to_sse_event(!sse.at_boundary, sse.style);
                            return Poll::Ready(Some(Ok(Frame::data(event))));
                        }
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
            Self::Proxied(p) => p.sse.as_ref().is_some_and(|s| s.ended) || p.inner.is_end_stream(),
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

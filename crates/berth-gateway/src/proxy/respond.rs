//! Stage 4 of a proxied request: the worker's response on its way back.
//!
//! The response streams back with `x-smg-routed-worker-id` naming the worker and a
//! [`RequestGuard`] (the body's completion guard, `body.rs`) that holds the routing lease, the
//! admission permit until the body ends (or the client goes).
//!
//! A worker that breaks off a server-sent-event stream (it died, or cut the connection) is a
//! failure of that worker (its breaker is told, `smg_router_upstream_stream_errors_total`
//! counts it), but the client gets a readable end instead of a broken transfer: one
//! `data: {"error": {...}}` event in the gateway's error shape (`upstream_stream_error`), then
//! the chunked body ends cleanly. A broken non-stream body still ends with a transfer error.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderValue, Response};

use super::chain::ChainWatch;
use super::headers::ROUTED_WORKER_NAME;
use super::usage::UsageWatch;
use crate::admission::Permit;
use crate::body::{Completion, ResBody};
use crate::error::{GatewayError, SseStyle};
use crate::registry::Worker;
use crate::request_id::RequestId;
use crate::routing::{Decision, Lease, Outcome};
use crate::state::AppState;
use crate::upstream::UpResponse;

/// The body of every response the gateway sends: a worker's body carries a [`RequestGuard`].
pub(crate) type Body = ResBody<RequestGuard, UpResponse>;

/// What to do when a proxied response ends (or is abandoned): release and record.
#[derive(Debug)]
pub(crate) struct RequestGuard {
    lease: Option<Lease>,
    start: Instant,
    /// The gateway's state, one handle for what the guard records: the metrics, the routing
    /// clock (the lease's first-byte time: `ttft_aware` learns from it) and the registry (told
    /// when the worker breaks off its response).
    state: Arc<AppState>,
    /// The response is a server-sent event stream, so its first data frame is the first token.
    event_stream: bool,
    first_byte_seen: bool,
    worker: Arc<Worker>,
    /// A server-sent-event stream: a break ends with an error event (see the module docs).
    sse: Option<SseEnd>,
    /// The admission permit (`--max-concurrent-requests`), held until the body ends or is
    /// dropped.
    permit: Option<Permit>,
    /// A Responses answer: its id is recorded for the chain (`chain.rs`).
    chain: Option<Box<ChainWatch>>,
    /// The answer's reported cached tokens are read (`usage.rs`).
    usage: Option<Box<UsageWatch>>,
    /// The gateway's own headers of the response, written beside the worker's fields (no
    /// header map is built for a worker's response): `x-smg-routed-worker-id`, and the
    /// `x-request-id` the service sets ([`set_request_id`]).
    routed: HeaderValue,
    request_id: Option<RequestId>,
}

impl RequestGuard {
    /// The gateway's own headers of the response (names lowercase), in order.
    pub(crate) fn own_headers(&self) -> impl Iterator<Item = (&'static str, &[u8])> {
        std::iter::once((ROUTED_WORKER_NAME, self.routed.as_bytes())).chain(
            self.request_id
                .as_ref()
                .map(|id| ("x-request-id", id.as_bytes())),
        )
    }
}

/// Sets a worker's response's `x-request-id` (beside its fields, see [`RequestGuard`]); a
/// response the gateway made gets `id` back, for its header map.
pub(crate) fn set_request_id(resp: &mut Response<Body>, id: RequestId) -> Option<RequestId> {
    match resp.body_mut().guard_mut() {
        Some(g) => {
            g.request_id = Some(id);
            None
        }
        None => Some(id),
    }
}

/// How a broken server-sent-event stream ends.
#[derive(Debug)]
struct SseEnd {
    /// The bytes so far end on an event boundary (a blank line).
    at_boundary: bool,
    /// The stream's dialect (set from the endpoint by [`set_sse_style`]).
    style: SseStyle,
}

impl Completion for RequestGuard {
    fn on_data(&mut self, data: &Bytes) {
        if !self.first_byte_seen {
            self.first_byte_seen = true;
            // one clock read for the lease's first-byte time and the histogram
            let now = Instant::now();
            if let Some(lease) = self.lease.as_mut() {
                lease.first_byte(self.state.clock.at(now), self.event_stream);
            }
            self.state
                .metrics
                .ttft
                .observe(now.saturating_duration_since(self.start).as_secs_f64());
        }
        if let (Some(sse), false) = (self.sse.as_mut(), data.is_empty()) {
            sse.at_boundary = data.ends_with(b"\n\n") || data.ends_with(b"\r\n\r\n");
        }
        if let Some(c) = self.chain.as_mut() {
            c.on_data(data);
        }
        if let Some(u) = self.usage.as_mut() {
            u.on_data(data);
        }
    }

    fn poll_release(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        match self.chain.as_mut() {
            Some(c) => c.poll_release(cx),
            None => std::task::Poll::Ready(()),
        }
    }

    /// The response was read to its end (the body itself handed its connection back).
    fn finish(&mut self) {
        if let Some(u) = self.usage.take() {
            u.finish();
        }
    }

    /// The worker broke off its response: a failure of the worker.
    fn broken(mut self, error: &dyn std::error::Error) -> Option<Bytes> {
        self.state.metrics.stream_errors.inc();
        self.state.registry.report(&self.worker, Outcome::Failure);
        let sse = self.sse.take()?;
        let err = GatewayError::UpstreamStream {
            worker: self.worker.url.to_string(),
            reason: error.to_string(),
        };
        tracing::warn!(error = %err, "worker stream broke; ending it with an error event");
        Some(err.to_sse_event(!sse.at_boundary, sse.style))
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.lease.take();
        self.state
            .metrics
            .duration
            .observe(self.start.elapsed().as_secs_f64());
    }
}

/// Keeps `permit` for as long as `resp`'s body lasts: to its end for a worker's body; a
/// response the gateway made is complete, so the permit goes at once.
pub(crate) fn hold_permit(resp: &mut Response<Body>, permit: Permit) {
    if let Some(g) = resp.body_mut().guard_mut() {
        g.permit = Some(permit);
    }
}

/// Makes a broken stream in `resp` end with an error event of this dialect.
pub(crate) fn set_sse_style(resp: &mut Response<Body>, style: SseStyle) {
    if let Some(sse) = resp.body_mut().guard_mut().and_then(|g| g.sse.as_mut()) {
        sse.style = style;
    }
}

/// The worker's response as the client's.
pub(crate) fn respond(
    state: &Arc<AppState>,
    resp: Response<UpResponse>,
    worker: &Arc<Worker>,
    mut decision: Decision,
    start: Instant,
    chain: Option<ChainWatch>,
) -> Response<Body> {
    // PD mode reads no reports: the decode worker's answer reports the prefill worker's cache
    let usage = decision
        .lease
        .take_ticket()
        .filter(|_| resp.status().is_success() && state.pd.is_none())
        .map(|t| Box::new(UsageWatch::new(state, t, worker.url.clone())));
    // the worker's header fields travel with its body (no header map): the client side writes
    // them beside the gateway's own headers (the guard's, `own_headers`), dropping the
    // hop-by-hop ones as it writes (one pass over them, `server/h1/head.rs`)
    let (parts, incoming) = resp.into_parts();
    let event_stream = incoming
        .fields()
        .and_then(|f| f.first("content-type"))
        .is_some_and(|v| v.starts_with(b"text/event-stream"));
    let guard = RequestGuard {
        lease: Some(decision.lease),
        start,
        state: state.clone(),
        event_stream,
        first_byte_seen: false,
        worker: worker.clone(),
        sse: event_stream.then_some(SseEnd {
            at_boundary: true,
            style: SseStyle::OpenAi,
        }),
        permit: None,
        chain: chain.filter(|_| parts.status.is_success()).map(Box::new),
        usage,
        routed: worker.url_header.clone(),
        request_id: None,
    };
    Response::from_parts(parts, ResBody::proxied(incoming, guard))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The request path moves the response about a dozen times on its way to the connection:
    /// within 128 bytes each move is a short copy (a gateway-made body is boxed for it).
    #[test]
    fn a_response_of_the_request_path_fits_in_128_bytes() {
        assert!(std::mem::size_of::<Response<Body>>() <= 128);
    }
}

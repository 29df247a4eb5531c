//! Stage 4 of a proxied request: the worker's response on its way back.
//!
//! The response streams back with `x-smg-routed-worker-id` naming the worker and a guard that
//! holds the routing lease and the pooled connection until the body ends (or the client goes).

use std::sync::Arc;
use std::time::Instant;

use http::{Response, header};
use hyper::body::Incoming;

use super::headers::{self, ROUTED_WORKER};
use crate::body::{ProxiedBody, RequestGuard, ResBody, SseEnd};
use crate::pool::Conn;
use crate::registry::Worker;
use crate::routing::Decision;
use crate::state::AppState;

/// The worker's response as the client's.
pub(crate) fn respond(
    state: &Arc<AppState>,
    resp: Response<Incoming>,
    conn: Conn,
    worker: &Arc<Worker>,
    decision: Decision,
    start: Instant,
) -> Response<ResBody> {
    let (mut parts, incoming) = resp.into_parts();
    headers::strip_response_headers(&mut parts.headers);
    parts
        .headers
        .insert(ROUTED_WORKER, worker.url_header.clone());
    let event_stream = parts
        .headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let sse = event_stream.then(|| SseEnd::new(worker.url.clone()));
    let guard = RequestGuard {
        lease: Some(decision.lease),
        conn: Some(conn),
        start,
        metrics: state.metrics.clone(),
        clock: state.clock.clone(),
        event_stream,
        first_byte_seen: false,
        registry: state.registry.clone(),
        worker: worker.clone(),
    };
    Response::from_parts(
        parts,
        ResBody::Proxied(Box::new(ProxiedBody {
            inner: incoming,
            guard: Some(guard),
            sse,
            permit: None,
        })),
    )
}

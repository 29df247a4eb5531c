//! The admin API: `GET /workers`, `POST /workers`, `DELETE /workers/{id}`.
//!
//! Guarded by `--admin-api-key` (Bearer) when set. `POST` probes the new worker (`/health`,
//! `/v1/models`) and registers it healthy or not; adding a worker moves no key. `DELETE` takes
//! the id from `GET /workers` or the worker URL (percent-encoded); only its keys are re-placed.

use std::sync::Arc;

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde::Deserialize;

use crate::body::ResBody;
use crate::error::GatewayError;
use crate::registry::Worker;
use crate::routing::BreakerState;
use crate::state::AppState;

/// A JSON response with this status.
pub(crate) fn json(status: StatusCode, value: &serde_json::Value) -> Response<ResBody> {
    let mut resp = Response::new(ResBody::full(Bytes::from(value.to_string())));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}

fn describe(state: &AppState, w: &Worker) -> serde_json::Value {
    let now = state.clock.now();
    let s = w.state();
    let cb = match s.breaker.state(now) {
        BreakerState::Closed => "closed",
        BreakerState::Open { .. } => "open",
        BreakerState::HalfOpen => "half_open",
    };
    serde_json::json!({
        "id": w.id.0.to_string(),
        "url": &*w.url,
        "models": s.models.iter().map(|m| &**m).collect::<Vec<_>>(),
        "healthy": s.health.is_healthy(),
        "circuit_breaker": cb,
        "requests_active": w.stats.in_flight(),
        "routing_keys_active": w.stats.pinned_keys(),
        "kv_capacity_tokens": w.stats.kv_capacity_tokens(),
    })
}

/// `GET /workers`.
pub(crate) fn list(state: &AppState) -> Response<ResBody> {
    let workers: Vec<_> = state
        .registry
        .workers()
        .iter()
        .map(|w| describe(state, w))
        .collect();
    json(StatusCode::OK, &serde_json::json!({ "workers": workers }))
}

#[derive(Deserialize)]
struct AddWorker {
    url: String,
}

/// `POST /workers` with `{"url": "http://host:port"}`.
pub(crate) async fn add(
    state: &Arc<AppState>,
    body: Incoming,
) -> Result<Response<ResBody>, GatewayError> {
    let bytes = http_body_util::Limited::new(body, 64 * 1024)
        .collect()
        .await
        .map_err(|e| GatewayError::BadRequest(format!("cannot read body: {e}")))?
        .to_bytes();
    let req: AddWorker =
        serde_json::from_slice(&bytes).map_err(|e| GatewayError::JsonParse(e.to_string()))?;
    let timeout = state.config.health.timeout;
    let worker = crate::registry::join(&state.registry, &state.client, &req.url, timeout).await?;
    let healthy = worker.state().health.is_healthy();
    tracing::info!(worker = %worker.url, healthy, "worker added");
    Ok(json(StatusCode::CREATED, &describe(state, &worker)))
}

/// `DELETE /workers/{id-or-url}`.
pub(crate) fn remove(state: &AppState, raw: &str) -> Result<Response<ResBody>, GatewayError> {
    let id = percent_decode(raw);
    let worker = state
        .registry
        .remove(&id)
        .ok_or_else(|| GatewayError::WorkerNotFound(id.clone()))?;
    tracing::info!(worker = %worker.url, "worker removed");
    Ok(json(StatusCode::OK, &describe(state, &worker)))
}

pub(crate) fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn percent_decoding() {
        assert_eq!(super::percent_decode("http%3A%2F%2Fh%3A1"), "http://h:1");
        assert_eq!(super::percent_decode("3"), "3");
        assert_eq!(super::percent_decode("%zz"), "%zz");
    }
}

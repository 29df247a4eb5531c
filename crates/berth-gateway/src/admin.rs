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
use crate::registry::{Worker, WorkerAddr, fetch_kv_capacity, fetch_models};
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
        "worker_type": crate::pd::worker_type(state, w),
        "bootstrap_port": crate::pd::bootstrap_port(state, w),
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
        .chain(crate::pd::prefill_workers(state).iter())
        .map(|w| describe(state, w))
        .collect();
    json(StatusCode::OK, &serde_json::json!({ "workers": workers }))
}

#[derive(Deserialize)]
struct AddWorker {
    url: String,
    /// PD mode: `prefill` or `decode` (the default); `regular` outside PD mode (SMG's field).
    #[serde(default)]
    worker_type: Option<String>,
    /// PD mode: a prefill worker's bootstrap port (absent or null: none).
    #[serde(default)]
    bootstrap_port: Option<u16>,
}

/// `POST /workers` with `{"url": "http://host:port"}`; in PD mode also `"worker_type":
/// "prefill"|"decode"` and, for a prefill worker, `"bootstrap_port"`.
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
    let addr = WorkerAddr::parse(&req.url).map_err(GatewayError::BadRequest)?;
    let registry = crate::pd::registry_for(state, req.worker_type.as_deref(), req.bootstrap_port)?;
    let timeout = state.config.health.timeout;
    let healthy = crate::registry::probe_health(&state.client, &addr, timeout).await;
    let (models, kv) = if healthy {
        tokio::join!(
            fetch_models(&state.client, &addr, timeout),
            fetch_kv_capacity(&state.client, &addr, timeout)
        )
    } else {
        (Vec::new(), None)
    };
    let worker = registry.add(&req.url, models, healthy)?;
    if let Some(pd) = state
        .pd
        .as_ref()
        .filter(|pd| Arc::ptr_eq(registry, &pd.registry))
    {
        pd.set_port(&req.url, req.bootstrap_port);
    }
    if let Some(tokens) = kv {
        worker.stats.set_kv_capacity_tokens(tokens);
    }
    tracing::info!(worker = %worker.url, healthy, "worker added");
    Ok(json(StatusCode::CREATED, &describe(state, &worker)))
}

/// `DELETE /workers/{id-or-url}`.
pub(crate) fn remove(state: &AppState, raw: &str) -> Result<Response<ResBody>, GatewayError> {
    let id = percent_decode(raw);
    let worker = state
        .registry
        .remove(&id)
        .or_else(|| crate::pd::remove_prefill(state, &id))
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

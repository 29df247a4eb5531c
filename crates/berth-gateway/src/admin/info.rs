//! `/readiness`, `/v1/models`, and SMG's info routes answered by one available worker.
//!
//! `GET /health_generate`, `GET /get_server_info` and `GET /get_model_info` are sent to one
//! available worker picked at random (as SMG does: the gateway has no answer of its own), and
//! the worker's status and body come back with `x-smg-routed-worker-id` naming it.
//! `/health_generate` runs a tiny generation on an SGLang worker, so it gets
//! `--request-timeout-secs`; the two info routes get `--health-check-timeout-secs`.

use std::sync::Arc;

use http::{HeaderValue, Response, StatusCode};

use super::respond::{bytes, json};
use crate::error::GatewayError;
use crate::proxy::Body;
use crate::proxy::ROUTED_WORKER;
use crate::registry::Worker;
use crate::rng::with_rng;
use crate::state::AppState;
use crate::upstream;

/// Largest worker answer passed on.
const INFO_LIMIT: usize = 4 << 20;

/// SMG's `owned_by` and `created` for a model whose worker did not say.
const DEFAULT_OWNER: &str = "self_hosted";

/// `GET /readiness`: 200 with SMG's counts while a worker is available, else 503.
pub(crate) fn readiness(state: &AppState) -> Result<Response<Body>, GatewayError> {
    let view = state.registry.view();
    // PD mode: a pair needs a prefill worker too.
    let prefill_ready = state
        .pd
        .as_ref()
        .is_none_or(|pd| pd.registry.view().any_available);
    if !view.any_available || !prefill_ready {
        return Err(GatewayError::NoAvailableWorkers);
    }
    let healthy = view
        .workers
        .iter()
        .filter(|w| w.state().health.is_healthy())
        .count();
    Ok(json(
        StatusCode::OK,
        &serde_json::json!({
            "status": "ready",
            "healthy_workers": healthy,
            "total_workers": view.workers.len(),
        }),
    ))
}

/// `GET /v1/models`: the union of the workers' models, each with the `created` and `owned_by`
/// of the first worker that lists it.
pub(crate) fn models(state: &AppState) -> Response<Body> {
    let view = state.registry.view();
    let cards: Vec<_> = view.workers.iter().flat_map(|w| w.cards()).collect();
    let data: Vec<_> = view
        .models
        .iter()
        .map(|m| {
            let card = cards.iter().find(|c| c.id == *m);
            serde_json::json!({
                "id": &**m,
                "object": "model",
                "created": card.map_or(0, |c| c.created),
                "owned_by": card.and_then(|c| c.owned_by.as_deref()).unwrap_or(DEFAULT_OWNER),
            })
        })
        .collect();
    json(
        StatusCode::OK,
        &serde_json::json!({"object": "list", "data": data}),
    )
}

/// One available worker, at random.
fn pick(state: &AppState) -> Option<Arc<Worker>> {
    let view = state.registry.view();
    let available: Vec<&Arc<Worker>> = view
        .snapshot
        .entries()
        .iter()
        .filter(|e| e.available)
        .filter_map(|e| view.worker(e.id))
        .collect();
    if available.is_empty() {
        return None;
    }
    let i = with_rng(|rng| rng.below(available.len()));
    Some(available[i].clone())
}

/// `GET path` on one available worker; its status and body are passed on.
pub(crate) async fn forward(state: &AppState, path: &str) -> Result<Response<Body>, GatewayError> {
    let worker = pick(state).ok_or(GatewayError::NoAvailableWorkers)?;
    let timeout = if path == "/health_generate" {
        state.config.request_timeout
    } else {
        state.config.health.timeout
    };
    let (status, body) = upstream::get(&state.client, &worker.addr, path, timeout, INFO_LIMIT)
        .await
        .map_err(|reason| {
            if reason == upstream::TIMED_OUT {
                GatewayError::UpstreamTimeout(worker.url.to_string())
            } else {
                GatewayError::UpstreamConnection {
                    worker: worker.url.to_string(),
                    reason,
                }
            }
        })?;
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut resp = bytes(status, "application/json", body);
    let header: HeaderValue = worker.url_header.clone();
    resp.headers_mut().insert(ROUTED_WORKER, header);
    Ok(resp)
}

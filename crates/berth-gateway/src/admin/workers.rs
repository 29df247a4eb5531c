//! `GET /workers`, `GET /workers/{id}`, `POST /workers`, `DELETE /workers/{id}`.
//!
//! The listing has SMG's shape and field names (`{"workers": [...], "total", "stats"}`; per
//! worker `id`, `url`, `model_id`, `models`, `worker_type`, `connection_mode`, `runtime_type`,
//! `labels`, `priority`, `cost`, `is_healthy`, `status`, `load`, `http2`), with berth's own
//! fields alongside (`circuit_breaker`, `requests_active`, `routing_keys_active`,
//! `kv_capacity_tokens`, `effective_kv_tokens` (what routing assumes the worker keeps: the
//! reported capacity, else the learned one) and `learned_kv_tokens` (learned from its reported
//! cached tokens with `--cache-feedback on`, `null` until learned)). `POST` probes the new worker (`/health`, `/v1/models`) and registers
//! it healthy or not; adding a worker moves no key. `{id}` is the id from the listing or the
//! worker URL (percent-encoded); `DELETE` re-places only the removed worker's keys. In PD mode
//! (`--pd-disaggregation`) both pools are listed with their `worker_type` (`prefill`/`decode`)
//! and a prefill worker's `bootstrap_port`; `POST` takes SMG's `worker_type` and
//! `bootstrap_port` (see `admin/pd.rs`).

use std::sync::Arc;

use crate::request_body::ConnBody;
use http::{Response, StatusCode};
use http_body_util::BodyExt;
use serde::Deserialize;

use super::respond::json;
use crate::error::GatewayError;
use crate::proxy::Body;
use crate::registry::Worker;
use crate::routing::BreakerState;
use crate::state::AppState;
use crate::upstream::WorkerAddr;

/// SMG's default worker priority and cost: berth has neither, so every worker shows these.
const PRIORITY: u32 = 50;
const COST: f64 = 1.0;

/// SMG's runtime type for a worker whose `/v1/models` says `owned_by: <name>`.
fn runtime_type(owned_by: Option<&str>) -> &'static str {
    match owned_by {
        Some("sglang") => "sglang",
        Some("vllm") => "vllm",
        Some("trtllm") => "trtllm",
        _ => "generic",
    }
}

/// One worker in SMG's shape plus berth's fields.
pub(crate) fn describe(state: &AppState, w: &Worker) -> serde_json::Value {
    let now = state.clock.now();
    let cards = w.cards();
    let s = w.state();
    let cb = match s.breaker.state(now) {
        BreakerState::Closed => "closed",
        BreakerState::Open { .. } => "open",
        BreakerState::HalfOpen => "half_open",
    };
    let healthy = s.health.is_healthy();
    let mut labels = serde_json::Map::new();
    if let Some(rank) = w.addr.rank() {
        labels.insert("dp_rank".into(), rank.to_string().into());
    }
    serde_json::json!({
        "id": w.id.0.to_string(),
        "url": &*w.url,
        "model_id": s.models.first().map_or("unknown", |m| &**m),
        "models": s.models.iter().map(|m| serde_json::json!({"id": &**m})).collect::<Vec<_>>(),
        "worker_type": super::pd::worker_type(state, w),
        "bootstrap_port": super::pd::bootstrap_port(state, w),
        "connection_mode": "http",
        "runtime_type": runtime_type(cards.first().and_then(|c| c.owned_by.as_deref())),
        "labels": labels,
        "priority": PRIORITY,
        "cost": COST,
        "is_healthy": healthy,
        "status": if healthy { "ready" } else { "not_ready" },
        "load": w.stats.in_flight(),
        "http2": false,
        "circuit_breaker": cb,
        "requests_active": w.stats.in_flight(),
        "routing_keys_active": w.stats.pinned_keys(),
        "kv_capacity_tokens": w.stats.kv_capacity_tokens(),
        "effective_kv_tokens": w.stats.effective_kv_tokens(),
        "learned_kv_tokens": w.stats.learned_kv_tokens(),
    })
}

/// Every registered worker: the regular (or, in PD mode, decode) pool, then the prefill pool.
fn all_workers(state: &AppState) -> Vec<Arc<Worker>> {
    let mut all = state.registry.workers();
    all.extend(super::pd::prefill_workers(state));
    all
}

/// `GET /workers`.
pub(crate) fn list(state: &AppState) -> Response<Body> {
    let all = all_workers(state);
    let count = |t: &str| {
        all.iter()
            .filter(|w| super::pd::worker_type(state, w) == t)
            .count()
    };
    let stats = serde_json::json!({
        "prefill_count": count("prefill"),
        "decode_count": count("decode"),
        "regular_count": count("regular"),
    });
    let workers: Vec<_> = all.iter().map(|w| describe(state, w)).collect();
    json(
        StatusCode::OK,
        &serde_json::json!({
            "workers": workers,
            "total": all.len(),
            "stats": stats,
        }),
    )
}

/// The registered worker (either pool) with this id, or this URL (percent-encoded).
fn find(state: &AppState, raw: &str) -> Result<Arc<Worker>, GatewayError> {
    let id = percent_decode(raw);
    all_workers(state)
        .into_iter()
        .find(|w| *w.url == *id || id.parse::<u32>().is_ok_and(|n| w.id.0 == n))
        .ok_or(GatewayError::WorkerNotFound(id))
}

/// `GET /workers/{id-or-url}`.
pub(crate) fn get(state: &AppState, raw: &str) -> Result<Response<Body>, GatewayError> {
    let worker = find(state, raw)?;
    Ok(json(StatusCode::OK, &describe(state, &worker)))
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
    body: ConnBody,
) -> Result<Response<Body>, GatewayError> {
    let bytes = http_body_util::Limited::new(body, 64 * 1024)
        .collect()
        .await
        .map_err(|e| GatewayError::BadRequest(format!("cannot read body: {e}")))?
        .to_bytes();
    let req: AddWorker =
        serde_json::from_slice(&bytes).map_err(|e| GatewayError::JsonParse(e.to_string()))?;
    let worker = register(
        state,
        &req.url,
        req.worker_type.as_deref(),
        req.bootstrap_port,
    )
    .await?;
    Ok(json(StatusCode::CREATED, &describe(state, &worker)))
}

/// Probes `url` and registers it (healthy or not) in the pool `worker_type` names (PD mode);
/// shared with the legacy `/add_worker` (no type: the regular or decode pool).
pub(crate) async fn register(
    state: &Arc<AppState>,
    url: &str,
    worker_type: Option<&str>,
    bootstrap_port: Option<u16>,
) -> Result<Arc<Worker>, GatewayError> {
    WorkerAddr::parse(url).map_err(GatewayError::BadRequest)?;
    let registry = super::pd::registry_for(state, worker_type, bootstrap_port)?;
    if all_workers(state).iter().any(|w| &*w.url == url) {
        return Err(GatewayError::BadRequest(format!(
            "worker `{url}` is already registered"
        )));
    }
    let timeout = state.config.health.timeout;
    let worker = crate::registry::join(registry, &state.client, url, timeout).await?;
    let healthy = worker.state().health.is_healthy();
    if let Some(pd) = state
        .pd
        .as_ref()
        .filter(|pd| Arc::ptr_eq(registry, &pd.registry))
    {
        pd.set_port(url, bootstrap_port);
    }
    tracing::info!(worker = %worker.url, healthy, "worker added");
    Ok(worker)
}

/// `DELETE /workers/{id-or-url}`.
pub(crate) fn remove(state: &AppState, raw: &str) -> Result<Response<Body>, GatewayError> {
    let worker = unregister(state, &percent_decode(raw))?;
    Ok(json(StatusCode::OK, &describe(state, &worker)))
}

/// Removes the worker with this id or URL; shared with the legacy `/remove_worker`.
pub(crate) fn unregister(state: &AppState, id_or_url: &str) -> Result<Arc<Worker>, GatewayError> {
    let worker = state
        .registry
        .remove(id_or_url)
        .or_else(|| super::pd::remove_prefill(state, id_or_url))
        .ok_or_else(|| GatewayError::WorkerNotFound(id_or_url.to_owned()))?;
    tracing::info!(worker = %worker.url, "worker removed");
    Ok(worker)
}

/// Decodes `%XX` escapes (a worker URL in a path segment); anything else is kept as is.
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

    #[test]
    fn runtime_types_follow_owned_by() {
        assert_eq!(super::runtime_type(Some("sglang")), "sglang");
        assert_eq!(super::runtime_type(Some("vllm")), "vllm");
        assert_eq!(super::runtime_type(Some("someone")), "generic");
        assert_eq!(super::runtime_type(None), "generic");
    }
}

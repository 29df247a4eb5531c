//! Discovery and health endpoints, shaped like SGLang's so that both berth and SMG accept the
//! worker: SMG detects the runtime from `/v1/models`' `owned_by` ("sglang"), reads
//! `/server_info` and `/model_info` (falling back to the `get_` aliases), and polls `/v1/loads`.

use std::sync::Arc;

use http::StatusCode;
use serde_json::{Value, json};

use super::respond::{self, SimResponse};
use crate::state::Shared;

pub(crate) fn health(shared: &Arc<Shared>) -> SimResponse {
    if shared.faults.get().fail_health {
        let mut resp = respond::error(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "health failure injected by berth sim-worker",
            None,
        );
        resp.headers_mut()
            .insert("x-sim-fault", http::HeaderValue::from_static("health"));
        return resp;
    }
    respond::json(
        StatusCode::OK,
        &json!({"status": "ok", "worker_id": shared.worker_id}),
    )
}

pub(crate) fn models(shared: &Arc<Shared>) -> SimResponse {
    let data: Vec<Value> = shared
        .config
        .models
        .iter()
        .map(|m| {
            json!({
                "id": m,
                "object": "model",
                "created": shared.started_unix,
                "owned_by": "sglang",
                "root": m,
                "max_model_len": shared.config.kv_capacity_tokens,
            })
        })
        .collect();
    respond::json(StatusCode::OK, &json!({"object": "list", "data": data}))
}

pub(crate) fn server_info(shared: &Arc<Shared>) -> SimResponse {
    let model = shared.default_model();
    let stats = shared.stats();
    respond::json(
        StatusCode::OK,
        &json!({
            "model_path": model,
            "tokenizer_path": model,
            "served_model_name": model,
            "served_model_names": shared.config.models,
            "tp_size": 1,
            "dp_size": 1,
            "load_balance_method": "round_robin",
            "disaggregation_mode": "null",
            "max_running_requests": shared.config.max_running,
            "max_total_num_tokens": shared.config.kv_capacity_tokens,
            "max_total_tokens": shared.config.kv_capacity_tokens,
            "page_size": crate::kv::BLOCK_TOKENS,
            "version": concat!("berth-sim-", env!("CARGO_PKG_VERSION")),
            "worker_id": shared.worker_id,
            "internal_states": [{
                "num_running_reqs": stats.running,
                "num_waiting_reqs": stats.queued,
                "token_usage": token_usage(stats.kv_used_tokens, stats.kv_capacity_tokens),
            }],
        }),
    )
}

pub(crate) fn model_info(shared: &Arc<Shared>) -> SimResponse {
    let model = shared.default_model();
    respond::json(
        StatusCode::OK,
        &json!({
            "model_path": model,
            "tokenizer_path": model,
            "is_generation": true,
            "preferred_sampling_params": null,
            "weight_version": "default",
            "has_image_understanding": false,
            "has_audio_understanding": false,
            "model_type": "llama",
            "architectures": ["LlamaForCausalLM"],
        }),
    )
}

fn token_usage(used: u64, capacity: u64) -> f64 {
    if capacity == 0 {
        0.0
    } else {
        used as f64 / capacity as f64
    }
}

pub(crate) fn loads(shared: &Arc<Shared>) -> SimResponse {
    let stats = shared.stats();
    let load = json!({
        "dp_rank": 0,
        "num_running_reqs": stats.running,
        "num_waiting_reqs": stats.queued,
        "num_reqs": stats.running + stats.queued,
        "num_used_tokens": stats.kv_used_tokens,
        "num_tokens": shared.engine.tokens_in_use(),
        "max_total_num_tokens": stats.kv_capacity_tokens,
        "token_usage": token_usage(stats.kv_used_tokens, stats.kv_capacity_tokens),
    });
    respond::json(
        StatusCode::OK,
        &json!({
            "timestamp": crate::state::unix_now(),
            "dp_rank_count": 1,
            "worker_id": shared.worker_id,
            "loads": [load],
        }),
    )
}

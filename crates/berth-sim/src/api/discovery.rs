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
                "max_model_len": shared.config.context_length,
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
            "context_length": shared.config.context_length,
            "version": concat!("berth-sim-", env!("CARGO_PKG_VERSION")),
            "worker_id": shared.worker_id,
            "internal_states": [{
                "num_running_reqs": stats.running,
                "num_waiting_reqs": stats.queued,
                "token_usage": token_usage(stats.kv_in_use_tokens, stats.kv_capacity_tokens),
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

/// `GET /v1/loads`, SGLang's shape: one entry per DP rank (one here).
pub(crate) fn loads(shared: &Arc<Shared>) -> SimResponse {
    let stats = shared.stats();
    let queued_tokens = shared.engine.queued_tokens();
    let hit_rate = if stats.prompt_tokens == 0 {
        0.0
    } else {
        stats.cached_tokens as f64 / stats.prompt_tokens as f64
    };
    let load = json!({
        "dp_rank": 0,
        "num_running_reqs": stats.running,
        "num_waiting_reqs": stats.queued,
        "num_waiting_uncached_tokens": queued_tokens,
        "num_used_tokens": stats.kv_in_use_tokens,
        "num_total_tokens": stats.kv_in_use_tokens + queued_tokens,
        "max_total_num_tokens": stats.kv_capacity_tokens,
        "max_running_requests": shared.config.max_running,
        "token_usage": token_usage(stats.kv_in_use_tokens, stats.kv_capacity_tokens),
        "gen_throughput": 0.0,
        "cache_hit_rate": hit_rate,
        "utilization": 0.0,
    });
    respond::json(
        StatusCode::OK,
        &json!({
            "timestamp": iso8601(std::time::SystemTime::now()),
            "version": concat!("berth-sim-", env!("CARGO_PKG_VERSION")),
            "worker_id": shared.worker_id,
            "loads": [load],
        }),
    )
}

/// `YYYY-MM-DDTHH:MM:SS.ffffff+00:00`, as SGLang stamps its load reports.
fn iso8601(t: std::time::SystemTime) -> String {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}+00:00",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_micros()
    )
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn iso8601_formats_utc() {
        let t = UNIX_EPOCH + Duration::from_micros(1_795_966_220_123_456);
        assert_eq!(super::iso8601(t), "2026-11-29T15:30:20.123456+00:00");
        assert_eq!(
            super::iso8601(UNIX_EPOCH),
            "1970-01-01T00:00:00.000000+00:00"
        );
    }
}

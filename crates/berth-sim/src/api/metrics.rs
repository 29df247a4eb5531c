//! `/metrics` in Prometheus text, with SGLang's metric names (`sglang:*`, labelled by model) so
//! dashboards and scrapers written for SGLang read the simulated worker unchanged.

use std::fmt::Write as _;
use std::sync::Arc;

use http::{HeaderValue, StatusCode};

use super::respond::{SimResponse, with_body};
use crate::body::SimBody;
use crate::state::Shared;

pub(crate) fn render(shared: &Arc<Shared>) -> SimResponse {
    let s = shared.stats();
    let model = shared
        .default_model()
        .replace('\\', "\\\\")
        .replace('"', "\\\"");
    let worker = shared.worker_id.replace('\\', "\\\\").replace('"', "\\\"");
    let labels = format!("model_name=\"{model}\",worker_id=\"{worker}\"");
    let hit_rate = if s.prompt_tokens == 0 {
        0.0
    } else {
        s.cached_tokens as f64 / s.prompt_tokens as f64
    };
    let usage = if s.kv_capacity_tokens == 0 {
        0.0
    } else {
        s.kv_in_use_tokens as f64 / s.kv_capacity_tokens as f64
    };
    let rows: [(&str, &str, &str, String); 10] = [
        (
            "sglang:num_running_reqs",
            "gauge",
            "Requests running.",
            s.running.to_string(),
        ),
        (
            "sglang:num_queue_reqs",
            "gauge",
            "Requests queued.",
            s.queued.to_string(),
        ),
        (
            "sglang:token_usage",
            "gauge",
            "Fraction of the KV cache running requests use (evictable cache not counted).",
            format!("{usage}"),
        ),
        (
            "sglang:num_used_tokens",
            "gauge",
            "KV tokens running requests use.",
            s.kv_in_use_tokens.to_string(),
        ),
        (
            "sglang:cache_hit_rate",
            "gauge",
            "Cached prompt tokens over prompt tokens.",
            format!("{hit_rate}"),
        ),
        (
            "sglang:prompt_tokens_total",
            "counter",
            "Prompt tokens processed.",
            s.prompt_tokens.to_string(),
        ),
        (
            "sglang:cached_tokens_total",
            "counter",
            "Prompt tokens found in the KV cache.",
            s.cached_tokens.to_string(),
        ),
        (
            "sglang:generation_tokens_total",
            "counter",
            "Tokens generated.",
            s.completion_tokens.to_string(),
        ),
        (
            "sglang:num_requests_total",
            "counter",
            "Inference requests received.",
            s.requests.to_string(),
        ),
        (
            "sglang:num_aborted_requests_total",
            "counter",
            "Requests answered with an injected error.",
            s.errors_injected.to_string(),
        ),
    ];
    let mut out = String::with_capacity(2048);
    for (name, kind, help, value) in rows {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{{labels}}} {value}"
        );
    }
    with_body(
        StatusCode::OK,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        SimBody::full(out),
    )
}

//! What gateways probe: health, models, server and model info, loads, metrics.
#![allow(clippy::unwrap_used)]

mod common;

use berth_sim::SimWorker;
use serde_json::json;

use common::{client, get, post};

#[tokio::test]
async fn discovery_endpoints_look_like_sglang() {
    let worker = SimWorker::builder()
        .worker_id("w9")
        .models(["m1", "m2"])
        .time_scale(0.0)
        .spawn_on_loopback()
        .await;
    let http = client();
    let base = worker.url();
    let models = get(&http, &base, "/v1/models").await.json();
    assert_eq!(models["object"], "list");
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["m1", "m2"]);
    assert!(
        models["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["owned_by"] == "sglang")
    );
    for path in ["/server_info", "/get_server_info"] {
        let info = get(&http, &base, path).await.json();
        assert_eq!(info["model_path"], "m1");
        assert_eq!(info["dp_size"], 1);
    }
    for path in ["/model_info", "/get_model_info"] {
        assert_eq!(get(&http, &base, path).await.json()["is_generation"], true);
    }
    let health = get(&http, &base, "/health").await;
    assert_eq!(health.status, 200);
    assert_eq!(health.header("x-sim-worker-id"), Some("w9"));
    let missing = get(&http, &base, "/nope").await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.header("x-sim-worker-id"), Some("w9"));
}

#[tokio::test]
async fn loads_and_metrics_report_tokens_and_cache() {
    let worker = SimWorker::builder()
        .time_scale(0.0)
        .spawn_on_loopback()
        .await;
    let http = client();
    let base = worker.url();
    let body = json!({"model": "sim-model", "messages": [{"role": "user", "content": "a fairly long question ".repeat(8)}], "max_tokens": 4});
    post(&http, &base, "/v1/chat/completions", &body).await;
    post(&http, &base, "/v1/chat/completions", &body).await;
    let loads = get(&http, &base, "/v1/loads").await.json();
    let load = &loads["loads"][0];
    assert_eq!(load["dp_rank"], 0);
    assert_eq!(load["num_running_reqs"], 0);
    // SGLang's meaning: the KV running requests use; the idle worker's cached prompts are
    // evictable and do not count (they are in the sim's own stats).
    assert_eq!(load["num_used_tokens"], 0);
    assert_eq!(load["token_usage"], 0.0);
    assert!(worker.stats().kv_used_tokens > 0);
    assert!(load["cache_hit_rate"].as_f64().unwrap() > 0.0);
    assert!(loads["timestamp"].is_string());
    let stats = worker.stats();
    let metrics = get(&http, &base, "/metrics").await;
    assert!(
        metrics
            .header("content-type")
            .unwrap()
            .starts_with("text/plain")
    );
    let text = metrics.text();
    for name in [
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:token_usage",
        "sglang:cache_hit_rate",
        "sglang:prompt_tokens_total",
        "sglang:generation_tokens_total",
    ] {
        assert!(text.contains(&format!("# TYPE {name} ")), "{name} missing");
    }
    let cached_line = text
        .lines()
        .find(|l| l.starts_with("sglang:cached_tokens_total{"))
        .unwrap();
    assert!(cached_line.ends_with(&format!(" {}", stats.cached_tokens)));
    let json_stats = get(&http, &base, "/sim/stats").await.json();
    assert_eq!(json_stats["stats"]["requests"], 2);
}

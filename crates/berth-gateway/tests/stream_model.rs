//! Issue #11 part 4: an unknown `model` in a body that streams (no override, not cache_aware) is
//! refused with 404 `model_not_found` before a worker runs it, found by an incremental scan of
//! the bytes as they pass, wherever the field is.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use berth_gateway::routing::PolicyKind;
use common::*;

fn body(model: &str, model_last: bool, pad: usize) -> String {
    let messages = serde_json::json!([{"role": "user", "content": "x".repeat(pad)}]);
    if model_last {
        format!(r#"{{"messages":{messages},"max_tokens":2,"model":"{model}"}}"#)
    } else {
        format!(r#"{{"model":"{model}","messages":{messages},"max_tokens":2}}"#)
    }
}

#[tokio::test]
async fn an_unknown_model_on_a_streamed_body_is_refused_before_any_worker_runs_it() {
    for policy in [
        PolicyKind::Manual,
        PolicyKind::ConsistentHashing,
        PolicyKind::RoundRobin,
        PolicyKind::Random,
        PolicyKind::PowerOfTwo,
    ] {
        let w = sims(2).await;
        let mut c = config(&w);
        c.router.policy = policy;
        let g = start(c).await;
        let key = [
            ("x-smg-routing-key", &b"conv-1"[..]),
            ("content-type", b"application/json"),
        ];
        // Model first, model after the messages, and after 400 KiB of messages (past the
        // lookahead: checked while the body streams, cut off before the worker has it all).
        for (last, pad) in [(false, 10), (true, 10), (true, 400 << 10)] {
            let r = g
                .client
                .send(
                    http::Method::POST,
                    "/v1/chat/completions",
                    &key,
                    body("no-such-model", last, pad),
                )
                .await;
            assert_eq!(
                r.status, 404,
                "{policy:?} last {last} pad {pad}: {:?}",
                r.body
            );
            assert_eq!(r.error_code().as_deref(), Some("model_not_found"));
            assert_eq!(r.json()["error"]["param"], "model");
            let r = g
                .client
                .send(
                    http::Method::POST,
                    "/v1/chat/completions",
                    &key,
                    body("sim-model", last, pad),
                )
                .await;
            assert_eq!(
                r.status, 200,
                "{policy:?} last {last} pad {pad}: {:?}",
                r.body
            );
        }
        let ran: u64 = w.iter().map(|s| s.requests()).sum();
        assert_eq!(
            ran, 3,
            "{policy:?}: only the known-model requests reached a worker"
        );
        let m = metrics(&g.gw).await;
        assert!(
            m.contains("smg_router_request_body_path_total{path=\"streamed\""),
            "{policy:?}: the bodies streamed: {m}"
        );
        let r = g.client.get("/workers", &[]).await;
        for wk in r.json()["workers"].as_array().unwrap() {
            assert_eq!(wk["circuit_breaker"], "closed");
            assert_eq!(wk["requests_active"], 0);
        }
        g.gw.shutdown().await;
    }
}

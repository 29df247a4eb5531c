//! `--policy ttft_aware` through HTTP: header keys pin, the sticky hot path leaves the body
//! unread, keyless requests are placed and never refused, streamed first bytes end the queue.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use berth_gateway::routing::PolicyKind;
use common::*;

fn body(text: &str, stream: bool) -> serde_json::Value {
    serde_json::json!({
        "model": "sim-model",
        "messages": [{"role": "user", "content": text}],
        "max_tokens": 2,
        "stream": stream,
    })
}

#[tokio::test]
async fn a_keyed_conversation_sticks_and_its_later_turns_stream_unread() {
    let w = sims(3).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::TtftAware;
    let g = start(c).await;
    let key = [("x-smg-routing-key", &b"conv-1"[..])];
    let mut text = "You are a careful assistant. ".repeat(40);
    let first = g.client.chat(&key, body(&text, false)).await;
    assert_eq!(first.status, 200);
    let pinned = first.worker().unwrap();
    for turn in 0..4 {
        text.push_str(&format!(" Turn {turn}: tell me more."));
        let r = g.client.chat(&key, body(&text, turn % 2 == 0)).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.worker().unwrap(), pinned);
    }
    let m = metrics(&g.gw).await;
    let read = sample(
        &m,
        r#"smg_router_request_body_path_total{path="buffered",reason="ttft_text"}"#,
    );
    let unread = sample(
        &m,
        r#"smg_router_request_body_path_total{path="streamed",reason="ttft_pinned"}"#,
    );
    // the new key needs its text; the idle fleet never makes the pinned worker clearly worse
    assert_eq!(read, Some(1.0), "{m}");
    assert_eq!(unread, Some(4.0), "{m}");
    assert_eq!(
        sample(
            &m,
            r#"smg_manual_policy_branch_total{branch="occupied_hit"}"#
        ),
        Some(4.0)
    );
    // the worker got every request
    let got: usize = w.iter().map(|s| s.received().len()).sum();
    assert_eq!(got, 5);
    // each worker's cost model and queue are exported; nothing is queued once all answered
    for s in &w {
        let url = s.url();
        for term in ["base", "per_1k_tokens", "per_decoding_request"] {
            let v = sample(
                &m,
                &format!(r#"berth_worker_ttft_model_ms{{worker="{url}",term="{term}"}}"#),
            );
            assert!(v.is_some_and(|v| v >= 0.0), "{term} of {url}: {m}");
        }
        let q = sample(
            &m,
            &format!(r#"berth_worker_ttft_queued_prefill_tokens{{worker="{url}"}}"#),
        );
        assert_eq!(q, Some(0.0), "{m}");
    }
    g.gw.shutdown().await;
}

#[tokio::test]
async fn keyless_requests_are_placed_by_prediction_and_never_refused() {
    let w = sims(4).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::TtftAware;
    let g = start(c).await;
    let mut seen = std::collections::HashSet::new();
    for i in 0..40 {
        let r = g
            .client
            .chat(
                &[],
                body(&format!("question number {i} about something"), i % 2 == 0),
            )
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        seen.insert(r.worker().unwrap());
    }
    // idle workers tie, and ties break at random: more than one worker served
    assert!(seen.len() > 1, "{seen:?}");
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(
            &m,
            r#"smg_manual_policy_branch_total{branch="no_routing_id"}"#
        ),
        Some(40.0)
    );
    g.gw.shutdown().await;
}

#[tokio::test]
async fn the_override_reads_the_rid_and_every_request_ends_its_queue_entry() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::TtftAware;
    c.router.routing_key_override = true;
    let g = start(c).await;
    let mut workers = Vec::new();
    for (t, stream) in [(1, true), (2, false), (3, true)] {
        let mut b = body("a conversation keyed by its rid", stream);
        b["rid"] = serde_json::Value::from(format!("chat-9_t{t}"));
        let r = g.client.chat(&[], b).await;
        assert_eq!(r.status, 200);
        workers.push(r.worker().unwrap());
    }
    assert!(workers.iter().all(|x| *x == workers[0]), "{workers:?}");
    // nothing stays in flight once the responses have ended
    eventually("in-flight counts back to zero", || async {
        let r = g.client.get("/workers", &[]).await;
        r.json()["workers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["requests_active"] == 0)
    })
    .await;
    g.gw.shutdown().await;
}

#[tokio::test]
async fn a_workers_kv_capacity_is_learned_from_its_server_info() {
    let small = berth_sim::SimWorker::builder()
        .worker_id("small")
        .model("sim-model")
        .time_scale(0.0)
        .kv_capacity_tokens(5000)
        .spawn_on_loopback()
        .await;
    let mut w = sims(1).await;
    w.push(small);
    let mut c = config(&w);
    c.router.policy = PolicyKind::TtftAware;
    let g = start(c).await;
    let r = g.client.get("/workers", &[]).await;
    let caps: std::collections::HashMap<String, serde_json::Value> = r.json()["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["url"].as_str().unwrap().to_owned(),
                x["kv_capacity_tokens"].clone(),
            )
        })
        .collect();
    assert_eq!(caps[&w[1].url()], 5000);
    assert!(
        caps[&w[0].url()].as_u64().is_some_and(|t| t > 0),
        "{caps:?}"
    );
    g.gw.shutdown().await;
}

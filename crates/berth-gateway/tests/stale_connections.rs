//! Issue #11 part 2: a worker that closes its connection after every streamed reply (as
//! llama-server does, keep-alive headers notwithstanding). A request that fails on such a reused
//! connection before any response byte is re-sent once on a fresh connection to the same worker:
//! no 502, no retry on another worker, no pin move, no breaker failure, its own metric.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use berth_gateway::routing::PolicyKind;
use common::*;

fn stream_body() -> serde_json::Value {
    let mut b = chat_body(None);
    b["stream"] = serde_json::Value::Bool(true);
    b
}

const RESENDS: &str = "smg_router_stale_connection_resends_total";

#[tokio::test]
async fn back_to_back_streams_to_one_closing_worker_all_succeed() {
    let w = sims(1).await;
    w[0].set_close_after_stream(true);
    let mut c = config(&w);
    c.router.policy = PolicyKind::RoundRobin;
    c.breaker.failure_threshold = 1;
    let g = start(c).await;
    for i in 0..20 {
        let r = g.client.chat(&[], stream_body()).await;
        assert_eq!(r.status, 200, "request {i}: {:?}", r.body);
        assert!(
            String::from_utf8_lossy(&r.body).contains("[DONE]"),
            "request {i}: the stream ran to its end"
        );
    }
    let cut = w[0].stale_connections_cut();
    assert!(cut > 0, "the worker never cut a reused connection");
    let m = metrics(&g.gw).await;
    assert_eq!(sample(&m, RESENDS), Some(cut as f64), "{m}");
    assert_eq!(sample(&m, "smg_router_retries_total"), Some(0.0));
    let r = g.client.get("/workers", &[]).await;
    assert_eq!(r.json()["workers"][0]["circuit_breaker"], "closed");
    g.gw.shutdown().await;
}

#[tokio::test]
async fn a_key_stays_on_its_closing_worker() {
    let w = sims(4).await;
    for s in &w {
        s.set_close_after_stream(true);
    }
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    let g = start(c).await;
    let mut served = std::collections::BTreeSet::new();
    for i in 0..20 {
        let r = g
            .client
            .chat(&[("x-smg-routing-key", b"conv-1")], stream_body())
            .await;
        assert_eq!(r.status, 200, "request {i}: {:?}", r.body);
        served.insert(r.worker().unwrap());
    }
    assert_eq!(served.len(), 1, "the key moved: {served:?}");
    let m = metrics(&g.gw).await;
    assert!(sample(&m, RESENDS).unwrap() > 0.0, "{m}");
    assert_eq!(sample(&m, "smg_router_retries_total"), Some(0.0));
    assert_eq!(
        sample(
            &m,
            "smg_manual_policy_branch_total{branch=\"occupied_hit\"}"
        ),
        Some(19.0),
        "{m}"
    );
    g.gw.shutdown().await;
}

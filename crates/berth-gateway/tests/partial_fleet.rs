//! Issue #11 part 3: a gateway serves while some (or all) of its listed workers are down. It
//! answers `/health` at once, `/readiness` 503 until a worker is available, routes to the workers
//! that are up, logs the ones it waits for, and probes a worker that is not healthy yet quickly
//! (with backoff) instead of at the steady interval.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use berth_gateway::Gateway;
use berth_gateway::routing::PolicyKind;
use berth_sim::SimWorker;
use common::*;
use tokio::net::TcpListener;

/// A worker address that accepts connections into its backlog but answers nothing until a sim
/// is started on the returned listener (a worker still loading its model).
async fn not_yet_up() -> (TcpListener, String) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    (l, url)
}

fn late_config(urls: Vec<String>) -> berth_gateway::GatewayConfig {
    let mut c = berth_gateway::GatewayConfig::new(urls);
    c.router.policy = PolicyKind::RoundRobin;
    // The steady interval is far longer than any bound below: only the fast probing of a worker
    // that is not healthy yet can bring the late worker in within the test.
    c.health.interval = Duration::from_secs(600);
    c.health.timeout = Duration::from_millis(300);
    c.shutdown_grace = Duration::from_secs(5);
    c
}

#[tokio::test]
async fn a_gateway_serves_while_a_listed_worker_is_down_and_takes_it_in_when_it_comes_up() {
    let up = sims(2).await;
    let (late_listener, late_url) = not_yet_up().await;
    let mut urls: Vec<String> = up.iter().map(|s| s.url()).collect();
    urls.push(late_url.clone());
    let g = start(late_config(urls)).await;
    assert_eq!(g.client.get("/health", &[]).await.status, 200);
    assert_eq!(g.client.get("/readiness", &[]).await.status, 200);
    assert!(!healthy(&g.client, &late_url).await);
    for _ in 0..6 {
        let r = g.client.chat(&[], chat_body(None)).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_ne!(r.worker().unwrap(), late_url);
    }
    let late = SimWorker::builder()
        .worker_id("late")
        .time_scale(0.0)
        .spawn(late_listener);
    let client = &g.client;
    eventually("the late worker is taken in", || async {
        healthy(client, &late_url).await
    })
    .await;
    let mut served_late = false;
    for _ in 0..6 {
        let r = g.client.chat(&[], chat_body(None)).await;
        assert_eq!(r.status, 200);
        served_late |= r.worker().unwrap() == late_url;
    }
    assert!(served_late, "round robin never reached the late worker");
    // Its models were learned when it came up.
    let r = g.client.get("/workers", &[]).await;
    let late_entry = r.json()["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["url"] == late_url.as_str())
        .cloned()
        .unwrap();
    assert_eq!(
        late_entry["models"],
        serde_json::json!([{"id": "sim-model"}])
    );
    g.gw.shutdown().await;
    late.shutdown().await;
}

#[tokio::test]
async fn with_no_worker_up_it_answers_health_and_is_not_ready_until_one_comes_up() {
    let (late_listener, late_url) = not_yet_up().await;
    let g = start(late_config(vec![late_url.clone()])).await;
    assert_eq!(g.client.get("/health", &[]).await.status, 200);
    assert_eq!(g.client.get("/liveness", &[]).await.status, 200);
    let r = g.client.get("/readiness", &[]).await;
    assert_eq!(r.status, 503);
    assert_eq!(r.error_code().as_deref(), Some("no_available_workers"));
    let r = g.client.chat(&[], chat_body(None)).await;
    assert_eq!(r.status, 503);
    assert!(metrics(&g.gw).await.contains("smg_worker_healthy"));
    let late = SimWorker::builder().time_scale(0.0).spawn(late_listener);
    let client = &g.client;
    eventually("ready once the worker answers", || async {
        client.get("/readiness", &[]).await.status == 200
    })
    .await;
    assert_eq!(g.client.chat(&[], chat_body(None)).await.status, 200);
    g.gw.shutdown().await;
    late.shutdown().await;
}

#[tokio::test]
async fn health_answers_while_start_up_still_probes_the_workers() {
    // A worker whose probe hangs for longer than the test's bounds: `start` is still probing it,
    // yet the gateway already answers on its listener.
    let (_hung, hung_url) = not_yet_up().await;
    let mut c = late_config(vec![hung_url]);
    c.health.timeout = Duration::from_secs(120);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let starting = tokio::spawn(Gateway::builder(c).listener(listener).start());
    let client = TestClient::new(addr);
    eventually("the gateway answers /health", || async {
        tokio::net::TcpStream::connect(addr).await.is_ok()
    })
    .await;
    assert_eq!(client.get("/health", &[]).await.status, 200);
    assert_eq!(client.get("/readiness", &[]).await.status, 503);
    assert!(!starting.is_finished(), "start-up is still probing");
    starting.abort();
}

//! Issue #9: the shared pin store failing. Redis killed, frozen (accepts TCP, never answers)
//! or unreachable from the start: no client error, pins kept locally, and the replicas
//! converge again once Redis is back.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use berth_gateway::routing::PolicyKind;
use berth_gateway::{GatewayConfig, StoreSettings};
use berth_sim::SimHandle;
use common::redis::RedisServer;
use common::*;

fn store_config(w: &[SimHandle], url: String, timeout: Duration, sync: Duration) -> GatewayConfig {
    let mut c = config(w);
    c.router.policy = PolicyKind::Manual;
    let mut s = StoreSettings::new(url);
    s.timeout = timeout;
    s.sync_every = sync;
    c.sticky_store = Some(s);
    c
}

async fn store_up(g: &Running) -> Option<f64> {
    sample(&metrics(&g.gw).await, "berth_sticky_store_up")
}

async fn errors(g: &Running, op: &str) -> f64 {
    let m = metrics(&g.gw).await;
    sample(
        &m,
        &format!("berth_sticky_store_errors_total{{op=\"{op}\"}}"),
    )
    .unwrap()
}

#[tokio::test]
async fn redis_killed_mid_run_fails_no_request_and_replicas_converge_after() {
    let Some(mut redis) = RedisServer::start("redis killed mid-run") else {
        return;
    };
    let w = sims(4).await;
    let c = store_config(
        &w,
        redis.url(),
        Duration::from_secs(3),
        Duration::from_millis(100),
    );
    let a = start(c.clone()).await;
    let b = start(c).await;
    let mut pinned = Vec::new();
    for i in 0..20 {
        let key = format!("old-{i}");
        let x = a.client.keyed(&key).await;
        assert_eq!(b.client.keyed(&key).await, x);
        pinned.push((key, x));
    }
    redis.kill();
    // every request is served (keyed() asserts 200), old keys from the local pins
    for (key, x) in &pinned {
        assert_eq!(
            &a.client.keyed(key).await,
            x,
            "{key} on A during the outage"
        );
        assert_eq!(
            &b.client.keyed(key).await,
            x,
            "{key} on B during the outage"
        );
    }
    // new keys are placed by each replica alone (they may disagree for now)
    let fresh: Vec<String> = (0..20).map(|i| format!("new-{i}")).collect();
    for key in &fresh {
        a.client.keyed(key).await;
        b.client.keyed(key).await;
    }
    eventually("both replicas noticed the outage", || async {
        store_up(&a).await == Some(0.0) && store_up(&b).await == Some(0.0)
    })
    .await;
    redis.restart(); // empty: every pin it held is gone
    eventually("both replicas reconnected", || async {
        store_up(&a).await == Some(1.0) && store_up(&b).await == Some(1.0)
    })
    .await;
    // pins are written back lazily as they are used, and the replicas converge
    let all: Vec<&str> = pinned
        .iter()
        .map(|(k, _)| k.as_str())
        .chain(fresh.iter().map(String::as_str))
        .collect();
    eventually("every key on one worker on both replicas", || async {
        for key in &all {
            if a.client.keyed(key).await != b.client.keyed(key).await {
                return false;
            }
        }
        true
    })
    .await;
    for (key, x) in &pinned {
        assert_eq!(&a.client.keyed(key).await, x, "{key} kept its worker");
    }
    eventually("old pins written back to the new Redis", || async {
        let r = a.client.get("/sticky/old-0", &[]).await.json();
        r["store"] == r["local"] && !r["store"].is_null()
    })
    .await;
    assert!(errors(&a, "sync").await + errors(&a, "place").await >= 1.0);
}

#[tokio::test]
async fn a_frozen_redis_costs_one_bounded_timeout_then_is_skipped() {
    let Some(redis) = RedisServer::start("frozen redis") else {
        return;
    };
    let (logs, _guard) = logs::capture_debug_logs();
    let w = sims(3).await;
    // a long refresh period: only requests touch the store in this test
    let c = store_config(
        &w,
        redis.url(),
        Duration::from_millis(300),
        Duration::from_secs(3600),
    );
    let a = start(c).await;
    let warm = a.client.keyed("warm").await;
    assert_eq!(store_up(&a).await, Some(1.0));
    redis.freeze(true);
    for i in 0..20 {
        a.client.keyed(&format!("frozen-{i}")).await;
    }
    assert_eq!(
        a.client.keyed("warm").await,
        warm,
        "a sticky hit needs no store"
    );
    // the first new key waited for the timeout and marked the store down; the others skipped it
    assert_eq!(errors(&a, "place").await, 1.0);
    assert_eq!(store_up(&a).await, Some(0.0));
    let outage_logs = logs.text().matches("sticky store unavailable").count();
    assert_eq!(outage_logs, 1, "one log line per outage, not per request");
    redis.freeze(false);
    eventually("the store is back", || async {
        store_up(&a).await == Some(1.0)
    })
    .await;
    // a new key is placed in the store again; the outage's keys are written back lazily
    let x = a.client.keyed("after").await;
    let s = a.client.get("/sticky/after", &[]).await.json();
    assert_eq!(s["store"][0], x.as_str());
    assert!(logs.text().contains("sticky store reachable again"));
}

#[tokio::test]
async fn a_store_that_never_answers_from_the_start_serves_every_request_locally() {
    // a listener nobody accepts from: the kernel completes TCP handshakes, nothing answers
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://{}", silent.local_addr().unwrap());
    let w = sims(2).await;
    let c = store_config(
        &w,
        url,
        Duration::from_millis(200),
        Duration::from_millis(100),
    );
    let a = tokio::time::timeout(Duration::from_secs(30), start(c))
        .await
        .expect("start-up is bounded");
    for i in 0..10 {
        let key = format!("k{i}");
        let x = a.client.keyed(&key).await;
        assert_eq!(a.client.keyed(&key).await, x);
    }
    assert_eq!(store_up(&a).await, Some(0.0));
    assert!(errors(&a, "connect").await >= 1.0);
    let s = a.client.get("/sticky/k0", &[]).await.json();
    assert_eq!(s["store_error"], "sticky store unavailable");
    let d = a
        .client
        .send(http::Method::DELETE, "/sticky/k0", &[], "")
        .await;
    assert_eq!(d.status, 503);
    assert_eq!(d.error_code().as_deref(), Some("sticky_store_unavailable"));
    drop(silent);
}

//! Workers going away and coming back: failover and return, retries, the breaker, the
//! in-flight threshold, idle eviction.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use berth_gateway::routing::{AssignmentMode, PolicyKind};
use common::*;

#[tokio::test]
async fn a_key_fails_over_while_its_worker_is_unhealthy_and_returns_after() {
    let w = sims(3).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    let g = start(c).await;
    let home = g.client.keyed("conv").await;
    let sim = w.iter().find(|s| s.url() == home).unwrap();
    sim.set_health_failing(true);
    eventually("worker marked unhealthy", || async {
        !healthy(&g.client, &home).await
    })
    .await;
    let away = g.client.keyed("conv").await;
    assert_ne!(away, home);
    for _ in 0..3 {
        assert_eq!(
            g.client.keyed("conv").await,
            away,
            "sticks to the failover worker"
        );
    }
    sim.set_health_failing(false);
    eventually("worker healthy again", || async {
        healthy(&g.client, &home).await
    })
    .await;
    assert_eq!(
        g.client.keyed("conv").await,
        home,
        "returns to its earlier worker"
    );
    g.gw.shutdown().await;
}

#[tokio::test]
async fn retries_skip_the_failed_worker_and_pass_through_when_all_fail() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::RoundRobin;
    c.retry_max_retries = 3;
    c.breaker.failure_threshold = 1000;
    let g = start(c).await;
    w[0].set_error_rate(1.0, 503);
    for _ in 0..6 {
        let r = g.client.chat(&[], chat_body(None)).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.worker().unwrap(), w[1].url());
    }
    // The body was streamed (round robin reads none) and replayed byte-exact on the retry.
    let sent = chat_body(None).to_string();
    assert!(w[1].received().iter().all(|r| r.body == sent.as_bytes()));
    assert!(w[0].received().iter().all(|r| r.body == sent.as_bytes()));
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(
            &m,
            r#"smg_router_request_body_path_total{path="streamed",reason="not_needed"}"#
        ),
        Some(6.0)
    );
    assert!(
        sample(&m, "smg_router_retries_total").unwrap() >= 1.0,
        "{m}"
    );
    assert!(
        sample(
            &m,
            r#"smg_router_upstream_responses_total{status_code="503"}"#
        )
        .unwrap()
            >= 1.0
    );
    // Every worker fails: each is tried once, then the worker's own 503 passes through.
    w[1].set_error_rate(1.0, 503);
    let before = (w[0].requests(), w[1].requests());
    let r = g.client.chat(&[], chat_body(None)).await;
    assert_eq!(r.status, 503);
    assert_eq!(
        r.error_code(),
        None,
        "a worker error passes through untouched"
    );
    assert_eq!(
        (w[0].requests() - before.0, w[1].requests() - before.1),
        (1, 1)
    );
    g.gw.shutdown().await;
}

#[tokio::test]
async fn a_dead_worker_is_a_connect_error_retried_elsewhere_or_502() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    c.retry_max_retries = 0;
    c.health.interval = Duration::from_secs(3600);
    let g = start(c).await;
    let home = g.client.keyed("k").await;
    w.iter().find(|s| s.url() == home).unwrap().kill();
    let r = g
        .client
        .chat(&[("x-smg-routing-key", b"k")], chat_body(None))
        .await;
    assert_eq!(r.status, 502);
    assert_eq!(
        r.error_code().as_deref(),
        Some("upstream_connection_failed")
    );
    g.gw.shutdown().await;

    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    c.retry_max_retries = 2;
    c.health.interval = Duration::from_secs(3600);
    let g = start(c).await;
    let home = g.client.keyed("k").await;
    w.iter().find(|s| s.url() == home).unwrap().kill();
    let r = g
        .client
        .chat(&[("x-smg-routing-key", b"k")], chat_body(None))
        .await;
    assert_eq!(r.status, 200);
    assert_ne!(
        r.worker().unwrap(),
        home,
        "keyed request re-pinned by failover"
    );
    g.gw.shutdown().await;
}

#[tokio::test]
async fn the_breaker_takes_a_failing_worker_out_of_routing() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::RoundRobin;
    c.retry_max_retries = 0;
    c.breaker.failure_threshold = 2;
    c.breaker.open_timeout = Duration::from_secs(3600);
    let g = start(c).await;
    w[0].set_error_rate(1.0, 500);
    let mut errors = 0;
    for _ in 0..10 {
        if g.client.chat(&[], chat_body(None)).await.status == 500 {
            errors += 1;
        }
    }
    assert_eq!(
        errors, 2,
        "two failures open the breaker; the rest go to the other worker"
    );
    let m = metrics(&g.gw).await;
    let gauge = format!("smg_worker_cb_state{{worker=\"{}\"}}", w[0].url());
    assert_eq!(sample(&m, &gauge), Some(1.0), "{m}");
    let list = g.client.get("/workers", &[]).await.json();
    assert!(
        list["workers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["circuit_breaker"] == "open")
    );
    g.gw.shutdown().await;
}

#[tokio::test]
async fn the_inflight_threshold_moves_a_third_concurrent_request() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::RoundRobin;
    c.router.routing_key_override = true;
    c.router.assignment_mode = Some(AssignmentMode::MinLoad);
    let g = start(c).await;
    let home = g.client.keyed("hot").await;
    let (held, other) = if w[0].url() == home {
        (&w[0], &w[1])
    } else {
        (&w[1], &w[0])
    };
    held.set_hang(true);
    let base = held.requests();
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let client = g.client.clone();
        tasks.push(tokio::spawn(async move { client.keyed("hot").await }));
    }
    eventually("two requests held", || async {
        held.requests() == base + 2
    })
    .await;
    assert_eq!(
        g.client.keyed("hot").await,
        other.url(),
        "third concurrent request placed again"
    );
    held.set_hang(false);
    for t in tasks {
        assert_eq!(t.await.unwrap(), home);
    }
    g.gw.shutdown().await;
}

#[tokio::test]
async fn idle_pins_are_evicted_by_the_sweep() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    c.router.max_idle_secs = 10;
    let g = start(c).await;
    for k in ["a", "b", "c"] {
        g.client.keyed(k).await;
    }
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(&m, "smg_manual_policy_cache_entries"),
        Some(3.0),
        "{m}"
    );
    assert_eq!(g.gw.sweep_now().await, 0, "nothing idle yet");
    g.gw.clock().advance(Duration::from_secs(30));
    g.client.keyed("a").await; // refreshed: survives
    assert_eq!(g.gw.sweep_now().await, 2);
    let m = metrics(&g.gw).await;
    assert_eq!(sample(&m, "smg_manual_policy_cache_entries"), Some(1.0));
    assert_eq!(
        sample(&m, r#"smg_manual_policy_evictions_total{reason="idle"}"#),
        Some(2.0)
    );
    g.gw.shutdown().await;
}

#[tokio::test]
async fn max_sticky_keys_caps_the_pin_table() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    c.router.max_sticky_keys = 2;
    let g = start(c).await;
    for k in ["a", "b", "c", "d"] {
        g.client.keyed(k).await;
    }
    let m = metrics(&g.gw).await;
    assert!(
        sample(&m, "smg_manual_policy_cache_entries").unwrap() <= 2.0,
        "{m}"
    );
    assert!(
        sample(
            &m,
            r#"smg_manual_policy_evictions_total{reason="capacity"}"#
        )
        .unwrap()
            >= 2.0
    );
    g.gw.shutdown().await;
}

#[tokio::test]
async fn the_periodic_sweep_evicts_idle_pins_on_its_own() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    c.router.max_idle_secs = 5;
    c.router.eviction_interval_secs = 1;
    let g = start(c).await;
    g.client.keyed("idle").await;
    g.gw.clock().advance(Duration::from_secs(60));
    let gw = &g.gw;
    eventually("the eviction task removed the idle pin", || async {
        sample(&metrics(gw).await, "smg_manual_policy_cache_entries") == Some(0.0)
    })
    .await;
    g.gw.shutdown().await;
}

#[tokio::test]
async fn an_open_breaker_lets_trial_requests_through_and_closes_on_success() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::RoundRobin;
    c.retry_max_retries = 0;
    c.breaker.failure_threshold = 1;
    c.breaker.success_threshold = 1;
    c.breaker.open_timeout = Duration::from_secs(2); // long enough to see "open" under load
    c.health.interval = Duration::from_secs(3600);
    let g = start(c).await;
    w[0].set_error_rate(1.0, 500);
    for _ in 0..4 {
        g.client.chat(&[], chat_body(None)).await;
    }
    let state = |client: TestClient| async move {
        let list = client.get("/workers", &[]).await.json();
        list["workers"][0]["circuit_breaker"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(state(g.client.clone()).await, "open");
    w[0].clear_faults();
    let client = g.client.clone();
    eventually("a trial request closed the breaker", || {
        let client = client.clone();
        async move {
            client.chat(&[], chat_body(None)).await;
            state(client).await == "closed"
        }
    })
    .await;
    g.gw.shutdown().await;
}

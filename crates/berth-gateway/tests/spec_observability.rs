//! SPEC.md section 3 sentences not covered elsewhere: the routed-worker header on a worker's own
//! error responses and verbatim as registered, and the override's `smg_manual_policy_*` metrics
//! (new assignments, reuses, failovers, in-flight re-placements, evictions). The log lines are
//! in `spec_logs.rs`.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use berth_gateway::routing::{AssignmentMode, PolicyKind};
use common::*;

/// SPEC 3: "Every response from an HTTP worker carries `x-smg-routed-worker-id`", its error
/// responses included (a 500 and a 429 passed through, a 503 passed through after retries).
#[tokio::test]
async fn worker_error_responses_carry_the_routed_worker_header() {
    let w = sims(1).await;
    let mut c = config(&w);
    c.retry_max_retries = 0;
    c.breaker.failure_threshold = 1000;
    let g = start(c).await;
    for status in [500u16, 429, 503, 400] {
        w[0].set_error_rate(1.0, status);
        let r = g.client.chat(&[], chat_body(None)).await;
        assert_eq!(r.status.as_u16(), status);
        assert_eq!(r.worker(), Some(w[0].url()), "{status}");
        assert_eq!(r.error_code(), None, "{status}: the worker's own error");
    }
    g.gw.shutdown().await;
}

/// SPEC 3: the header is "the worker's URL as registered": spelled exactly as given, here with
/// a trailing slash.
#[tokio::test]
async fn the_routed_worker_header_is_the_url_as_registered() {
    let w = sims(1).await;
    let registered = format!("{}/", w[0].url());
    let mut c = config(&w);
    c.worker_urls = vec![registered.clone()];
    let g = start(c).await;
    let r = g.client.chat(&[], chat_body(None)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.worker(), Some(registered));
    g.gw.shutdown().await;
}

/// SPEC 3: "the manual policy and the override report through `smg_manual_policy_*` (pins, new
/// assignments, reuses, failovers, evictions, in-flight re-placements, ...)": the override on
/// `round_robin`, one key through each branch.
#[tokio::test]
async fn the_override_reports_every_branch_through_manual_policy_metrics() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::RoundRobin;
    c.router.routing_key_override = true;
    c.router.assignment_mode = Some(AssignmentMode::MinLoad);
    c.router.max_idle_secs = 10;
    let g = start(c).await;
    let branch = |m: &str, b: &str| {
        sample(
            m,
            &format!(r#"smg_manual_policy_branch_total{{branch="{b}"}}"#),
        )
    };

    // A new assignment, then reuses.
    let home = g.client.keyed("metered").await;
    for _ in 0..2 {
        assert_eq!(g.client.keyed("metered").await, home);
    }
    let m = metrics(&g.gw).await;
    assert_eq!(branch(&m, "vacant"), Some(1.0), "{m}");
    assert_eq!(branch(&m, "occupied_hit"), Some(2.0), "{m}");
    assert_eq!(sample(&m, "smg_manual_policy_cache_entries"), Some(1.0));

    // A failover: the key's only remembered worker goes unhealthy; it comes back after.
    let sim = w.iter().find(|s| s.url() == home).unwrap();
    sim.set_health_failing(true);
    eventually("worker marked unhealthy", || async {
        !healthy(&g.client, &home).await
    })
    .await;
    assert_ne!(g.client.keyed("metered").await, home);
    let m = metrics(&g.gw).await;
    assert_eq!(branch(&m, "occupied_miss"), Some(1.0), "{m}");
    sim.set_health_failing(false);
    eventually("worker healthy again", || async {
        healthy(&g.client, &home).await
    })
    .await;
    assert_eq!(g.client.keyed("metered").await, home);

    // An in-flight re-placement: two requests held on the pinned worker, a third placed again.
    let held = w.iter().find(|s| s.url() == home).unwrap();
    held.set_hang(true);
    let base = held.requests();
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let client = g.client.clone();
        tasks.push(tokio::spawn(async move { client.keyed("metered").await }));
    }
    eventually("two requests held", || async {
        held.requests() == base + 2
    })
    .await;
    assert_ne!(g.client.keyed("metered").await, home);
    held.set_hang(false);
    for t in tasks {
        t.await.unwrap();
    }
    let m = metrics(&g.gw).await;
    assert_eq!(branch(&m, "cap_respill"), Some(1.0), "{m}");

    // An idle eviction.
    g.gw.clock().advance(Duration::from_secs(60));
    assert_eq!(g.gw.sweep_now().await, 1);
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(&m, r#"smg_manual_policy_evictions_total{reason="idle"}"#),
        Some(1.0),
        "{m}"
    );
    assert_eq!(sample(&m, "smg_manual_policy_cache_entries"), Some(0.0));
    g.gw.shutdown().await;
}

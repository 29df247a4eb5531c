//! SPEC.md section 2 "Reuse and failover": "A request goes to the first remembered worker that is
//! available (healthy, circuit breaker not open, ...)". `failover.rs` covers health; this file
//! covers a pinned key whose worker's breaker opens.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use berth_gateway::routing::PolicyKind;
use common::*;

#[tokio::test]
async fn a_pinned_key_leaves_a_worker_whose_breaker_is_open() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    c.retry_max_retries = 0;
    c.breaker.failure_threshold = 2;
    c.breaker.open_timeout = Duration::from_secs(3600);
    let g = start(c).await;
    let home = g.client.keyed("breaker-key").await;
    let sim = w.iter().find(|s| s.url() == home).unwrap();
    sim.set_error_rate(1.0, 500);
    // Two failures on the pinned worker open its breaker; the worker stays healthy.
    for _ in 0..2 {
        let r = g
            .client
            .chat(&[("x-smg-routing-key", b"breaker-key")], chat_body(None))
            .await;
        assert_eq!(r.status, 500);
        assert_eq!(r.worker().unwrap(), home);
    }
    assert!(healthy(&g.client, &home).await, "only the breaker is open");
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(&m, &format!("smg_worker_cb_state{{worker=\"{home}\"}}")),
        Some(1.0),
        "{m}"
    );
    let away = g.client.keyed("breaker-key").await;
    assert_ne!(away, home, "the key fails over while the breaker is open");
    assert_eq!(g.client.keyed("breaker-key").await, away);
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(
            &m,
            r#"smg_manual_policy_branch_total{branch="occupied_miss"}"#
        ),
        Some(1.0),
        "{m}"
    );
    g.gw.shutdown().await;
}

//! A keyed request refused for lack of workers under `manual` counts as the
//! `no_healthy_workers` branch (the label the docs and the core promise).
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use berth_gateway::routing::PolicyKind;
use common::*;

#[tokio::test]
async fn a_refusal_for_lack_of_workers_counts_as_no_healthy_workers() {
    let w = sims(1).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    let g = start(c).await;
    assert_eq!(g.client.keyed("k1").await, w[0].url());
    w[0].set_health_failing(true);
    eventually("worker unhealthy", || async {
        !healthy(&g.client, &w[0].url()).await
    })
    .await;
    let r = g
        .client
        .chat(&[("x-smg-routing-key", b"k1")], chat_body(None))
        .await;
    assert_eq!(r.status, 503);
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(
            &m,
            r#"smg_manual_policy_branch_total{branch="no_healthy_workers"}"#
        ),
        Some(1.0),
        "{m}"
    );
    g.gw.shutdown().await;
}

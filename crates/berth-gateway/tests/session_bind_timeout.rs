//! Issue #19: `nvext.session_control` `bind` with a `timeout`: the session's pin gets that idle
//! period in place of `--max-idle-secs` (shorter and longer), driven by the injected clock.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use berth_gateway::routing::PolicyKind;
use common::*;
use serde_json::{Value, json};

fn bind(session: &str, timeout: Value) -> Value {
    let mut b = chat_body(None);
    b["nvext"] =
        json!({"session_control": {"session_id": session, "action": "bind", "timeout": timeout}});
    b
}

async fn pinned(g: &Running, key: &str) -> bool {
    let r = g.client.get(&format!("/sticky/{key}"), &[]).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    !r.json()["local"].is_null()
}

#[tokio::test]
async fn a_bound_sessions_timeout_is_its_idle_period() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    c.router.max_idle_secs = 600;
    let g = start(c).await;
    // short: 30 s; long: 3600 s; plain: no timeout (keeps 600 s); bad: a string (ignored)
    for (s, t) in [
        ("short", json!(30)),
        ("long", json!(3600)),
        ("bad", json!("30")),
    ] {
        assert_eq!(g.client.chat(&[], bind(s, t)).await.status, 200);
    }
    g.client.keyed("plain").await;
    let m = metrics(&g.gw).await;
    assert_eq!(sample(&m, "berth_session_idle_timeouts "), Some(2.0));
    assert_eq!(
        sample(
            &m,
            r#"berth_session_control_total{action="bind",outcome="timeout_set"}"#
        ),
        Some(2.0)
    );
    assert_eq!(
        sample(
            &m,
            r#"berth_session_control_total{action="bind",outcome="seen"}"#
        ),
        Some(1.0)
    );
    // 31 s idle: only the 30 s session goes.
    g.gw.clock().advance(Duration::from_secs(31));
    g.gw.sweep_now().await;
    assert!(!pinned(&g, "short").await);
    for k in ["long", "bad", "plain"] {
        assert!(pinned(&g, k).await, "{k}");
    }
    // 601 s idle: the default period takes the unbound ones; the 3600 s session stays.
    g.gw.clock().advance(Duration::from_secs(570));
    g.gw.sweep_now().await;
    assert!(pinned(&g, "long").await);
    assert!(!pinned(&g, "bad").await && !pinned(&g, "plain").await);
    g.gw.clock().advance(Duration::from_secs(3000));
    g.gw.sweep_now().await;
    assert!(!pinned(&g, "long").await);
    // Swept pins take their periods with them.
    let m = metrics(&g.gw).await;
    assert_eq!(sample(&m, "berth_session_idle_timeouts "), Some(0.0));
    // Bound again after it went: placed afresh with its timeout again.
    assert_eq!(
        g.client.chat(&[], bind("short", json!(30))).await.status,
        200
    );
    assert!(pinned(&g, "short").await);
    g.gw.clock().advance(Duration::from_secs(31));
    g.gw.sweep_now().await;
    assert!(!pinned(&g, "short").await);
}

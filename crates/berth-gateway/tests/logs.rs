//! The log lines operators grep for, and what never shows up in logs.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use berth_gateway::config::Secret;
use berth_gateway::routing::PolicyKind;
use common::*;

// A current-thread runtime and `io_threads = 0`: every gateway task runs on this thread, under
// the thread-local subscriber.
#[tokio::test(flavor = "current_thread")]
async fn sticky_decisions_and_evictions_are_logged_and_secrets_are_not() {
    let (buf, _guard) = logs::capture_debug_logs();

    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::Manual;
    c.router.max_idle_secs = 5;
    c.api_key = Some(Secret("top-secret-key".into()));
    let g = start(c).await;
    let auth = ("authorization", &b"Bearer top-secret-key"[..]);
    let r = g
        .client
        .chat(&[auth, ("x-smg-routing-key", b"log-key")], chat_body(None))
        .await;
    assert_eq!(r.status, 200);
    g.gw.clock().advance(Duration::from_secs(60));
    assert_eq!(g.gw.sweep_now().await, 1);
    g.gw.shutdown().await;

    let text = buf.text();
    let line = text
        .lines()
        .find(|l| l.contains("Sticky routing decision"))
        .expect("decision line");
    assert!(
        line.contains("DEBUG") && line.contains("log-key") && line.contains("source=\"header\""),
        "{line}"
    );
    assert!(
        line.contains("branch=\"vacant\"") && line.contains("worker=http://127.0.0.1:"),
        "{line}"
    );
    let line = text
        .lines()
        .find(|l| l.contains("ManualPolicy TTL eviction"))
        .expect("eviction line");
    assert!(
        line.contains("INFO") && line.contains("removed=1"),
        "{line}"
    );
    assert!(
        !text.contains("top-secret-key"),
        "an API key reached the logs"
    );
}

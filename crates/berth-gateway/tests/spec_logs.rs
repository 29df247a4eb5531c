//! SPEC.md section 3: one `Sticky routing decision` line per override decision, with its key
//! source (rid or header), key, branch, worker and model.
//!
//! Alone in its test binary: a thread-local subscriber only sees debug events reliably when no
//! other test in the process registers the same callsites first.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use berth_gateway::routing::PolicyKind;
use common::*;

/// SPEC 3: "At debug level each override decision logs one `Sticky routing decision` line with
/// key source (rid or header), key, branch, chosen worker and model". A current-thread runtime
/// and `io_threads = 0` (the default) keep every gateway task under the thread-local subscriber.
#[tokio::test(flavor = "current_thread")]
async fn each_override_decision_logs_one_line_with_source_key_branch_worker_and_model() {
    let (buf, _guard) = logs::capture_debug_logs();

    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::RoundRobin;
    c.router.routing_key_override = true;
    let g = start(c).await;
    let first = g.client.chat(&[], chat_body(Some("logged_t1"))).await;
    let second = g
        .client
        .chat(
            &[("x-smg-routing-key", b"unique-stamp")],
            chat_body(Some("logged_t2_r1")),
        )
        .await;
    let third = g
        .client
        .chat(&[("x-smg-routing-key", b"hdr-key_t4")], chat_body(None))
        .await;
    g.gw.shutdown().await;

    let text = buf.text();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("Sticky routing decision"))
        .collect();
    assert_eq!(lines.len(), 3, "one line per decision:\n{text}");
    let expect = [
        ("rid", "logged", "vacant", first.worker().unwrap()),
        ("rid", "logged", "occupied_hit", second.worker().unwrap()),
        ("header", "hdr-key", "vacant", third.worker().unwrap()),
    ];
    for (line, (source, key, branch, worker)) in lines.iter().zip(expect) {
        assert!(line.contains("DEBUG"), "{line}");
        assert!(line.contains(&format!("source=\"{source}\"")), "{line}");
        assert!(line.contains(&format!("key={key} ")), "{line}");
        assert!(line.contains(&format!("branch=\"{branch}\"")), "{line}");
        assert!(line.contains(&format!("worker={worker}")), "{line}");
        assert!(line.contains("model=\"sim-model\""), "{line}");
    }
}

//! `--cache-feedback on` through the whole gateway: a pinned session whose unread turn (the
//! sticky hot path) reports a shortfall has its next turn read (`reason="cache_feedback"`),
//! routed as the unread turn it would have been, and the turn after that streams unread again.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use berth_gateway::routing::PolicyKind;
use berth_gateway::routing::policy::FeedbackMode;
use berth_sim::SimWorker;
use bytes::Bytes;
use common::*;
use http::Method;

fn body(text: &str) -> serde_json::Value {
    serde_json::json!({
        "model": "sim-model",
        "messages": [{"role": "user", "content": text}],
        "max_tokens": 1,
    })
}

async fn path_count(g: &Running, path: &str, reason: &str) -> f64 {
    let m = metrics(&g.gw).await;
    sample(
        &m,
        &format!(r#"smg_router_request_body_path_total{{path="{path}",reason="{reason}"}}"#),
    )
    .unwrap_or(0.0)
}

async fn session_reports(g: &Running, verdict: &str) -> f64 {
    let m = metrics(&g.gw).await;
    let prefix = r#"berth_cached_tokens_reports_total{worker="#;
    m.lines()
        .filter(|l| l.starts_with(prefix) && l.contains(&format!(r#"verdict="{verdict}""#)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Sends the session's next turn and waits until its answer was read.
async fn turn(g: &Running, text: &str, answers: f64) {
    let key: &[(&str, &[u8])] = &[("x-smg-routing-key", b"session-1")];
    let r = g.client.chat(key, body(text)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    eventually("the answer was read", || async {
        let mut n = 0.0;
        for v in ["confirmed", "shortfall", "surplus", "uncompared", "unknown"] {
            n += session_reports(g, v).await;
        }
        n >= answers
    })
    .await;
}

#[tokio::test]
async fn a_session_short_on_the_hot_path_has_one_turn_read_for_the_feedback() {
    let w0 = SimWorker::builder()
        .worker_id("w0")
        .model("sim-model")
        .kv_capacity_tokens(100_000)
        .time_scale(0.0)
        .spawn_on_loopback()
        .await;
    let mut c = config(std::slice::from_ref(&w0));
    c.router.policy = PolicyKind::TtftAware;
    c.router.cache_feedback = FeedbackMode::On;
    let g = start(c).await;
    let mut text: String = (0..300).map(|i| format!("word{i} ")).collect();
    // a new key is read; its next turn streams unread and finds its history
    turn(&g, &text, 1.0).await;
    text.push_str("and a second turn ");
    turn(&g, &text, 2.0).await;
    assert_eq!(path_count(&g, "streamed", "ttft_pinned").await, 1.0);
    assert_eq!(path_count(&g, "buffered", "cache_feedback").await, 0.0);
    // flushed behind the gateway's back: the next unread turn finds nothing
    let flushed = TestClient::new(w0.addr())
        .send(Method::POST, "/flush_cache", &[], Bytes::new())
        .await;
    assert_eq!(flushed.status, 200, "{:?}", flushed.body);
    text.push_str("and a third turn ");
    turn(&g, &text, 3.0).await;
    assert_eq!(path_count(&g, "streamed", "ttft_pinned").await, 2.0);
    assert_eq!(session_reports(&g, "shortfall").await, 1.0);
    // so the turn after it is read, for the feedback only ...
    text.push_str("and a fourth turn ");
    turn(&g, &text, 4.0).await;
    assert_eq!(path_count(&g, "buffered", "cache_feedback").await, 1.0);
    assert_eq!(path_count(&g, "buffered", "ttft_text").await, 1.0);
    // ... and the next one streams unread again
    text.push_str("and a fifth turn ");
    turn(&g, &text, 5.0).await;
    assert_eq!(path_count(&g, "streamed", "ttft_pinned").await, 3.0);
    assert_eq!(path_count(&g, "buffered", "cache_feedback").await, 1.0);
    g.gw.shutdown().await;
}

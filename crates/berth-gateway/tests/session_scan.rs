//! Body key sources read by the streaming scan (issue #19): a key member early in the body
//! routes the request before the body has ended; one past the lookahead is still found, the
//! frames held for it counted in the buffered-body budget; a keyless body under `manual` with
//! `--allow-requests-without-routing-key` is scanned, not buffered; an `nvext` close behind a
//! header key is seen as the body streams past.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use berth_gateway::routing::PolicyKind;
use common::*;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const MIB: usize = 1 << 20;

/// A request whose body is sent in two parts: the head and `first` now, the rest later.
async fn open(g: &Running, headers: &str, first: &str, len: usize) -> TcpStream {
    let mut s = TcpStream::connect(g.gw.addr()).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         connection: close\r\n{headers}content-length: {len}\r\n\r\n{first}"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s
}

/// Sends the rest of the body; the response's status line.
async fn finish(mut s: TcpStream, rest: &str) -> String {
    s.write_all(rest.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&out);
    text.lines().next().unwrap_or_default().to_owned()
}

async fn pinned(g: &Running, key: &str) -> bool {
    let r = g.client.get(&format!("/sticky/{key}"), &[]).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    !r.json()["local"].is_null()
}

fn manual(w: &[berth_sim::SimHandle]) -> berth_gateway::GatewayConfig {
    let mut c = config(w);
    c.router.policy = PolicyKind::Manual;
    c
}

fn body_path(m: &str, path: &str) -> f64 {
    sample(
        m,
        &format!(r#"smg_router_request_body_path_total{{path="{path}",reason="#),
    )
    .unwrap_or(0.0)
}

#[tokio::test]
async fn a_key_member_first_routes_the_request_before_its_body_ends() {
    let w = sims(2).await;
    let rest = r#"hello"}],"max_tokens":2}"#;
    // nvext_session_id ranks first among the body sources: its member settles the key.
    let g = start(manual(&w)).await;
    let first = r#"{"nvext":{"session_control":{"session_id":"early","action":"bind","timeout":60}},"model":"sim-model","messages":[{"role":"user","content":""#;
    let s = open(&g, "", first, first.len() + rest.len()).await;
    eventually(
        "the request routed (and pinned) while its body is incomplete",
        || pinned(&g, "early"),
    )
    .await;
    assert!(finish(s, rest).await.contains(" 200 "));
    assert_eq!(body_path(&metrics(&g.gw).await, "scanned"), 1.0);
    g.gw.shutdown().await;

    // prompt_cache_key settles the key at once when no body source ranks above it.
    let mut c = manual(&w);
    c.router.routing_key_sources = vec!["routing_key_headers".into(), "prompt_cache_key".into()];
    let g = start(c).await;
    let first = r#"{"prompt_cache_key":"pck-early","model":"sim-model","messages":[{"role":"user","content":""#;
    let s = open(&g, "", first, first.len() + rest.len()).await;
    eventually("routed on prompt_cache_key before the body ends", || {
        pinned(&g, "pck-early")
    })
    .await;
    assert!(finish(s, rest).await.contains(" 200 "));
    g.gw.shutdown().await;
}

#[tokio::test]
async fn a_key_past_the_lookahead_is_found_and_the_hold_is_budgeted() {
    let w = sims(2).await;
    let mut c = manual(&w);
    c.buffered_body_budget_mb = 1;
    c.router.allow_requests_without_routing_key = true;
    let g = start(c).await;
    // The SDK's order: messages (400 KiB, past the 256 KiB lookahead) first, the key last.
    let big = |extra: &str, pad: usize| {
        format!(
            r#"{{"messages":[{{"role":"user","content":"{}"}}],"model":"sim-model","max_tokens":2{extra}}}"#,
            "x".repeat(pad)
        )
    };
    let json = [("content-type", &b"application/json"[..])];
    let post = |body: String| {
        g.client
            .send(http::Method::POST, "/v1/chat/completions", &json, body)
    };
    let r = post(big(r#","prompt_cache_key":"late-key""#, 400 << 10)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert!(pinned(&g, "late-key").await);
    // A small keyless body: scanned to its end, served at random, nothing pinned.
    let r = post(big("", 10)).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    // A keyless body larger than the budget: held for a key that never comes, it runs out of
    // budget bytes and is refused as a buffered body would be.
    let r = post(big("", 3 * MIB)).await;
    assert_eq!(r.status, 503, "{:?}", r.body);
    assert_eq!(r.error_code().as_deref(), Some("body_budget_exhausted"));
    eventually("the held frames' bytes released", || async {
        sample(&metrics(&g.gw).await, "berth_buffered_body_bytes") == Some(0.0)
    })
    .await;
    let m = metrics(&g.gw).await;
    assert_eq!(body_path(&m, "scanned"), 3.0);
    assert_eq!(body_path(&m, "buffered"), 0.0);
    assert_eq!(
        sample(
            &m,
            r#"berth_body_budget_rejected_total{reason="exhausted"}"#
        ),
        Some(1.0)
    );
    g.gw.shutdown().await;
}

#[tokio::test]
async fn a_close_behind_a_header_key_is_seen_as_the_body_streams() {
    let w = sims(2).await;
    let g = start(manual(&w)).await;
    let header = [("session_id", &b"hs"[..])];
    let close = json!({"session_control": {"session_id": "hs", "action": "close"}});
    // nvext in the first frame (after the model), and after 400 KiB of messages.
    for (n, pad) in [(1.0, 10usize), (2.0, 400 << 10)] {
        let r = g.client.chat(&header, chat_body(None)).await;
        assert_eq!(r.status, 200);
        assert!(pinned(&g, "hs").await);
        let mut body = chat_body(None);
        body["messages"][0]["content"] = json!("y".repeat(pad));
        body["nvext"] = close.clone();
        let r = g.client.chat(&header, body).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert!(
            !pinned(&g, "hs").await,
            "pad {pad}: the close dropped the pin"
        );
        let m = metrics(&g.gw).await;
        assert_eq!(
            sample(
                &m,
                r#"berth_session_control_total{action="close",outcome="dropped"}"#
            ),
            Some(n)
        );
        assert_eq!(
            body_path(&m, "scanned"),
            0.0,
            "the header key streams the body"
        );
    }
    g.gw.shutdown().await;
}

#[tokio::test]
async fn a_higher_ranked_member_later_in_the_body_still_wins() {
    let w = sims(2).await;
    let g = start(manual(&w)).await;
    let pad = "z".repeat(300 << 10);
    // prompt_cache_key first, nvext (ranked above it) after 300 KiB of messages: the scan does
    // not route on the first member it sees, but on the list's order.
    // (written by hand: serde_json's maps sort their keys)
    let body = format!(
        r#"{{"prompt_cache_key":"low","model":"sim-model","messages":[{{"role":"user","content":"{pad}"}}],"nvext":{{"session_control":{{"session_id":"high"}}}}}}"#
    );
    let json = [("content-type", &b"application/json"[..])];
    let r = g
        .client
        .send(http::Method::POST, "/v1/chat/completions", &json, body)
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert!(pinned(&g, "high").await);
    assert!(!pinned(&g, "low").await);
    // An unknown previous_response_id (ranked above prompt_cache_key) gives no key: the next
    // source does.
    let body = json!({
        "previous_response_id": "resp_never_seen",
        "model": "sim-model",
        "messages": [{"role": "user", "content": "hi"}],
        "prompt_cache_key": "pck-wins",
    });
    assert_eq!(g.client.chat(&[], body).await.status, 200);
    assert!(pinned(&g, "pck-wins").await);
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(
            &m,
            r#"smg_routing_key_source_total{source="nvext_session_id"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &m,
            r#"smg_routing_key_source_total{source="prompt_cache_key"}"#
        ),
        Some(1.0)
    );
    g.gw.shutdown().await;
}

//! Long contexts (issue #18). `--buffered-body-budget-mb`: bodies the gateway reads whole share
//! one byte budget; a body that does not fit waits briefly, then gets 503
//! `body_budget_exhausted` with `Retry-After`; a body larger than the whole budget gets 413 at
//! once; streamed bodies are not counted. The prefix index reports its size.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use berth_gateway::routing::PolicyKind;
use common::*;
use http::Method;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const MIB: usize = 1 << 20;

fn chat(len: usize) -> String {
    format!(
        r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#,
        "x".repeat(len)
    )
}

async fn post(g: &Running, body: String) -> Resp {
    let json = [("content-type", &b"application/json"[..])];
    g.client
        .send(Method::POST, "/v1/chat/completions", &json, body)
        .await
}

#[tokio::test]
async fn buffered_bodies_share_one_budget() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.buffered_body_budget_mb = 1; // cache_aware (the default) reads every body
    let g = start(c).await;
    assert_eq!(post(&g, chat(1000)).await.status, 200);

    // alone larger than the whole budget: 413 at once
    let r = post(&g, chat(2 * MIB)).await;
    assert_eq!(r.status, 413, "{:?}", r.body);
    assert_eq!(r.error_code().as_deref(), Some("payload_too_large"));

    // a client announces 800 KB and sends a little: its body holds 800 KB of the budget
    let mut slow = TcpStream::connect(g.gw.addr()).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{{\"messages\":",
        800 * 1024
    );
    slow.write_all(head.as_bytes()).await.unwrap();
    eventually("the slow body's reservation", || async {
        sample(&metrics(&g.gw).await, "berth_buffered_body_bytes") == Some(800.0 * 1024.0)
    })
    .await;
    // 500 KB more does not fit: it waits, then 503 with Retry-After
    let r = post(&g, chat(500 * 1024)).await;
    assert_eq!(r.status, 503, "{:?}", r.body);
    assert_eq!(r.error_code().as_deref(), Some("body_budget_exhausted"));
    assert_eq!(r.headers["retry-after"], "1");
    assert_eq!(r.json()["error"]["code"], "body_budget_exhausted");
    // small bodies still fit and are served
    assert_eq!(post(&g, chat(1000)).await.status, 200);
    // the slow client leaves: its bytes are released and the large body is served
    drop(slow);
    eventually("the slow body's release", || async {
        sample(&metrics(&g.gw).await, "berth_buffered_body_bytes") == Some(0.0)
    })
    .await;
    assert_eq!(post(&g, chat(500 * 1024)).await.status, 200);
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(
            &m,
            r#"berth_body_budget_rejected_total{reason="exhausted"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &m,
            r#"berth_body_budget_rejected_total{reason="over_budget"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(&m, "berth_buffered_body_budget_bytes"),
        Some(MIB as f64)
    );
}

#[tokio::test]
async fn streamed_bodies_do_not_count() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.buffered_body_budget_mb = 1;
    c.router.policy = PolicyKind::RoundRobin; // bodies stream unread
    let g = start(c).await;
    let r = tokio::time::timeout(Duration::from_secs(20), post(&g, chat(3 * MIB)))
        .await
        .unwrap();
    // the whole body reached the worker (which refuses a prompt this long for its context)
    assert_eq!(
        r.error_code(),
        None,
        "{:?}",
        String::from_utf8_lossy(&r.body)
    );
    assert!(r.worker().is_some());
    assert!(String::from_utf8_lossy(&r.body).contains("maximum context length"));
    assert_eq!(
        sample(&metrics(&g.gw).await, "berth_buffered_body_bytes"),
        Some(0.0)
    );
}

#[tokio::test]
async fn the_prefix_index_reports_its_size_and_a_conversation_stays_on_its_worker() {
    let w = sims(4).await;
    let g = start(config(&w)).await; // cache_aware
    let history = "an earlier turn of a long conversation. ".repeat(2000); // 80 KB
    let turn1 = chat(0).replace(r#""content":"""#, &format!(r#""content":"{history}""#));
    let first = post(&g, turn1.clone()).await;
    assert_eq!(first.status, 200);
    let turn2 = turn1.replace(
        "]}",
        r#",{"role":"assistant","content":"ok"},{"role":"user","content":"and then?"}]}"#,
    );
    for _ in 0..3 {
        assert_eq!(post(&g, turn2.clone()).await.worker(), first.worker());
    }
    let m = metrics(&g.gw).await;
    let chunks = sample(&m, "berth_prefix_index_chunks").unwrap();
    // 16 KiB in 32-byte chunks, the rest in 1 KiB chunks
    assert!((560.0..600.0).contains(&chunks), "{chunks}");
    let bytes = sample(&m, "berth_prefix_index_bytes").unwrap();
    assert!(bytes > 0.0 && bytes <= 32.0 * MIB as f64, "{bytes}");
    assert_eq!(
        sample(
            &m,
            r#"berth_prefix_index_evicted_chunks_total{reason="budget"}"#
        ),
        Some(0.0)
    );
}

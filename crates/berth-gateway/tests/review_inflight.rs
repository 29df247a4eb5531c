//! Review: every way a proxied request can end gives its in-flight count back.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use berth_gateway::routing::PolicyKind;
use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// Sends a chat request and reads what arrives, tolerating a broken response; gives up (drops
/// the request, as a client that leaves) after `patience`.
async fn tolerant(g: &Running, body: serde_json::Value, patience: Duration) {
    let req = http::Request::post(format!("http://{}/v1/chat/completions", g.gw.addr()))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let client = Client::builder(TokioExecutor::new()).build_http();
    let _ = tokio::time::timeout(patience, async {
        if let Ok(resp) = client.request(req).await {
            let _ = resp.into_body().collect().await;
        }
    })
    .await;
}

async fn all_idle(g: &Running) {
    eventually("every worker's in-flight count is back to 0", || async {
        let r = g.client.get("/workers", &[]).await;
        r.json()["workers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|w| w["requests_active"] == 0)
    })
    .await;
    let m = metrics(&g.gw).await;
    for line in m
        .lines()
        .filter(|l| l.starts_with("smg_worker_requests_active{"))
    {
        assert!(line.ends_with(" 0"), "{line}");
    }
}

#[tokio::test]
async fn every_ending_releases_the_inflight_count() {
    let w = sims(2).await;
    for policy in [PolicyKind::RoundRobin, PolicyKind::CacheAware] {
        let mut c = config(&w);
        c.router.policy = policy; // streamed, then buffered bodies
        c.request_timeout = Duration::from_millis(300);
        c.retry_max_retries = 1;
        c.max_payload_size = 2_000;
        c.breaker.failure_threshold = 1_000;
        let g = start(c).await;
        let stream = serde_json::json!({
            "model": "sim-model", "stream": true, "max_tokens": 8,
            "messages": [{"role": "user", "content": "hello"}]
        });

        // The worker drops the connection mid-stream.
        for s in &w {
            s.set_drop_after_chunks(Some(1));
        }
        tolerant(&g, stream.clone(), Duration::from_secs(20)).await;
        tolerant(&g, chat_body(None), Duration::from_secs(20)).await;
        for s in &w {
            s.set_drop_after_chunks(None);
        }
        all_idle(&g).await;

        // Worker errors, retried then passed through.
        for s in &w {
            s.set_error_rate(1.0, 503);
        }
        tolerant(&g, chat_body(None), Duration::from_secs(20)).await;
        for s in &w {
            s.set_error_rate(0.0, 503);
        }
        all_idle(&g).await;

        // Timeouts on every attempt.
        for s in &w {
            s.set_hang(true);
        }
        tolerant(&g, chat_body(None), Duration::from_secs(20)).await;
        // A client that gives up while the worker holds its request.
        tolerant(&g, chat_body(None), Duration::from_millis(100)).await;
        for s in &w {
            s.set_hang(false);
        }
        all_idle(&g).await;

        // Too large.
        let mut big = chat_body(None);
        big["messages"][0]["content"] = "x".repeat(5_000).into();
        tolerant(&g, big, Duration::from_secs(20)).await;
        all_idle(&g).await;

        assert_eq!(g.client.chat(&[], chat_body(None)).await.status, 200);
        all_idle(&g).await;
        g.gw.shutdown().await;
    }
}

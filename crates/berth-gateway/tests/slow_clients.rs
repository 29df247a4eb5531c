//! Issue #11 part 1: a client's slow or stalled request body is the client's problem. It gets
//! 408 `request_body_timeout`; no worker is charged (no breaker failure, no retry, no 504), and
//! well-behaved traffic flows meanwhile. Streamed (round_robin) and buffered (override) paths.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use berth_gateway::GatewayConfig;
use berth_gateway::config::BodyTimeouts;
use berth_gateway::routing::PolicyKind;
use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The chat body every raw client sends (valid JSON, `len` bytes long with padding).
fn body_of_len(len: usize) -> Vec<u8> {
    let head = br#"{"model":"sim-model","messages":[{"role":"user","content":"hi"}],"max_tokens":2,"pad":""#;
    let mut b = head.to_vec();
    b.resize(len - 2, b'x');
    b.extend_from_slice(b"\"}");
    b
}

/// Sends a request head with `Content-Length`, then `sent` body bytes one every `gap` (the rest
/// never), and returns everything the gateway answered (reading stops at EOF, error or 20 s).
async fn slow_upload(
    addr: std::net::SocketAddr,
    body: Vec<u8>,
    sent: usize,
    gap: Duration,
) -> String {
    let s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut rd, mut wr) = s.into_split();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    );
    wr.write_all(head.as_bytes()).await.unwrap();
    let writer = tokio::spawn(async move {
        for b in body.into_iter().take(sent) {
            tokio::time::sleep(gap).await;
            if wr.write_all(&[b]).await.is_err() {
                return;
            }
        }
        // Keep the connection open without sending more (a stalled client).
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop(wr);
    });
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let _ = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    writer.abort();
    String::from_utf8_lossy(&out).into_owned()
}

fn slow_config(w: &[berth_sim::SimHandle], buffered: bool) -> GatewayConfig {
    let mut c = config(w);
    c.router.policy = PolicyKind::RoundRobin;
    c.router.routing_key_override = buffered;
    c.request_timeout = Duration::from_secs(2);
    c.breaker.failure_threshold = 1;
    c.retry_max_retries = 3;
    c
}

async fn assert_no_worker_charged(g: &Running) {
    let gw = &g.gw;
    let client = &g.client;
    eventually("every request let go of its worker", || async {
        let r = client.get("/workers", &[]).await;
        r.json()["workers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|w| w["requests_active"] == 0)
    })
    .await;
    let r = client.get("/workers", &[]).await;
    for w in r.json()["workers"].as_array().unwrap() {
        assert_eq!(w["circuit_breaker"], "closed", "{w}");
    }
    let m = metrics(gw).await;
    assert_eq!(sample(&m, "smg_router_retries_total"), Some(0.0), "{m}");
    assert!(
        !m.contains("smg_router_upstream_responses_total{status_code=\"5"),
        "no worker error was seen: {m}"
    );
}

#[tokio::test]
async fn slow_uploads_get_408_while_normal_traffic_flows() {
    for buffered in [false, true] {
        let w = sims(2).await;
        let mut c = slow_config(&w, buffered);
        // A byte every 300 ms never stalls (idle bound 3 s), but 60 bytes take 18 s: the total
        // bound (4 s) ends them, long after the 2 s worker timeout would have.
        c.body_timeouts = BodyTimeouts {
            total: Some(Duration::from_secs(4)),
            idle: Some(Duration::from_secs(3)),
        };
        let g = start(c).await;
        let addr = g.gw.addr();
        let slow: Vec<_> = (0..12)
            .map(|_| {
                tokio::spawn(slow_upload(
                    addr,
                    body_of_len(120),
                    usize::MAX,
                    Duration::from_millis(300),
                ))
            })
            .collect();
        let mut normal = 0;
        for _ in 0..300 {
            if slow.iter().all(|t| t.is_finished()) {
                break;
            }
            let r = g.client.chat(&[], chat_body(None)).await;
            assert_eq!(r.status, 200, "buffered {buffered}: {:?}", r.body);
            normal += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(normal > 0);
        for t in slow {
            let answer = t.await.unwrap();
            assert!(
                answer.starts_with("HTTP/1.1 408"),
                "buffered {buffered}: {answer}"
            );
            assert!(answer.contains("request_body_timeout"), "{answer}");
            assert!(answer.contains("--request-body-timeout-secs"), "{answer}");
        }
        assert_no_worker_charged(&g).await;
        // Client-side failures are counted as such.
        assert_eq!(
            sample(
                &metrics(&g.gw).await,
                r#"smg_http_responses_total{status_code="408",error_code="request_body_timeout"}"#
            ),
            Some(12.0)
        );
        assert_eq!(g.client.chat(&[], chat_body(None)).await.status, 200);
        g.gw.shutdown().await;
    }
}

#[tokio::test]
async fn a_stalled_body_gets_408_and_releases_the_worker() {
    for buffered in [false, true] {
        let w = sims(1).await;
        let mut c = slow_config(&w, buffered);
        c.body_timeouts = BodyTimeouts {
            total: Some(Duration::from_secs(600)),
            idle: Some(Duration::from_secs(1)),
        };
        let g = start(c).await;
        // Ten bytes of a 120-byte body, then silence with the connection open.
        let answer = slow_upload(g.gw.addr(), body_of_len(120), 10, Duration::ZERO).await;
        assert!(
            answer.starts_with("HTTP/1.1 408"),
            "buffered {buffered}: {answer}"
        );
        assert!(
            answer.contains("x-smg-error-code: request_body_timeout"),
            "{answer}"
        );
        assert!(
            answer.contains("--request-body-idle-timeout-secs"),
            "{answer}"
        );
        assert_no_worker_charged(&g).await;
        let sim = &w[0];
        eventually("the worker's request was cancelled", || async {
            sim.stats().running == 0
        })
        .await;
        assert_eq!(g.client.chat(&[], chat_body(None)).await.status, 200);
        g.gw.shutdown().await;
    }
}

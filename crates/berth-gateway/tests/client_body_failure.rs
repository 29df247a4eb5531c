//! A client whose streamed request body breaks is the client's fault, not the worker's.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use berth_gateway::routing::PolicyKind;
use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends a chunked request whose body stops half-way (the client half-closes), and returns
/// what the gateway answered on that connection (possibly nothing).
async fn broken_upload(addr: std::net::SocketAddr) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = "POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n\
                transfer-encoding: chunked\r\n\r\n5\r\n{\"mes\r\n";
    s.write_all(head.as_bytes()).await.unwrap();
    s.shutdown().await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn a_broken_streamed_upload_does_not_count_against_the_worker() {
    let w = sims(1).await;
    for retries in [0, 2] {
        let mut c = config(&w);
        c.router.policy = PolicyKind::RoundRobin; // bodies stream
        c.breaker.failure_threshold = 1;
        c.retry_max_retries = retries;
        let g = start(c).await;
        for _ in 0..3 {
            let answer = broken_upload(g.gw.addr()).await;
            assert!(
                answer.is_empty() || answer.starts_with("HTTP/1.1 400"),
                "retries {retries}: {answer}"
            );
            // Wait until the gateway let go of the request (its in-flight count is back to 0).
            eventually("the broken request ended", || async {
                let r = g.client.get("/workers", &[]).await;
                r.json()["workers"][0]["requests_active"] == 0
            })
            .await;
        }
        let m = metrics(&g.gw).await;
        assert_eq!(sample(&m, "smg_router_retries_total"), Some(0.0));
        let r = g.client.get("/workers", &[]).await;
        assert_eq!(
            r.json()["workers"][0]["circuit_breaker"],
            "closed",
            "retries {retries}: a client's broken upload opened the worker's breaker"
        );
        assert_eq!(g.client.chat(&[], chat_body(None)).await.status, 200);
        g.gw.shutdown().await;
    }
}

//! A buffered request routes on the worker view as it is once its body has arrived, not
//! as it was when its head arrived (a worker removed meanwhile gets nothing).
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use berth_gateway::routing::PolicyKind;
use common::*;
use http::Method;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BUFFERED: &str =
    r#"smg_router_request_body_path_total{path="buffered",reason="routing_key_override"}"#;

#[tokio::test]
async fn a_worker_removed_while_a_body_uploads_gets_no_request() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::ConsistentHashing;
    c.router.routing_key_override = true; // every body is read before routing
    let g = start(c).await;
    let pinned = g.client.keyed("slow-upload").await;

    let body = chat_body(None).to_string();
    let (first, rest) = body.split_at(body.len() / 2);
    let mut s = tokio::net::TcpStream::connect(g.gw.addr()).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\nconnection: close\r\n\
         content-type: application/json\r\nx-smg-routing-key: slow-upload\r\n\
         content-length: {}\r\n\r\n{first}",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    // The gateway has started on this request (it counted its body path).
    eventually("the second request started", || async {
        sample(&metrics(&g.gw).await, BUFFERED) == Some(2.0)
    })
    .await;
    let path = format!(
        "/workers/{}",
        pinned.replace(':', "%3A").replace('/', "%2F")
    );
    let removed = g.client.send(Method::DELETE, &path, &[], "").await;
    assert_eq!(removed.status, 200);

    s.write_all(rest.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    let answer = String::from_utf8_lossy(&out).to_lowercase();
    assert!(answer.starts_with("http/1.1 200"), "{answer}");
    let routed = answer
        .lines()
        .find_map(|l| l.strip_prefix("x-smg-routed-worker-id: "))
        .unwrap()
        .trim()
        .to_owned();
    assert_ne!(routed, pinned, "routed to a worker removed before routing");
    g.gw.shutdown().await;
}

//! Bad input gets its error in the one shape, and the next request is served.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use berth_gateway::routing::PolicyKind;
use bytes::Bytes;
use common::*;
use http::Method;

fn assert_error(r: &Resp, status: u16, code: &str) {
    assert_eq!(r.status.as_u16(), status, "{:?}", r.body);
    assert_eq!(r.error_code().as_deref(), Some(code));
    let e = r.json();
    assert_eq!(e["error"]["code"], code);
    assert!(e["error"]["message"].is_string() && e["error"]["type"].is_string());
    assert!(e["error"].as_object().unwrap().contains_key("param"));
}

#[tokio::test]
async fn bad_input_gets_its_error_and_the_next_request_is_served() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.max_payload_size = 4096;
    c.router.routing_key_override = true; // every body is read
    let g = start(c).await;
    let ok = |g: &Running| {
        let client = g.client.clone();
        async move { assert_eq!(client.chat(&[], chat_body(None)).await.status, 200) }
    };
    let json = [("content-type", &b"application/json"[..])];

    let r = g
        .client
        .send(Method::POST, "/v1/chat/completions", &json, "{not json")
        .await;
    assert_error(&r, 400, "json_parse_error");
    ok(&g).await;

    let big = format!(
        r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#,
        "x".repeat(10_000)
    );
    let r = g
        .client
        .send(Method::POST, "/v1/chat/completions", &json, big)
        .await;
    assert_error(&r, 413, "payload_too_large");
    ok(&g).await;

    let r = g
        .client
        .send(Method::GET, "/v1/chat/completions", &[], Bytes::new())
        .await;
    assert_error(&r, 405, "method_not_allowed");
    ok(&g).await;

    let r = g.client.send(Method::POST, "/v1/nope", &json, "{}").await;
    assert_error(&r, 404, "not_found");
    ok(&g).await;

    let r = g
        .client
        .chat(
            &[("x-smg-routing-key", b"\xff\xfe\x80")],
            serde_json::json!({"model": "nope"}),
        )
        .await;
    assert_error(&r, 404, "model_not_found");
    assert_eq!(r.json()["error"]["param"], "model");
    ok(&g).await;
    g.gw.shutdown().await;
}

#[tokio::test]
async fn a_chunked_streamed_body_over_the_limit_is_413() {
    let w = sims(2).await;
    for retries in [0, 2] {
        let mut c = config(&w);
        c.router.policy = PolicyKind::RoundRobin; // bodies stream
        c.max_payload_size = 1000;
        c.retry_max_retries = retries;
        let g = start(c).await;
        let big = format!(
            r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#,
            "x".repeat(5_000)
        );
        let body = Chunks(
            big.as_bytes()
                .chunks(500)
                .map(Bytes::copy_from_slice)
                .collect(),
        );
        let req = http::Request::post(format!("http://{}/v1/chat/completions", g.gw.addr()))
            .header("content-type", "application/json")
            .body(body)
            .unwrap();
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http();
        let resp = client.request(req).await.unwrap();
        assert_eq!(resp.status(), 413, "retries {retries}");
        assert_eq!(resp.headers()["x-smg-error-code"], "payload_too_large");
        assert_eq!(g.client.chat(&[], chat_body(None)).await.status, 200);
        let m = metrics(&g.gw).await;
        assert_eq!(
            sample(&m, "smg_router_retries_total"),
            Some(0.0),
            "the client's fault: no retry"
        );
        g.gw.shutdown().await;
    }
}

/// A body sent in chunks with no length: hyper sends it chunked.
struct Chunks(std::collections::VecDeque<Bytes>);

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = std::convert::Infallible;
    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        std::task::Poll::Ready(self.0.pop_front().map(|b| Ok(http_body::Frame::data(b))))
    }
}

#[tokio::test]
async fn an_invalid_utf8_key_header_under_a_keyed_policy_is_missing_routing_key() {
    let w = sims(2).await;
    let mut c = config(&w);
    c.router.policy = PolicyKind::ConsistentHashing;
    let g = start(c).await;
    let r = g
        .client
        .chat(&[("x-smg-routing-key", b"\xff\xfe")], chat_body(None))
        .await;
    assert_error(&r, 400, "missing_routing_key");
    assert_eq!(
        g.client
            .chat(&[("x-smg-routing-key", b"ok")], chat_body(None))
            .await
            .status,
        200
    );
    g.gw.shutdown().await;
}

#[tokio::test]
async fn no_available_workers_is_503_with_retry_after() {
    let w = sims(1).await;
    let g = start(config(&w)).await;
    w[0].set_health_failing(true);
    eventually("unhealthy", || async {
        !healthy(&g.client, &w[0].url()).await
    })
    .await;
    let r = g.client.chat(&[], chat_body(None)).await;
    assert_error(&r, 503, "no_available_workers");
    assert!(r.headers.contains_key("retry-after"));
    assert_eq!(g.client.get("/readiness", &[]).await.status, 503);
    assert_eq!(g.client.get("/health", &[]).await.status, 200);
    g.gw.shutdown().await;
}

#[tokio::test]
async fn a_slow_worker_is_upstream_timeout() {
    let w = sims(1).await;
    let mut c = config(&w);
    c.request_timeout = std::time::Duration::from_millis(200);
    c.retry_max_retries = 0;
    let g = start(c).await;
    w[0].set_hang(true);
    let r = g.client.chat(&[], chat_body(None)).await;
    assert_error(&r, 504, "upstream_timeout");
    w[0].set_hang(false);
    assert_eq!(g.client.chat(&[], chat_body(None)).await.status, 200);
    g.gw.shutdown().await;
}

#[tokio::test]
async fn inbound_api_key_guards_generation_but_not_models_or_health() {
    let w = sims(1).await;
    let mut c = config(&w);
    c.api_key = Some(berth_gateway::config::Secret("s3cret".into()));
    let g = start(c).await;
    assert_error(
        &g.client.chat(&[], chat_body(None)).await,
        401,
        "unauthorized",
    );
    assert_error(
        &g.client
            .chat(&[("authorization", b"Bearer nope")], chat_body(None))
            .await,
        401,
        "unauthorized",
    );
    assert_eq!(
        g.client
            .chat(&[("authorization", b"Bearer s3cret")], chat_body(None))
            .await
            .status,
        200
    );
    assert_eq!(g.client.get("/v1/models", &[]).await.status, 200);
    assert_eq!(g.client.get("/liveness", &[]).await.status, 200);
    // Without --admin-api-key the admin API takes the --api-key.
    assert_eq!(g.client.get("/workers", &[]).await.status, 401);
    assert_eq!(
        g.client
            .get("/workers", &[("authorization", b"Bearer s3cret")])
            .await
            .status,
        200
    );
    g.gw.shutdown().await;
}

#[tokio::test]
async fn a_client_that_never_finishes_its_request_head_is_disconnected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let w = sims(1).await;
    let mut c = config(&w);
    c.header_read_timeout = Some(std::time::Duration::from_millis(200));
    let g = start(c).await;
    let mut s = tokio::net::TcpStream::connect(g.gw.addr()).await.unwrap();
    s.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(std::time::Duration::from_secs(10), s.read(&mut buf)).await;
    assert!(
        matches!(read, Ok(Ok(0)) | Ok(Err(_))),
        "closed by the gateway: {read:?}"
    );
    assert_eq!(g.client.chat(&[], chat_body(None)).await.status, 200);
    g.gw.shutdown().await;
}

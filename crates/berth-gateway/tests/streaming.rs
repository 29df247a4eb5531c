//! Streaming through, client disconnects, graceful shutdown.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

fn stream_request(addr: std::net::SocketAddr) -> Request<Full<Bytes>> {
    let body = serde_json::json!({
        "model": "sim-model",
        "stream": true,
        "max_tokens": 50,
        "messages": [{"role": "user", "content": "tell me a story"}]
    });
    Request::post(format!("http://{addr}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

#[tokio::test]
async fn the_first_chunk_arrives_before_the_worker_finishes() {
    // A worker that decodes slowly (200 ms a token) and dies after two SSE events: a gateway that
    // buffered the response would have nothing to show; one that streams has delivered them.
    let w = vec![
        berth_sim::SimWorker::builder()
            .time_scale(1.0)
            .decode_step(Duration::from_millis(200))
            .spawn_on_loopback()
            .await,
    ];
    let g = start(config(&w)).await;
    w[0].set_drop_after_chunks(Some(2));
    let client = Client::builder(TokioExecutor::new()).build_http();
    let resp = client.request(stream_request(g.gw.addr())).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().contains_key("x-smg-routed-worker-id"));
    let mut body = resp.into_body();
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert!(
        String::from_utf8_lossy(&first).contains("data:"),
        "{first:?}"
    );
    // The worker's broken stream ends with the gateway's error event (tests/stream_errors.rs).
    let mut rest = Vec::new();
    while let Some(frame) = body.frame().await {
        rest.extend_from_slice(&frame.unwrap().into_data().unwrap());
    }
    assert!(
        String::from_utf8_lossy(&rest).contains("upstream_stream_error"),
        "{rest:?}"
    );
    g.gw.shutdown().await;
}

#[tokio::test]
async fn a_client_that_disconnects_releases_its_inflight_count() {
    let w = sims(1).await;
    let g = start(config(&w)).await;
    let gauge = format!("smg_worker_requests_active{{worker=\"{}\"}}", w[0].url());
    w[0].set_hang(true);
    let addr = g.gw.addr();
    let task = tokio::spawn(async move {
        let client = Client::builder(TokioExecutor::new()).build_http();
        client.request(stream_request(addr)).await
    });
    eventually("request reached the worker", || async {
        w[0].requests() == 1
    })
    .await;
    assert_eq!(sample(&metrics(&g.gw).await, &gauge), Some(1.0));
    task.abort();
    let gw = &g.gw;
    eventually("in-flight released", || async {
        sample(&metrics(gw).await, &gauge) == Some(0.0)
    })
    .await;
    w[0].set_hang(false);
    g.gw.shutdown().await;
}

#[tokio::test]
async fn shutdown_stops_accepting_and_lets_inflight_requests_finish() {
    shutdown_drains(0).await;
}

#[tokio::test]
async fn dedicated_io_threads_serve_and_drain_the_same() {
    shutdown_drains(2).await;
}

async fn shutdown_drains(io_threads: usize) {
    let w = sims(1).await;
    let mut c = config(&w);
    c.io_threads = io_threads;
    let g = start(c).await;
    for _ in 0..8 {
        assert_eq!(g.client.chat(&[], chat_body(None)).await.status, 200);
    }
    w[0].set_hang(true);
    let client = g.client.clone();
    let inflight = tokio::spawn(async move { client.chat(&[], chat_body(None)).await.status });
    eventually("request reached the worker", || async {
        w[0].requests() == 9
    })
    .await;
    let addr = g.gw.addr();
    let stopping = tokio::spawn(g.gw.shutdown());
    eventually("listener closed", || async {
        tokio::net::TcpStream::connect(addr).await.is_err()
    })
    .await;
    assert!(!stopping.is_finished(), "waits for the in-flight request");
    w[0].set_hang(false);
    assert_eq!(inflight.await.unwrap(), 200);
    tokio::time::timeout(Duration::from_secs(10), stopping)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_client_that_disconnects_mid_stream_cancels_the_worker_request() {
    // 1000 tokens at 100 ms each: the worker would stream for 100 s if nobody cancelled.
    let w = vec![
        berth_sim::SimWorker::builder()
            .time_scale(1.0)
            .decode_step(Duration::from_millis(100))
            .spawn_on_loopback()
            .await,
    ];
    let g = start(config(&w)).await;
    let body = serde_json::json!({
        "model": "sim-model", "stream": true, "max_tokens": 1000,
        "messages": [{"role": "user", "content": "go on"}]
    });
    let req = Request::post(format!("http://{}/v1/chat/completions", g.gw.addr()))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let client = Client::builder(TokioExecutor::new()).build_http();
    let resp = client.request(req).await.unwrap();
    let mut body = resp.into_body();
    body.frame().await.unwrap().unwrap();
    assert_eq!(w[0].stats().running, 1);
    drop(body);
    drop(client);
    eventually("the worker stopped the abandoned request", || async {
        w[0].stats().running == 0
    })
    .await;
    let gauge = format!("smg_worker_requests_active{{worker=\"{}\"}}", w[0].url());
    assert_eq!(sample(&metrics(&g.gw).await, &gauge), Some(0.0));
    g.gw.shutdown().await;
}

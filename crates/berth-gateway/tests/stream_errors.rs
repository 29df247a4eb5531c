//! Issue #11 part 5: a worker that dies mid-stream. The client's SSE stream gets one
//! `data: {"error": {...}}` event in the gateway's error shape (`upstream_stream_error`) and then
//! ends cleanly, so SDKs raise a readable API error; the break still counts against the worker.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use bytes::Bytes;
use common::*;
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// Sends `body` to `path` and reads the response to its end; `Err` when the transfer broke.
async fn read_all(
    addr: std::net::SocketAddr,
    path: &str,
    body: serde_json::Value,
) -> (u16, Result<String, String>) {
    let req = Request::post(format!("http://{addr}{path}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let client = Client::builder(TokioExecutor::new()).build_http();
    let resp = client.request(req).await.unwrap();
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(f) => out.extend_from_slice(&f.into_data().unwrap_or_default()),
            Err(e) => return (status, Err(e.to_string())),
        }
    }
    (status, Ok(String::from_utf8(out).unwrap()))
}

/// The last SSE event's data, parsed.
fn last_event(text: &str) -> serde_json::Value {
    let data = text
        .split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .last()
        .unwrap()
        .trim()
        .strip_prefix("data: ")
        .unwrap();
    serde_json::from_str(data).unwrap()
}

#[tokio::test]
async fn a_broken_stream_ends_with_one_error_event_and_counts_against_the_worker() {
    let chat = serde_json::json!({
        "model": "sim-model", "stream": true, "max_tokens": 50,
        "messages": [{"role": "user", "content": "tell me a story"}]
    });
    let generate = serde_json::json!({
        "text": "tell me a story", "stream": true, "sampling_params": {"max_new_tokens": 50}
    });
    for (path, body) in [("/v1/chat/completions", chat), ("/generate", generate)] {
        let w = sims(1).await;
        w[0].set_drop_after_chunks(Some(2));
        let mut c = config(&w);
        c.breaker.failure_threshold = 1;
        c.health.interval = std::time::Duration::from_secs(600);
        let g = start(c).await;
        let (status, text) = read_all(g.gw.addr(), path, body).await;
        assert_eq!(status, 200, "{path}");
        let text = text.unwrap_or_else(|e| panic!("{path}: the transfer broke: {e}"));
        assert!(
            text.starts_with("data: "),
            "{path}: the worker's events came first: {text}"
        );
        let err = last_event(&text);
        assert_eq!(
            err["error"]["code"], "upstream_stream_error",
            "{path}: {text}"
        );
        assert_eq!(err["error"]["type"], "server_error");
        assert!(
            err["error"]["message"]
                .as_str()
                .unwrap()
                .contains(&w[0].url()),
            "{err}"
        );
        assert!(!text.contains("[DONE]"), "{path}: {text}");
        let m = metrics(&g.gw).await;
        assert_eq!(
            sample(&m, "smg_router_upstream_stream_errors_total"),
            Some(1.0),
            "{path}"
        );
        let r = g.client.get("/workers", &[]).await;
        assert_eq!(
            r.json()["workers"][0]["circuit_breaker"],
            "open",
            "{path}: the break counted against the worker"
        );
        assert_eq!(r.json()["workers"][0]["requests_active"], 0);
        g.gw.shutdown().await;
    }
}

#[tokio::test]
async fn a_broken_messages_stream_ends_with_an_anthropic_error_event() {
    let w = sims(1).await;
    w[0].set_drop_after_chunks(Some(3));
    let g = start(config(&w)).await;
    let body = serde_json::json!({
        "model": "sim-model", "stream": true, "max_tokens": 50,
        "messages": [{"role": "user", "content": "tell me a story"}]
    });
    let (status, text) = read_all(g.gw.addr(), "/v1/messages", body).await;
    assert_eq!(status, 200);
    let text = text.unwrap_or_else(|e| panic!("the transfer broke: {e}"));
    assert!(
        text.starts_with("event: "),
        "the worker's events came first: {text}"
    );
    let last = text
        .split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .last()
        .unwrap()
        .trim();
    let data = last
        .strip_prefix("event: error\ndata: ")
        .unwrap_or_else(|| panic!("Anthropic's error event: {last}"));
    let err: serde_json::Value = serde_json::from_str(data).unwrap();
    assert_eq!(err["type"], "error");
    assert_eq!(err["error"]["type"], "api_error");
    assert_eq!(err["error"]["code"], "upstream_stream_error");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&w[0].url())
    );
}

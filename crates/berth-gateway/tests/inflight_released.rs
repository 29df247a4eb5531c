//! Every way a proxied request can end gives its in-flight count back: each fault is checked to
//! have fired (the client sees its ending, the metric counts it), then the counts are 0 again.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use berth_gateway::routing::PolicyKind;
use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// How a request ended, as its client saw it.
#[derive(Debug)]
enum Ending {
    /// The response arrived whole.
    Whole(u16, Bytes, Option<String>),
    /// The response head arrived, then the body broke.
    Broken(u16),
}

impl Ending {
    fn status(&self) -> u16 {
        match self {
            Self::Whole(s, ..) | Self::Broken(s) => *s,
        }
    }

    fn code(&self) -> Option<&str> {
        match self {
            Self::Whole(_, _, c) => c.as_deref(),
            Self::Broken(_) => None,
        }
    }
}

/// Sends a chat request and reads what arrives, tolerating a broken response.
async fn tolerant(g: &Running, body: serde_json::Value) -> Ending {
    let req = http::Request::post(format!("http://{}/v1/chat/completions", g.gw.addr()))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let client = Client::builder(TokioExecutor::new()).build_http();
    let resp = tokio::time::timeout(Duration::from_secs(20), client.request(req))
        .await
        .expect("the gateway answered in time")
        .unwrap();
    let status = resp.status().as_u16();
    let code = resp
        .headers()
        .get("x-smg-error-code")
        .map(|v| v.to_str().unwrap().to_owned());
    match resp.into_body().collect().await {
        Ok(b) => Ending::Whole(status, b.to_bytes(), code),
        Err(_) => Ending::Broken(status),
    }
}

/// Sends a chat request that the (hanging) workers hold, waits until a worker counts it in
/// flight, then leaves as a client that gives up.
async fn given_up(g: &Running) {
    let addr = g.gw.addr();
    let pending = tokio::spawn(async move {
        let req = http::Request::post(format!("http://{addr}/v1/chat/completions"))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(chat_body(None).to_string())))
            .unwrap();
        let client = Client::builder(TokioExecutor::new()).build_http();
        let _ = client.request(req).await;
    });
    eventually("the held request is counted in flight", || async {
        active(g).await.iter().sum::<u64>() == 1
    })
    .await;
    pending.abort();
}

async fn active(g: &Running) -> Vec<u64> {
    let r = g.client.get("/workers", &[]).await;
    r.json()["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["requests_active"].as_u64().unwrap())
        .collect()
}

fn counter(m: &str, name: &str) -> f64 {
    sample(m, name).unwrap_or(0.0)
}

async fn all_idle(g: &Running) {
    eventually("every worker's in-flight count is back to 0", || async {
        active(g).await.iter().all(|a| *a == 0)
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
        c.health.interval = Duration::from_secs(3600);
        let g = start(c).await;
        let stream = serde_json::json!({
            "model": "sim-model", "stream": true, "max_tokens": 8,
            "messages": [{"role": "user", "content": "hello"}]
        });

        // The worker drops the connection mid-stream: the stream ends with the gateway's error
        // event, counted as a worker stream error.
        for s in &w {
            s.set_drop_after_chunks(Some(1));
        }
        let before = counter(
            &metrics(&g.gw).await,
            "smg_router_upstream_stream_errors_total",
        );
        let e = tolerant(&g, stream.clone()).await;
        match &e {
            Ending::Whole(200, body, _) => assert!(
                String::from_utf8_lossy(body).contains("upstream_stream_error"),
                "{policy:?}: {e:?}"
            ),
            other => panic!("{policy:?}: the stream should end with an error event: {other:?}"),
        }
        let after = counter(
            &metrics(&g.gw).await,
            "smg_router_upstream_stream_errors_total",
        );
        assert_eq!(after, before + 1.0, "{policy:?}: the break was counted");
        for s in &w {
            s.set_drop_after_chunks(None);
        }
        all_idle(&g).await;

        // Worker errors, retried then passed through.
        for s in &w {
            s.set_error_rate(1.0, 503);
        }
        let before = counter(&metrics(&g.gw).await, "smg_router_retries_total");
        let e = tolerant(&g, chat_body(None)).await;
        assert_eq!(e.status(), 503, "{policy:?}: {e:?}");
        let after = counter(&metrics(&g.gw).await, "smg_router_retries_total");
        assert_eq!(after, before + 1.0, "{policy:?}: retried once");
        for s in &w {
            s.set_error_rate(0.0, 503);
        }
        all_idle(&g).await;

        // Timeouts on every attempt.
        for s in &w {
            s.set_hang(true);
        }
        let e = tolerant(&g, chat_body(None)).await;
        assert_eq!(
            (e.status(), e.code()),
            (504, Some("upstream_timeout")),
            "{policy:?}: {e:?}"
        );
        // A client that gives up while the worker holds its request.
        given_up(&g).await;
        for s in &w {
            s.set_hang(false);
        }
        all_idle(&g).await;

        // Too large.
        let mut big = chat_body(None);
        big["messages"][0]["content"] = "x".repeat(5_000).into();
        let e = tolerant(&g, big).await;
        assert_eq!(e.status(), 413, "{policy:?}: {e:?}");
        all_idle(&g).await;

        assert_eq!(g.client.chat(&[], chat_body(None)).await.status, 200);
        all_idle(&g).await;
        g.gw.shutdown().await;
    }
}

//! Shared harness: sim workers and a gateway on 127.0.0.1:0, and a small HTTP client.
#![allow(dead_code, clippy::unwrap_used, missing_docs, unreachable_pub)]

pub mod logs;
pub mod pd;
pub mod redis;
pub mod tls;

use std::net::SocketAddr;
use std::time::Duration;

use berth_gateway::{Gateway, GatewayConfig, GatewayHandle};
use berth_sim::{SimHandle, SimWorker};
use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::net::TcpListener;

/// `n` sim workers at time scale 0 serving `model`, with ids w0, w1, ...
pub async fn sims(n: usize) -> Vec<SimHandle> {
    sims_with_model(n, "sim-model").await
}

pub async fn sims_with_model(n: usize, model: &str) -> Vec<SimHandle> {
    let mut out = Vec::new();
    for i in 0..n {
        out.push(
            SimWorker::builder()
                .worker_id(format!("w{i}"))
                .model(model)
                .time_scale(0.0)
                .spawn_on_loopback()
                .await,
        );
    }
    out
}

/// A config for these workers with fast health checks and no retries/backoff surprises.
pub fn config(workers: &[SimHandle]) -> GatewayConfig {
    let mut c = GatewayConfig::new(workers.iter().map(SimHandle::url).collect());
    c.worker_startup_timeout = Duration::from_secs(5);
    c.health.interval = Duration::from_millis(50);
    c.health.timeout = Duration::from_secs(2);
    c.health.failure_threshold = 1;
    c.health.success_threshold = 1;
    c.shutdown_grace = Duration::from_secs(5);
    c
}

pub struct Running {
    pub gw: GatewayHandle,
    pub client: TestClient,
}

/// Starts a gateway (and its metrics listener) on loopback.
pub async fn start(config: GatewayConfig) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let metrics = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gw = Gateway::builder(config)
        .listener(listener)
        .metrics_listener(metrics)
        .start()
        .await
        .unwrap();
    let client = TestClient::new(gw.addr());
    Running { gw, client }
}

pub struct Resp {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Resp {
    pub fn worker(&self) -> Option<String> {
        self.headers
            .get("x-smg-routed-worker-id")
            .map(|v| v.to_str().unwrap().to_owned())
    }
    pub fn error_code(&self) -> Option<String> {
        self.headers
            .get("x-smg-error-code")
            .map(|v| v.to_str().unwrap().to_owned())
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

#[derive(Clone)]
pub struct TestClient {
    pub addr: SocketAddr,
    client: Client<HttpConnector, Full<Bytes>>,
}

impl TestClient {
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &[u8])],
        body: impl Into<Bytes>,
    ) -> Resp {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("http://{}{}", self.addr, path));
        for (k, v) in headers {
            req = req.header(*k, http::HeaderValue::from_bytes(v).unwrap());
        }
        let req = req.body(Full::new(body.into())).unwrap();
        let resp = tokio::time::timeout(Duration::from_secs(20), self.client.request(req))
            .await
            .expect("gateway answered in time")
            .unwrap();
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        Resp {
            status: parts.status,
            headers: parts.headers,
            body,
        }
    }

    /// POST a chat completion with these headers.
    pub async fn chat(&self, headers: &[(&str, &[u8])], body: serde_json::Value) -> Resp {
        let mut h = vec![("content-type", &b"application/json"[..])];
        h.extend_from_slice(headers);
        self.send(Method::POST, "/v1/chat/completions", &h, body.to_string())
            .await
    }

    /// A chat completion keyed by `x-smg-routing-key: key`; returns the serving worker URL.
    pub async fn keyed(&self, key: &str) -> String {
        let r = self
            .chat(&[("x-smg-routing-key", key.as_bytes())], chat_body(None))
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        r.worker().unwrap()
    }

    pub async fn get(&self, path: &str, headers: &[(&str, &[u8])]) -> Resp {
        self.send(Method::GET, path, headers, Bytes::new()).await
    }
}

pub fn chat_body(rid: Option<&str>) -> serde_json::Value {
    let mut v = serde_json::json!({
        "model": "sim-model",
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 2
    });
    if let Some(r) = rid {
        v["rid"] = serde_json::Value::from(r);
    }
    v
}

/// Scrapes the gateway's Prometheus endpoint.
pub async fn metrics(gw: &GatewayHandle) -> String {
    let c = TestClient::new(gw.metrics_addr().unwrap());
    let r = c.get("/metrics", &[]).await;
    String::from_utf8(r.body.to_vec()).unwrap()
}

/// The value of the sample whose line starts with `prefix` (name and labels), if present.
pub fn sample(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Polls `cond` every 20 ms for up to 10 s (bounded; not a timing assertion).
pub async fn eventually<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..500 {
        if cond().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("condition never held: {what}");
}

/// The worker's `is_healthy` flag in `GET /workers`.
pub async fn healthy(client: &TestClient, url: &str) -> bool {
    let r = client.get("/workers", &[]).await;
    r.json()["workers"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w["url"] == url && w["is_healthy"] == true)
}

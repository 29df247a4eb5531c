//! Issue #11 part 6: admission control (`--max-concurrent-requests`, `--queue-size`,
//! `--queue-timeout-secs`, `--rate-limit-tokens-per-second`). A burst over the bound gets 429
//! with `Retry-After` and a stable code while the admitted requests finish; queued requests are
//! admitted in turn, time out, or leave when their client does; the permit lasts for the whole
//! response (streams included) and comes back however the request ends.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use berth_gateway::GatewayConfig;
use berth_gateway::admission::AdmissionSettings;
use berth_sim::{SimHandle, SimWorker};
use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn limited(w: &[SimHandle], max: Option<u32>, queue: usize, rate: Option<f64>) -> GatewayConfig {
    let mut c = config(w);
    c.admission = AdmissionSettings {
        max_concurrent: max,
        queue_size: queue,
        queue_timeout: Duration::from_secs(60),
        rate,
    };
    c
}

async fn permits_in_use(g: &Running) -> f64 {
    sample(&metrics(&g.gw).await, "berth_admission_permits_in_use").unwrap()
}

async fn queue_depth(g: &Running) -> f64 {
    sample(&metrics(&g.gw).await, "berth_admission_queue_depth").unwrap()
}

async fn all_permits_back(g: &Running) {
    eventually("every permit came back", || async {
        permits_in_use(g).await == 0.0 && queue_depth(g).await == 0.0
    })
    .await;
}

/// `n` chat requests at once; their responses in order of sending.
async fn burst(client: &TestClient, n: usize) -> Vec<Resp> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let c = client.clone();
            tokio::spawn(async move { c.chat(&[], chat_body(None)).await })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

/// `n` chat requests at once, answered in a background task.
fn in_background(client: &TestClient, n: usize) -> tokio::task::JoinHandle<Vec<Resp>> {
    let c = client.clone();
    tokio::spawn(async move { burst(&c, n).await })
}

/// One chat request, answered in a background task.
fn one_in_background(client: &TestClient) -> tokio::task::JoinHandle<Resp> {
    let c = client.clone();
    tokio::spawn(async move { c.chat(&[], chat_body(None)).await })
}

fn assert_429(r: &Resp, code: &str) {
    assert_eq!(r.status, 429, "{:?}", r.body);
    assert_eq!(r.error_code().as_deref(), Some(code));
    let v = r.json();
    assert_eq!(v["error"]["code"], code);
    assert_eq!(v["error"]["type"], "rate_limit_error");
    let retry: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!(retry >= 1, "Retry-After is at least one second");
}

#[tokio::test]
async fn a_burst_over_the_bound_gets_429_and_the_admitted_ones_finish() {
    let w = sims(1).await;
    let g = start(limited(&w, Some(2), 0, None)).await;
    w[0].set_hang(true);
    let held = in_background(&g.client, 2);
    eventually("two requests hold the permits", || async {
        permits_in_use(&g).await == 2.0
    })
    .await;
    for r in burst(&g.client, 4).await {
        assert_429(&r, "queue_full");
        assert!(
            r.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("--max-concurrent-requests")
        );
    }
    w[0].set_hang(false);
    for r in held.await.unwrap() {
        assert_eq!(r.status, 200, "the admitted requests finish");
    }
    all_permits_back(&g).await;
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(&m, r#"smg_http_rate_limit_total{result="rejected"}"#),
        Some(4.0)
    );
    assert_eq!(
        sample(&m, r#"smg_http_rate_limit_total{result="allowed"}"#),
        Some(2.0)
    );
    assert_eq!(
        sample(&m, r#"berth_admission_rejected_total{reason="queue_full"}"#),
        Some(4.0)
    );
    assert_eq!(
        sample(
            &m,
            r#"smg_http_responses_total{status_code="429",error_code="queue_full"}"#
        ),
        Some(4.0)
    );
    assert_eq!(
        sample(
            &m,
            r#"smg_http_responses_total{status_code="200",error_code="none"}"#
        ),
        Some(2.0)
    );
    assert_eq!(g.client.chat(&[], chat_body(None)).await.status, 200);
}

#[tokio::test]
async fn queued_requests_are_admitted_in_turn() {
    let w = sims(1).await;
    let g = start(limited(&w, Some(1), 10, None)).await;
    w[0].set_hang(true);
    let all = in_background(&g.client, 4);
    eventually("one admitted, three queued", || async {
        permits_in_use(&g).await == 1.0 && queue_depth(&g).await == 3.0
    })
    .await;
    w[0].set_hang(false);
    for r in all.await.unwrap() {
        assert_eq!(r.status, 200);
    }
    all_permits_back(&g).await;
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(&m, "berth_admission_queue_wait_seconds_count"),
        Some(3.0)
    );
    assert_eq!(
        sample(&m, r#"smg_http_rate_limit_total{result="allowed"}"#),
        Some(4.0)
    );
}

#[tokio::test]
async fn a_request_that_waits_too_long_gets_queue_timeout_and_a_full_queue_turns_away() {
    let w = sims(1).await;
    let mut c = limited(&w, Some(1), 1, None);
    c.admission.queue_timeout = Duration::from_secs(1);
    let g = start(c).await;
    w[0].set_hang(true);
    let first = one_in_background(&g.client);
    eventually("one admitted", || async { permits_in_use(&g).await == 1.0 }).await;
    let second = one_in_background(&g.client);
    eventually("one queued", || async { queue_depth(&g).await == 1.0 }).await;
    assert_429(&g.client.chat(&[], chat_body(None)).await, "queue_full");
    let timed_out = second.await.unwrap();
    assert_429(&timed_out, "queue_timeout");
    assert!(
        timed_out.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--queue-timeout-secs")
    );
    assert_eq!(
        w[0].received().len(),
        1,
        "the timed-out request never reached the worker"
    );
    w[0].set_hang(false);
    assert_eq!(first.await.unwrap().status, 200);
    all_permits_back(&g).await;
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(
            &m,
            r#"berth_admission_rejected_total{reason="queue_timeout"}"#
        ),
        Some(1.0)
    );
}

/// Sends a complete chat request on a raw connection and returns it (nothing read yet).
async fn raw_request(
    addr: std::net::SocketAddr,
    body: &str,
    send_body: usize,
) -> tokio::net::TcpStream {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&body.as_bytes()[..send_body]).await.unwrap();
    s
}

#[tokio::test]
async fn a_queued_client_that_leaves_leaves_the_queue() {
    let w = sims(1).await;
    let g = start(limited(&w, Some(1), 10, None)).await;
    w[0].set_hang(true);
    let first = one_in_background(&g.client);
    eventually("one admitted", || async { permits_in_use(&g).await == 1.0 }).await;
    let body = chat_body(None).to_string();
    // One client sent its whole request, one only half its body; both then hang up.
    let whole = raw_request(g.gw.addr(), &body, body.len()).await;
    let half = raw_request(g.gw.addr(), &body, body.len() / 2).await;
    eventually("both queued", || async { queue_depth(&g).await == 2.0 }).await;
    drop(whole);
    drop(half);
    eventually("both left the queue", || async {
        queue_depth(&g).await == 0.0
    })
    .await;
    let m = metrics(&g.gw).await;
    assert_eq!(
        sample(&m, "berth_admission_queue_abandoned_total"),
        Some(2.0)
    );
    w[0].set_hang(false);
    assert_eq!(first.await.unwrap().status, 200);
    all_permits_back(&g).await;
    assert_eq!(
        w[0].received().len(),
        1,
        "nothing of the leavers reached the worker"
    );
    // The queue still works.
    assert_eq!(g.client.chat(&[], chat_body(None)).await.status, 200);
}

#[tokio::test]
async fn a_stream_holds_its_permit_to_its_end_and_a_client_that_leaves_releases_it() {
    let w = SimWorker::builder()
        .worker_id("w0")
        .model("sim-model")
        .time_scale(1.0)
        .decode_step(Duration::from_millis(100))
        .spawn_on_loopback()
        .await;
    let g = start(limited(std::slice::from_ref(&w), Some(1), 0, None)).await;
    let body = serde_json::json!({
        "model": "sim-model",
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 100,
        "stream": true
    })
    .to_string();
    let mut s = raw_request(g.gw.addr(), &body, body.len()).await;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("data:") {
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "the stream started");
        got.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"));
    // Headers and first tokens are out, the stream goes on: the permit is still held.
    assert_eq!(permits_in_use(&g).await, 1.0);
    assert_429(&g.client.chat(&[], chat_body(None)).await, "queue_full");
    drop(s);
    all_permits_back(&g).await;
    assert_eq!(g.client.chat(&[], chat_body(None)).await.status, 200);
}

#[tokio::test]
async fn every_ending_gives_the_permit_back() {
    let w = sims(2).await;
    let mut c = limited(&w, Some(1), 0, None);
    c.retry_max_retries = 0;
    c.max_payload_size = 4096;
    let g = start(c).await;
    // A worker error passed through.
    w[0].set_error_rate(1.0, 500);
    w[1].set_error_rate(1.0, 500);
    assert_eq!(g.client.chat(&[], chat_body(None)).await.status, 500);
    all_permits_back(&g).await;
    w[0].clear_faults();
    w[1].clear_faults();
    // Refusals made by the gateway: unknown model, bad JSON, a body over the limit.
    let mut unknown = chat_body(None);
    unknown["model"] = "no-such-model".into();
    assert_eq!(g.client.chat(&[], unknown).await.status, 404);
    all_permits_back(&g).await;
    let r = g
        .client
        .send(
            http::Method::POST,
            "/v1/chat/completions",
            &[("content-type", b"application/json")],
            "{not json",
        )
        .await;
    assert!(r.status.is_client_error(), "{}", r.status);
    all_permits_back(&g).await;
    let big = format!(r#"{{"model":"sim-model","pad":"{}"}}"#, "x".repeat(8192));
    let r = g
        .client
        .send(
            http::Method::POST,
            "/v1/chat/completions",
            &[("content-type", b"application/json")],
            big,
        )
        .await;
    assert_eq!(r.status, 413);
    all_permits_back(&g).await;
    // A worker that broke off a stream.
    w[0].set_drop_after_chunks(Some(1));
    w[1].set_drop_after_chunks(Some(1));
    let mut stream = chat_body(None);
    stream["stream"] = true.into();
    stream["max_tokens"] = 20.into();
    let r = g.client.chat(&[], stream).await;
    assert_eq!(r.status, 200);
    all_permits_back(&g).await;
    // A worker that is gone.
    w[0].kill();
    w[1].kill();
    let r = g.client.chat(&[], chat_body(None)).await;
    assert!(r.status.is_server_error(), "{}", r.status);
    all_permits_back(&g).await;
}

#[tokio::test]
async fn the_rate_bucket_bursts_to_the_bound_then_admits_at_its_rate() {
    let w = sims(1).await;
    let g = start(limited(&w, Some(2), 10, Some(4.0))).await;
    // A burst of six: two tokens at once, the other four queued and admitted as tokens refill.
    for r in burst(&g.client, 6).await {
        assert_eq!(r.status, 200);
    }
    all_permits_back(&g).await;
    let m = metrics(&g.gw).await;
    let waited = sample(&m, "berth_admission_queue_wait_seconds_count").unwrap();
    assert!(
        waited >= 4.0,
        "at most the burst went through without waiting: {waited}"
    );
}

#[tokio::test]
async fn with_no_queue_a_rate_limit_turns_away_past_its_burst() {
    let w = sims(1).await;
    let g = start(limited(&w, None, 0, Some(0.5))).await;
    // Burst: one second of tokens at 0.5/s is one request.
    assert_eq!(g.client.chat(&[], chat_body(None)).await.status, 200);
    let r = g.client.chat(&[], chat_body(None)).await;
    assert_429(&r, "queue_full");
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--rate-limit-tokens-per-second")
    );
    // The next token is two seconds away.
    let retry: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry), "{retry}");
}

#[tokio::test]
async fn health_admin_and_models_routes_are_never_limited() {
    let w = sims(1).await;
    let g = start(limited(&w, Some(1), 0, None)).await;
    w[0].set_hang(true);
    let held = one_in_background(&g.client);
    eventually("the permit is held", || async {
        permits_in_use(&g).await == 1.0
    })
    .await;
    for path in ["/health", "/readiness", "/v1/models", "/workers"] {
        assert_eq!(g.client.get(path, &[]).await.status, 200, "{path}");
    }
    w[0].set_hang(false);
    assert_eq!(held.await.unwrap().status, 200);
}

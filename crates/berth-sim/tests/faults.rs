//! Each fault mode, through the handle and through `POST /sim/faults`.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use berth_sim::{Faults, SimHandle, SimWorker};
use http::Method;
use serde_json::{Value, json};

use common::{client, get, post, request};

fn chat(stream: bool) -> Value {
    json!({"model": "sim-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": stream})
}

/// Polls a condition a bounded number of times (no timing assertion: only a bound).
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..2000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("never happened: {what}");
}

async fn instant() -> SimHandle {
    SimWorker::builder()
        .worker_id("w-test")
        .time_scale(0.0)
        .spawn_on_loopback()
        .await
}

#[tokio::test]
async fn injected_errors_use_the_chosen_status_and_rate() {
    let worker = instant().await;
    let http = client();
    worker.set_error_rate(1.0, 503);
    let r = post(&http, &worker.url(), "/v1/chat/completions", &chat(false)).await;
    assert_eq!(r.status, 503);
    assert_eq!(r.header("x-sim-fault"), Some("error"));
    assert_eq!(r.header("x-sim-worker-id"), Some("w-test"));
    assert_eq!(r.json()["error"]["code"], 503);
    worker.set_error_rate(0.5, 429);
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(
            post(&http, &worker.url(), "/v1/chat/completions", &chat(false))
                .await
                .status
                .as_u16(),
        );
    }
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 2);
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 2);
    assert_eq!(worker.stats().errors_injected, 3);
}

#[tokio::test]
async fn hang_holds_requests_before_the_first_byte_until_cleared() {
    let worker = instant().await;
    worker.set_hang(true);
    let url = worker.url();
    let pending =
        tokio::spawn(
            async move { post(&client(), &url, "/v1/chat/completions", &chat(false)).await },
        );
    eventually("the hung request reached the worker", || {
        worker.requests() == 1
    })
    .await;
    tokio::task::yield_now().await;
    assert!(!pending.is_finished(), "a hung request gets no response");
    worker.set_hang(false);
    assert_eq!(pending.await.unwrap().status, 200);
}

#[tokio::test]
async fn first_byte_delay_holds_the_response_at_least_that_long() {
    let worker = instant().await;
    worker.set_first_byte_delay(Duration::from_millis(30));
    let start = std::time::Instant::now();
    let r = post(
        &client(),
        &worker.url(),
        "/v1/chat/completions",
        &chat(false),
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(
        start.elapsed() >= Duration::from_millis(30),
        "a lower bound only"
    );
    assert_eq!(worker.faults().first_byte_delay_ms, 30);
}

#[tokio::test]
async fn slowdown_multiplies_the_simulated_delays() {
    // 1000 prompt tokens at 1000 tok/s, time scale 0.01: 10 ms of prefill; slowed 5x: 50 ms.
    let worker = SimWorker::builder()
        .time_scale(0.01)
        .prefill_tokens_per_sec(1000.0)
        .spawn_on_loopback()
        .await;
    let http = client();
    worker.set_slowdown(5.0);
    let body =
        json!({"model": "sim-model", "prompt": (0..1000).collect::<Vec<u32>>(), "max_tokens": 1});
    let r = post(&http, &worker.url(), "/v1/completions", &body)
        .await
        .json();
    assert_eq!(r["usage"]["prompt_tokens"], 1000);
    assert!(
        r["sim"]["prefill_ms"].as_f64().unwrap() >= 50.0,
        "{}",
        r["sim"]
    );
}

#[tokio::test]
async fn drop_after_chunks_cuts_streams_and_whole_bodies() {
    let worker = instant().await;
    let http = client();
    worker.set_drop_after_chunks(Some(2));
    let url = format!("{}/v1/chat/completions", worker.url());
    let streamed = request(&http, Method::POST, &url, Some(&chat(true)), &[]).await;
    assert!(
        streamed.is_err(),
        "stream must be cut: {:?}",
        streamed.map(|r| r.text())
    );
    let whole = request(&http, Method::POST, &url, Some(&chat(false)), &[]).await;
    assert!(whole.is_err(), "body must be cut");
    worker.set_drop_after_chunks(None);
    assert_eq!(
        request(&http, Method::POST, &url, Some(&chat(true)), &[])
            .await
            .unwrap()
            .status,
        200
    );
}

#[tokio::test]
async fn failing_health_answers_503() {
    let worker = instant().await;
    let http = client();
    assert_eq!(get(&http, &worker.url(), "/health").await.status, 200);
    worker.set_health_failing(true);
    assert_eq!(get(&http, &worker.url(), "/health").await.status, 503);
    assert_eq!(
        get(&http, &worker.url(), "/health_generate").await.status,
        503
    );
    worker.set_health_failing(false);
    assert_eq!(
        get(&http, &worker.url(), "/health_generate").await.status,
        200
    );
}

#[tokio::test]
async fn kill_cuts_everything_and_join_returns() {
    let worker = instant().await;
    let http = client();
    assert_eq!(
        post(&http, &worker.url(), "/v1/chat/completions", &chat(false))
            .await
            .status,
        200
    );
    let url = worker.url();
    worker.kill();
    assert!(worker.exited());
    worker.join().await;
    let after = request(&client(), Method::GET, &format!("{url}/health"), None, &[]).await;
    assert!(after.is_err(), "a dead worker refuses connections");
}

#[tokio::test]
async fn faults_over_http_replace_the_set_and_exit_kills() {
    let worker = instant().await;
    let http = client();
    let r = post(
        &http,
        &worker.url(),
        "/sim/faults",
        &json!({"error_rate": 1.0, "error_status": 502}),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        worker.faults(),
        Faults {
            error_rate: 1.0,
            error_status: 502,
            ..Faults::default()
        }
    );
    assert_eq!(
        get(&http, &worker.url(), "/sim/faults").await.json()["error_status"],
        502
    );
    assert_eq!(
        post(
            &http,
            &worker.url(),
            "/v1/completions",
            &json!({"prompt": "x"})
        )
        .await
        .status,
        502
    );
    assert_eq!(
        post(
            &http,
            &worker.url(),
            "/sim/faults",
            &json!({"error_rate": 7})
        )
        .await
        .status,
        400
    );
    assert_eq!(
        post(&http, &worker.url(), "/sim/faults", &json!({"bogus": 1}))
            .await
            .status,
        400
    );
    assert_eq!(
        post(&http, &worker.url(), "/sim/faults", &json!({}))
            .await
            .status,
        200
    );
    assert_eq!(worker.faults(), Faults::default());
    let r = post(&http, &worker.url(), "/sim/faults", &json!({"exit": true})).await;
    assert_eq!(r.json()["exit"], true);
    worker.join().await;
}

#[tokio::test]
async fn exit_after_requests_dies_on_the_nth_request() {
    let worker = SimWorker::builder()
        .time_scale(0.0)
        .faults(Faults {
            exit_after_requests: Some(2),
            ..Faults::default()
        })
        .spawn_on_loopback()
        .await;
    let http = client();
    assert_eq!(
        post(
            &http,
            &worker.url(),
            "/v1/completions",
            &json!({"prompt": "x"})
        )
        .await
        .status,
        200
    );
    let url = format!("{}/v1/completions", worker.url());
    let _ = request(
        &http,
        Method::POST,
        &url,
        Some(&json!({"prompt": "x"})),
        &[],
    )
    .await;
    eventually("worker exited", || worker.exited()).await;
    worker.join().await;
}

#[tokio::test]
async fn unknown_models_get_404_and_several_models_are_served() {
    let worker = SimWorker::builder()
        .time_scale(0.0)
        .models(["a", "b"])
        .spawn_on_loopback()
        .await;
    let http = client();
    let ask = |model: &str| json!({"model": model, "messages": [{"role": "user", "content": "x"}], "max_tokens": 1});
    assert_eq!(
        post(&http, &worker.url(), "/v1/chat/completions", &ask("a"))
            .await
            .status,
        200
    );
    let b = post(&http, &worker.url(), "/v1/chat/completions", &ask("b")).await;
    assert_eq!(b.json()["model"], "b");
    let c = post(&http, &worker.url(), "/v1/chat/completions", &ask("c")).await;
    assert_eq!(c.status, 404);
    assert_eq!(c.json()["error"]["type"], "NotFoundError");
    assert_eq!(worker.stats().unknown_model, 1);
}

#[tokio::test]
async fn requests_longer_than_the_context_get_400() {
    let worker = SimWorker::builder()
        .time_scale(0.0)
        .context_length(100)
        .spawn_on_loopback()
        .await;
    let http = client();
    let ask = |max: u32| json!({"prompt": "short ", "max_tokens": max});
    assert_eq!(
        post(&http, &worker.url(), "/v1/completions", &ask(90))
            .await
            .status,
        200
    );
    let refused = post(&http, &worker.url(), "/v1/completions", &ask(100)).await;
    assert_eq!(refused.status, 400);
    assert!(
        refused.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("maximum context length is 100")
    );
}

#[tokio::test]
async fn received_requests_show_what_was_forwarded() {
    let worker = instant().await;
    let http = client();
    let url = format!("{}/v1/chat/completions", worker.url());
    let mut body = chat(false);
    body["rid"] = json!("conv-7_t2_r1");
    let headers = [("x-smg-routing-key", "conv-7"), ("X-Session-ID", "s1")];
    request(&http, Method::POST, &url, Some(&body), &headers)
        .await
        .unwrap();
    let seen = worker.received();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert_eq!(seen[0].rid.as_deref(), Some("conv-7_t2_r1"));
    assert_eq!(seen[0].header("x-smg-routing-key"), Some("conv-7"));
    assert_eq!(seen[0].header("x-session-id"), Some("s1"));
    assert_eq!(seen[0].json().unwrap()["rid"], "conv-7_t2_r1");
    let listed = get(&http, &worker.url(), "/sim/requests").await.json();
    assert_eq!(
        listed["requests"][0]["headers"]["x-smg-routing-key"],
        "conv-7"
    );
    assert_eq!(listed["requests"][0]["rid"], "conv-7_t2_r1");
    worker.clear_received();
    assert!(worker.received().is_empty());
}

#[tokio::test]
async fn shutdown_stops_the_worker() {
    let worker = instant().await;
    let url = worker.url();
    worker.shutdown().await;
    assert!(
        request(&client(), Method::GET, &format!("{url}/health"), None, &[])
            .await
            .is_err()
    );
}

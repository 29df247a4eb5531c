//! The latency model seen through HTTP, on a paused tokio clock: delays are virtual, so the
//! reported times are exact and the test waits on no wall clock.
#![allow(clippy::unwrap_used)]

mod common;

use berth_sim::SimWorker;
use serde_json::{Value, json};

use common::{client, post};

fn ask(content: &str, history: &[Value]) -> Value {
    let mut messages = history.to_vec();
    messages.push(json!({"role": "user", "content": content}));
    json!({"model": "sim-model", "messages": messages, "max_tokens": 4})
}

fn ms(r: &Value, field: &str) -> f64 {
    r["sim"][field].as_f64().unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_cached_turn_prefills_faster_and_a_full_worker_queues() {
    let worker = SimWorker::builder()
        .time_scale(1.0)
        .max_running(1)
        .spawn_on_loopback()
        .await;
    let http = client();
    let long = "lorem ipsum dolor ".repeat(500);

    let turn1 = post(
        &http,
        &worker.url(),
        "/v1/chat/completions",
        &ask(&long, &[]),
    )
    .await
    .json();
    let answer = json!({"role": "assistant", "content": turn1["choices"][0]["message"]["content"]});
    let history = [json!({"role": "user", "content": long}), answer];
    let turn2 = post(
        &http,
        &worker.url(),
        "/v1/chat/completions",
        &ask("go on", &history),
    )
    .await
    .json();
    assert!(
        turn2["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(
        ms(&turn2, "prefill_ms") < ms(&turn1, "prefill_ms") / 5.0,
        "cached {} vs cold {}",
        turn2["sim"],
        turn1["sim"]
    );

    // Two cold requests at once on a worker that runs one at a time: one waits for the other.
    let url = worker.url();
    let (body_a, body_b) = (
        ask(&format!("a {long}"), &[]),
        ask(&format!("b {long}"), &[]),
    );
    let (a, b) = tokio::join!(
        post(&http, &url, "/v1/chat/completions", &body_a),
        post(&http, &url, "/v1/chat/completions", &body_b),
    );
    let (a, b) = (a.json(), b.json());
    let (first, second) = if ms(&a, "queue_ms") <= ms(&b, "queue_ms") {
        (a, b)
    } else {
        (b, a)
    };
    assert_eq!(ms(&first, "queue_ms"), 0.0);
    assert!(
        ms(&second, "queue_ms") >= ms(&first, "prefill_ms"),
        "queued {} behind {}",
        second["sim"],
        first["sim"]
    );
}

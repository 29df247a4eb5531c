//! KV cache accounting seen through the HTTP API.
#![allow(clippy::unwrap_used)]

mod common;

use berth_sim::SimWorker;
use serde_json::{Value, json};

use common::{client, post};

fn chat(messages: &Value, max_tokens: u32) -> Value {
    json!({"model": "sim-model", "messages": messages, "max_tokens": max_tokens})
}

#[tokio::test]
async fn turn_two_reuses_turn_one_prompt_and_answer_in_whole_blocks() {
    let worker = SimWorker::builder()
        .time_scale(0.0)
        .spawn_on_loopback()
        .await;
    let fresh = SimWorker::builder()
        .time_scale(0.0)
        .spawn_on_loopback()
        .await;
    let http = client();
    let mut messages = json!([
        {"role": "system", "content": "You are a travel planner."},
        {"role": "user", "content": "Plan a three-day trip to Kyoto with temples and food."},
    ]);
    let r1 = post(
        &http,
        &worker.url(),
        "/v1/chat/completions",
        &chat(&messages, 37),
    )
    .await
    .json();
    let p1 = r1["usage"]["prompt_tokens"].as_u64().unwrap();
    let c1 = r1["usage"]["completion_tokens"].as_u64().unwrap();
    assert_eq!(c1, 37);
    assert_eq!(r1["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    let answer = r1["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    messages.as_array_mut().unwrap().extend([
        json!({"role": "assistant", "content": answer}),
        json!({"role": "user", "content": "Now make it five days."}),
    ]);

    let r2 = post(
        &http,
        &worker.url(),
        "/v1/chat/completions",
        &chat(&messages, 8),
    )
    .await
    .json();
    let cached = r2["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap();
    assert_eq!(cached, (p1 + c1) / 16 * 16);
    assert!(cached > 0);
    assert_eq!(r2["sim"]["cached_tokens"].as_u64(), Some(cached));

    let elsewhere = post(
        &http,
        &fresh.url(),
        "/v1/chat/completions",
        &chat(&messages, 8),
    )
    .await
    .json();
    assert_eq!(
        elsewhere["usage"]["prompt_tokens_details"]["cached_tokens"],
        0
    );
    assert_eq!(worker.cached_tokens(), cached);
    assert_eq!(worker.requests(), 2);
    assert_eq!(
        worker.prompt_tokens(),
        p1 + r2["usage"]["prompt_tokens"].as_u64().unwrap()
    );
}

#[tokio::test]
async fn generate_and_messages_report_cached_tokens_too() {
    let worker = SimWorker::builder()
        .time_scale(0.0)
        .spawn_on_loopback()
        .await;
    let http = client();
    let text = "word ".repeat(100);
    let g1 = post(
        &http,
        &worker.url(),
        "/generate",
        &json!({"text": text, "sampling_params": {"max_new_tokens": 4}}),
    )
    .await
    .json();
    assert_eq!(g1["meta_info"]["cached_tokens"], 0);
    assert_eq!(g1["meta_info"]["completion_tokens"], 4);
    let turn2 = format!("{text}{}more", g1["text"].as_str().unwrap());
    let g2 = post(
        &http,
        &worker.url(),
        "/generate",
        &json!({"text": turn2, "sampling_params": {"max_new_tokens": 4}}),
    )
    .await
    .json();
    let p1 = g1["meta_info"]["prompt_tokens"].as_u64().unwrap();
    assert_eq!(
        g2["meta_info"]["cached_tokens"].as_u64().unwrap(),
        (p1 + 4) / 16 * 16
    );

    let msg = json!({"model": "sim-model", "max_tokens": 5, "system": "be brief",
                     "messages": [{"role": "user", "content": "hello there ".repeat(30)}]});
    let m1 = post(&http, &worker.url(), "/v1/messages", &msg)
        .await
        .json();
    assert_eq!(m1["usage"]["cache_read_input_tokens"], 0);
    let m2 = post(&http, &worker.url(), "/v1/messages", &msg)
        .await
        .json();
    let cached = m2["usage"]["cache_read_input_tokens"].as_u64().unwrap();
    assert!(cached > 0);
    assert_eq!(
        m2["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64(),
        Some(cached)
    );
    assert_eq!(
        m2["usage"]["input_tokens"].as_u64().unwrap() + cached,
        m2["usage"]["prompt_tokens"].as_u64().unwrap()
    );
}

#[tokio::test]
async fn a_full_cache_evicts_the_least_recently_used_conversation() {
    // Room for 8 blocks. Conversation a takes ~5; b (~5) evicts a's tail first (LRU, deepest
    // blocks first); c (over 8) evicts the rest.
    let worker = SimWorker::builder()
        .time_scale(0.0)
        .kv_capacity_tokens(128)
        .spawn_on_loopback()
        .await;
    let http = client();
    let conv = |salt: &str, n: usize| json!([{"role": "user", "content": format!("{salt} {}", "abc ".repeat(n))}]);
    let cached = |r: &Value| {
        r["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap()
    };
    let (a, b, c) = (conv("alpha", 60), conv("beta", 60), conv("gamma", 200));
    let url = format!("{}/v1/chat/completions", worker.url());
    let send = |body: Value| {
        let (http, url) = (&http, &url);
        async move {
            common::request(http, http::Method::POST, url, Some(&body), &[])
                .await
                .unwrap()
                .json()
        }
    };
    send(chat(&a, 4)).await;
    let full = cached(&send(chat(&a, 4)).await);
    assert!(full > 0);
    send(chat(&b, 4)).await;
    let partial = cached(&send(chat(&a, 4)).await);
    assert!(partial < full, "b evicted a's tail: {partial} < {full}");
    send(chat(&c, 4)).await;
    assert_eq!(cached(&send(chat(&a, 4)).await), 0);
    assert!(worker.stats().kv_used_tokens <= 128);
}

#[tokio::test]
async fn flush_cache_forgets_every_prefix() {
    let worker = SimWorker::builder()
        .time_scale(0.0)
        .spawn_on_loopback()
        .await;
    let http = client();
    let messages =
        json!([{"role": "user", "content": "a question long enough to fill blocks ".repeat(4)}]);
    post(
        &http,
        &worker.url(),
        "/v1/chat/completions",
        &chat(&messages, 4),
    )
    .await;
    let flushed = post(&http, &worker.url(), "/flush_cache", &json!({})).await;
    assert_eq!(flushed.status, 200);
    assert!(flushed.json()["flushed_blocks"].as_u64().unwrap() > 0);
    let again = post(
        &http,
        &worker.url(),
        "/v1/chat/completions",
        &chat(&messages, 4),
    )
    .await
    .json();
    assert_eq!(again["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    assert_eq!(worker.stats().kv_used_tokens % 16, 0);
}

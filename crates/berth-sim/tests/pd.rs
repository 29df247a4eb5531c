//! Prefill and decode modes: the bootstrap handshake, refusals, the bounded wait.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use berth_sim::{PdMode, SimWorker};
use serde_json::{Value, json};

use common::{client, post};

fn body(extra: Value) -> Value {
    let text = "Summarize the plot of a long novel about the sea, please. ".repeat(4);
    let mut b = json!({"model": "sim-model", "messages": [{"role": "user", "content": text}], "max_tokens": 6});
    for (k, v) in extra.as_object().unwrap() {
        b[k] = v.clone();
    }
    b
}

#[tokio::test]
async fn a_pair_hands_the_room_over_and_reports_the_prefill_cache() {
    let prefill = SimWorker::builder()
        .mode(PdMode::Prefill)
        .time_scale(0.0)
        .spawn_on_loopback()
        .await;
    let decode = SimWorker::builder()
        .mode(PdMode::Decode)
        .time_scale(0.0)
        .spawn_on_loopback()
        .await;
    let port = prefill.bootstrap_port().unwrap();
    let http = client();
    for (room, want_cached) in [(11u64, false), (12, true)] {
        let b = body(
            json!({"bootstrap_host": "127.0.0.1", "bootstrap_port": port, "bootstrap_room": room}),
        );
        // decode first: it waits for the room
        let decode_url = decode.url();
        let (d, p) = tokio::join!(
            post(&http, &decode_url, "/v1/chat/completions", &b),
            async {
                tokio::time::sleep(Duration::from_millis(50)).await;
                post(&http, &prefill.url(), "/v1/chat/completions", &b).await
            }
        );
        assert_eq!(p.status, 200);
        assert_eq!(
            p.json()["usage"]["completion_tokens"],
            1,
            "prefill makes one token"
        );
        assert_eq!(d.status, 200, "{}", d.text());
        let d = d.json();
        assert_eq!(d["usage"]["completion_tokens"], 6);
        let cached = d["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap();
        assert_eq!(
            cached,
            p.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .unwrap(),
            "decode reports the prefill worker's cache hit"
        );
        assert_eq!(cached > 0, want_cached, "room {room}: {cached}");
    }
    assert_eq!(prefill.pending_rooms(), 0, "each room taken once");
}

#[tokio::test]
async fn pd_workers_refuse_requests_without_bootstrap_fields() {
    let prefill = SimWorker::builder()
        .mode(PdMode::Prefill)
        .time_scale(0.0)
        .spawn_on_loopback()
        .await;
    let decode = SimWorker::builder()
        .mode(PdMode::Decode)
        .time_scale(0.0)
        .spawn_on_loopback()
        .await;
    let http = client();
    for w in [&prefill, &decode] {
        let r = post(&http, &w.url(), "/v1/chat/completions", &body(json!({}))).await;
        assert_eq!(r.status, 400);
        assert!(r.text().contains("bootstrap_room"), "{}", r.text());
    }
    let regular = SimWorker::builder()
        .time_scale(0.0)
        .spawn_on_loopback()
        .await;
    assert!(regular.bootstrap_port().is_none());
    let r = post(
        &http,
        &regular.url(),
        "/v1/chat/completions",
        &body(json!({})),
    )
    .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn a_room_that_never_comes_is_a_clear_error_within_the_timeout() {
    let prefill = SimWorker::builder()
        .mode(PdMode::Prefill)
        .time_scale(0.0)
        .spawn_on_loopback()
        .await;
    let decode = SimWorker::builder()
        .mode(PdMode::Decode)
        .bootstrap_timeout(Duration::from_millis(300))
        .time_scale(0.0)
        .spawn_on_loopback()
        .await;
    let http = client();
    let port = prefill.bootstrap_port().unwrap();
    let b =
        body(json!({"bootstrap_host": "127.0.0.1", "bootstrap_port": port, "bootstrap_room": 99}));
    let r = post(&http, &decode.url(), "/v1/chat/completions", &b).await;
    assert_eq!(r.status, 500);
    assert!(r.text().contains("bootstrap room 99"), "{}", r.text());
    // an unreachable bootstrap listener too
    prefill.kill();
    let r = post(&http, &decode.url(), "/v1/chat/completions", &b).await;
    assert_eq!(r.status, 500);
    assert!(r.text().contains("did not arrive"), "{}", r.text());
}

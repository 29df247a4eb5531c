//! Every SSE framing, parsed back by a client and checked against the non-streamed answer.
#![allow(clippy::unwrap_used)]

mod common;

use berth_sim::SimWorker;
use serde_json::{Value, json};

use common::{client, post};

fn data(events: &[(Option<String>, String)]) -> Vec<Value> {
    events
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect()
}

#[tokio::test]
async fn chat_stream_is_framed_like_openai_with_a_final_usage_chunk() {
    let worker = SimWorker::builder()
        .time_scale(0.0)
        .spawn_on_loopback()
        .await;
    let http = client();
    let body = json!({"model": "sim-model", "messages": [{"role": "user", "content": "tell me a story about ".repeat(10)}], "max_tokens": 6});
    let whole = post(&http, &worker.url(), "/v1/chat/completions", &body)
        .await
        .json();
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let reply = post(&http, &worker.url(), "/v1/chat/completions", &streamed).await;
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    assert!(reply.header("x-sim-worker-id").is_some());
    let events = reply.sse();
    assert!(events.iter().all(|(name, _)| name.is_none()));
    let (last, rest) = events.split_last().unwrap();
    assert_eq!(last.1, "[DONE]");
    let chunks = data(rest);
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks
        .iter()
        .filter_map(|c| {
            c["choices"].get(0)?["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(
        text,
        whole["choices"][0]["message"]["content"].as_str().unwrap()
    );
    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "length");
    let usage_chunk = chunks.last().unwrap();
    assert_eq!(usage_chunk["choices"], json!([]));
    assert_eq!(usage_chunk["usage"]["completion_tokens"], 6);
    assert_eq!(
        usage_chunk["usage"]["prompt_tokens"],
        whole["usage"]["prompt_tokens"]
    );
    // The second request repeats the first's prompt: its blocks are cached.
    assert!(
        usage_chunk["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
}

#[tokio::test]
async fn completion_stream_ends_with_usage_then_done() {
    let worker = SimWorker::builder()
        .time_scale(0.0)
        .spawn_on_loopback()
        .await;
    let http = client();
    let body = json!({"model": "sim-model", "prompt": "once upon a time ", "max_tokens": 3, "stream": true});
    let events = post(&http, &worker.url(), "/v1/completions", &body)
        .await
        .sse();
    let (last, rest) = events.split_last().unwrap();
    assert_eq!(last.1, "[DONE]");
    let chunks = data(rest);
    assert_eq!(chunks.len(), 5, "3 tokens, a finish chunk, a usage chunk");
    let text: String = chunks[..3]
        .iter()
        .map(|c| c["choices"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text.len(), 12);
    assert_eq!(chunks[3]["choices"][0]["finish_reason"], "length");
    assert_eq!(chunks[4]["usage"]["completion_tokens"], 3);
    assert_eq!(
        chunks[4]["usage"]["prompt_tokens_details"]["cached_tokens"],
        0
    );
}

#[tokio::test]
async fn generate_stream_carries_cumulative_text_and_meta_info() {
    let worker = SimWorker::builder()
        .time_scale(0.0)
        .spawn_on_loopback()
        .await;
    let http = client();
    let body = json!({"text": "the prompt ", "sampling_params": {"max_new_tokens": 4}, "stream": true, "rid": "conv_t1"});
    let events = post(&http, &worker.url(), "/generate", &body).await.sse();
    let (last, rest) = events.split_last().unwrap();
    assert_eq!(last.1, "[DONE]");
    let chunks = data(rest);
    assert_eq!(chunks.len(), 4);
    for (i, c) in chunks.iter().enumerate() {
        assert_eq!(
            c["text"].as_str().unwrap().len(),
            (i + 1) * 4,
            "cumulative text"
        );
        assert_eq!(c["meta_info"]["completion_tokens"], i + 1);
        assert_eq!(c["meta_info"]["id"], "conv_t1");
    }
    assert!(chunks[2]["meta_info"]["finish_reason"].is_null());
    assert_eq!(chunks[3]["meta_info"]["finish_reason"]["type"], "length");
    assert_eq!(chunks[3]["meta_info"]["cached_tokens"], 0);
    let whole = post(
        &http,
        &worker.url(),
        "/generate",
        &json!({"text": "the prompt ", "sampling_params": {"max_new_tokens": 4}}),
    )
    .await
    .json();
    assert_eq!(whole["text"], chunks[3]["text"]);
}

#[tokio::test]
async fn messages_stream_uses_anthropic_named_events() {
    let worker = SimWorker::builder()
        .time_scale(0.0)
        .spawn_on_loopback()
        .await;
    let http = client();
    let body = json!({"model": "sim-model", "max_tokens": 3, "stream": true,
                      "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]});
    let events = post(&http, &worker.url(), "/v1/messages", &body)
        .await
        .sse();
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_deref().unwrap()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let payloads = data(&events);
    for ((name, _), p) in events.iter().zip(&payloads) {
        assert_eq!(
            p["type"].as_str(),
            name.as_deref(),
            "data.type matches the event name"
        );
    }
    assert_eq!(payloads[0]["message"]["role"], "assistant");
    let text: String = payloads[3..6]
        .iter()
        .map(|p| p["delta"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text.len(), 12);
    assert_eq!(payloads[7]["delta"]["stop_reason"], "max_tokens");
    assert_eq!(payloads[7]["usage"]["output_tokens"], 3);
    assert!(payloads[7]["usage"]["cache_read_input_tokens"].is_u64());
}

#[tokio::test]
async fn responses_and_pooling_endpoints_answer() {
    let worker = SimWorker::builder()
        .time_scale(0.0)
        .spawn_on_loopback()
        .await;
    let http = client();
    let r = post(
        &http,
        &worker.url(),
        "/v1/responses",
        &json!({"model": "sim-model", "input": "hello", "max_output_tokens": 2}),
    )
    .await
    .json();
    assert_eq!(r["object"], "response");
    assert_eq!(
        r["output"][0]["content"][0]["text"].as_str().unwrap().len(),
        8
    );
    assert_eq!(r["usage"]["output_tokens"], 2);
    assert!(r["usage"]["input_tokens_details"]["cached_tokens"].is_u64());
    let e = post(
        &http,
        &worker.url(),
        "/v1/embeddings",
        &json!({"model": "sim-model", "input": ["a", "b"]}),
    )
    .await
    .json();
    assert_eq!(e["data"].as_array().unwrap().len(), 2);
    let again = post(
        &http,
        &worker.url(),
        "/v1/embeddings",
        &json!({"model": "sim-model", "input": ["a", "b"]}),
    )
    .await
    .json();
    assert_eq!(e["data"], again["data"], "deterministic");
    let rr = post(
        &http,
        &worker.url(),
        "/v1/rerank",
        &json!({"model": "sim-model", "query": "q", "documents": ["x", "y", "z"]}),
    )
    .await
    .json();
    assert_eq!(rr["results"].as_array().unwrap().len(), 3);
    let c = post(
        &http,
        &worker.url(),
        "/v1/classify",
        &json!({"model": "sim-model", "input": "text"}),
    )
    .await
    .json();
    assert_eq!(c["data"][0]["num_classes"], 2);
    assert_eq!(worker.requests(), 5);
}

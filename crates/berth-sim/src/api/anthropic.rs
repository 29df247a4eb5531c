//! Anthropic Messages framing (`/v1/messages`).
//!
//! `usage` has Anthropic's fields (`input_tokens` excludes cache reads, which are
//! `cache_read_input_tokens`) plus the OpenAI ones, so every response reports
//! `usage.prompt_tokens_details.cached_tokens`. Streams use named events:
//! `message_start`, `content_block_start`, `ping`, `content_block_delta`..., `content_block_stop`,
//! `message_delta`, `message_stop`; there is no `[DONE]`.

use bytes::Bytes;
use serde_json::{Value, json};

use super::framing::sim_info;
use super::generation::{Finish, Generation};
use super::respond::sse_event;

fn stop_reason(g: &Generation) -> &'static str {
    match g.finish {
        Finish::Length => "max_tokens",
        Finish::Stop => "end_turn",
    }
}

fn usage(g: &Generation, output: u32) -> Value {
    json!({
        "input_tokens": g.prompt_tokens - g.cached_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": g.cached_tokens,
        "output_tokens": output,
        "prompt_tokens": g.prompt_tokens,
        "completion_tokens": output,
        "prompt_tokens_details": {"cached_tokens": g.cached_tokens},
    })
}

pub(crate) fn whole(g: &Generation) -> Value {
    json!({
        "id": g.id,
        "type": "message",
        "role": "assistant",
        "model": g.model,
        "content": [{"type": "text", "text": g.text}],
        "stop_reason": stop_reason(g),
        "stop_sequence": null,
        "usage": usage(g, g.completion_tokens),
        "sim": sim_info(g),
    })
}

pub(crate) fn head(g: &Generation) -> Vec<Bytes> {
    vec![
        sse_event(
            "message_start",
            &json!({"type": "message_start", "message": {
                "id": g.id, "type": "message", "role": "assistant", "model": g.model,
                "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage(g, 0),
            }}),
        ),
        sse_event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        sse_event("ping", &json!({"type": "ping"})),
    ]
}

pub(crate) fn token(word: &str) -> Bytes {
    sse_event(
        "content_block_delta",
        &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": word}}),
    )
}

pub(crate) fn tail(g: &Generation) -> Vec<Bytes> {
    vec![
        sse_event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": 0}),
        ),
        sse_event(
            "message_delta",
            &json!({
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason(g), "stop_sequence": null},
                "usage": usage(g, g.completion_tokens),
                "sim": sim_info(g),
            }),
        ),
        sse_event("message_stop", &json!({"type": "message_stop"})),
    ]
}

//! OpenAI framing: chat completions, completions and (non-streamed) Responses.
//!
//! Streams follow OpenAI exactly: a first chat chunk carrying the role, one chunk per token, a
//! chunk with `finish_reason`, then — always, as if `stream_options.include_usage` were set — a
//! chunk with empty `choices` and the `usage` (cached tokens included), then `data: [DONE]`.

use bytes::Bytes;
use serde::Serialize;
use serde_json::{Value, json};

use super::framing::{SimInfo, Usage, sim_info, usage};
use super::generation::{Finish, Generation};
use super::respond::{sse_data, sse_done};

fn finish_reason(g: &Generation) -> &'static str {
    match g.finish {
        Finish::Length => "length",
        Finish::Stop => "stop",
    }
}

/// `chat.completion` and `text_completion` bodies.
#[derive(Debug, Serialize)]
pub(crate) struct Completion<'a, C> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: [C; 1],
    usage: Usage,
    sim: SimInfo<'a>,
}

#[derive(Debug, Serialize)]
pub(crate) struct ChatChoice<'a> {
    index: u32,
    message: Message<'a>,
    logprobs: Option<()>,
    finish_reason: &'static str,
}

#[derive(Debug, Serialize)]
pub(crate) struct Message<'a> {
    role: &'static str,
    content: &'a str,
}

#[derive(Debug, Serialize)]
pub(crate) struct TextChoice<'a> {
    index: u32,
    text: &'a str,
    logprobs: Option<()>,
    finish_reason: Option<&'static str>,
}

/// One streamed chunk (`chat.completion.chunk` or `text_completion`).
#[derive(Debug, Serialize)]
struct Chunk<'a, C> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: [C; 1],
}

#[derive(Debug, Serialize)]
struct DeltaChoice<'a> {
    index: u32,
    delta: Delta<'a>,
    logprobs: Option<()>,
    finish_reason: Option<&'static str>,
}

#[derive(Debug, Serialize)]
struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
}

/// The final usage chunk: empty `choices`, then `usage`.
#[derive(Debug, Serialize)]
struct UsageChunk<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: [(); 0],
    usage: Usage,
    sim: SimInfo<'a>,
}

pub(crate) fn chat_whole(g: &Generation) -> Completion<'_, ChatChoice<'_>> {
    Completion {
        id: &g.id,
        object: "chat.completion",
        created: g.created,
        model: &g.model,
        choices: [ChatChoice {
            index: 0,
            message: Message {
                role: "assistant",
                content: &g.text,
            },
            logprobs: None,
            finish_reason: finish_reason(g),
        }],
        usage: usage(g),
        sim: sim_info(g),
    }
}

fn chat_chunk(g: &Generation, delta: Delta<'_>, finish: Option<&'static str>) -> Bytes {
    sse_data(&Chunk {
        id: &g.id,
        object: "chat.completion.chunk",
        created: g.created,
        model: &g.model,
        choices: [DeltaChoice {
            index: 0,
            delta,
            logprobs: None,
            finish_reason: finish,
        }],
    })
}

pub(crate) fn chat_head(g: &Generation) -> Bytes {
    chat_chunk(
        g,
        Delta {
            role: Some("assistant"),
            content: Some(""),
        },
        None,
    )
}

pub(crate) fn chat_token(g: &Generation, word: &str) -> Bytes {
    chat_chunk(
        g,
        Delta {
            role: None,
            content: Some(word),
        },
        None,
    )
}

fn usage_chunk(g: &Generation, object: &'static str) -> Bytes {
    sse_data(&UsageChunk {
        id: &g.id,
        object,
        created: g.created,
        model: &g.model,
        choices: [],
        usage: usage(g),
        sim: sim_info(g),
    })
}

pub(crate) fn chat_tail(g: &Generation) -> Vec<Bytes> {
    vec![
        chat_chunk(
            g,
            Delta {
                role: None,
                content: None,
            },
            Some(finish_reason(g)),
        ),
        usage_chunk(g, "chat.completion.chunk"),
        sse_done(),
    ]
}

pub(crate) fn completion_whole(g: &Generation) -> Completion<'_, TextChoice<'_>> {
    Completion {
        id: &g.id,
        object: "text_completion",
        created: g.created,
        model: &g.model,
        choices: [TextChoice {
            index: 0,
            text: &g.text,
            logprobs: None,
            finish_reason: Some(finish_reason(g)),
        }],
        usage: usage(g),
        sim: sim_info(g),
    }
}

fn completion_chunk(g: &Generation, text: &str, finish: Option<&'static str>) -> Bytes {
    sse_data(&Chunk {
        id: &g.id,
        object: "text_completion",
        created: g.created,
        model: &g.model,
        choices: [TextChoice {
            index: 0,
            text,
            logprobs: None,
            finish_reason: finish,
        }],
    })
}

pub(crate) fn completion_token(g: &Generation, word: &str) -> Bytes {
    completion_chunk(g, word, None)
}

pub(crate) fn completion_tail(g: &Generation) -> Vec<Bytes> {
    vec![
        completion_chunk(g, "", Some(finish_reason(g))),
        usage_chunk(g, "text_completion"),
        sse_done(),
    ]
}

/// A Responses stream's first event, `response.created`, naming the response's id (the
/// token events that follow are completion chunks: the sim does not model Responses events
/// further).
pub(crate) fn responses_head(g: &Generation) -> Bytes {
    super::respond::sse_event(
        "response.created",
        &json!({"type": "response.created", "sequence_number": 0, "response": {
            "id": format!("resp_{}", g.id), "object": "response", "created_at": g.created,
            "status": "in_progress", "model": g.model, "output": [],
        }}),
    )
}

pub(crate) fn responses_whole(g: &Generation) -> Value {
    let completion = u64::from(g.completion_tokens);
    json!({
        "id": format!("resp_{}", g.id),
        "object": "response",
        "created_at": g.created,
        "status": if g.finish == Finish::Length { "incomplete" } else { "completed" },
        "incomplete_details": if g.finish == Finish::Length { json!({"reason": "max_output_tokens"}) } else { Value::Null },
        "model": g.model,
        "output": [{
            "type": "message",
            "id": format!("msg_{}", g.id),
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": g.text, "annotations": []}],
        }],
        "usage": {
            "input_tokens": g.prompt_tokens,
            "input_tokens_details": {"cached_tokens": g.cached_tokens},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": g.prompt_tokens + completion,
            "prompt_tokens": g.prompt_tokens,
            "completion_tokens": completion,
            "prompt_tokens_details": {"cached_tokens": g.cached_tokens},
        },
        "sim": sim_info(g),
    })
}

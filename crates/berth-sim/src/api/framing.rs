//! Dispatches a generation's framing to its API: whole JSON bodies and SSE events.

use bytes::Bytes;
use serde_json::{Value, json};

use super::generation::Generation;
use super::request::GenApi;
use super::{anthropic, openai, sglang};

/// The `sim` object added to responses: who served the request and how long it waited.
pub(crate) fn sim_info(g: &Generation) -> Value {
    json!({
        "worker_id": g.worker_id,
        "rid": g.rid,
        "cached_tokens": g.cached_tokens,
        "queue_ms": g.queue_ms,
        "prefill_ms": g.prefill_ms,
    })
}

/// OpenAI `usage` with cached-token details.
pub(crate) fn usage(g: &Generation) -> Value {
    let completion = u64::from(g.completion_tokens);
    json!({
        "prompt_tokens": g.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": g.prompt_tokens + completion,
        "prompt_tokens_details": {"cached_tokens": g.cached_tokens},
    })
}

/// The whole response body.
pub(crate) fn whole(api: GenApi, g: &Generation) -> Value {
    match api {
        GenApi::Chat => openai::chat_whole(g),
        GenApi::Completion => openai::completion_whole(g),
        GenApi::Generate => sglang::whole(g),
        GenApi::Messages => anthropic::whole(g),
        GenApi::Responses => openai::responses_whole(g),
    }
}

/// Events sent before the first token.
pub(crate) fn stream_head(api: GenApi, g: &Generation) -> Vec<Bytes> {
    match api {
        GenApi::Chat => vec![openai::chat_head(g)],
        GenApi::Messages => anthropic::head(g),
        GenApi::Completion | GenApi::Generate | GenApi::Responses => Vec::new(),
    }
}

/// The event carrying token `i`, whose text is `word` (for `/generate`, `g.text` holds the
/// cumulative text so far).
pub(crate) fn stream_token(api: GenApi, g: &Generation, i: usize, word: &str) -> Bytes {
    match api {
        GenApi::Chat => openai::chat_token(g, word),
        GenApi::Completion | GenApi::Responses => openai::completion_token(g, word),
        GenApi::Generate => sglang::token(g, i),
        GenApi::Messages => anthropic::token(word),
    }
}

/// Events sent after the last token.
pub(crate) fn stream_tail(api: GenApi, g: &Generation) -> Vec<Bytes> {
    match api {
        GenApi::Chat => openai::chat_tail(g),
        GenApi::Completion | GenApi::Responses => openai::completion_tail(g),
        GenApi::Generate => sglang::tail(g),
        GenApi::Messages => anthropic::tail(g),
    }
}

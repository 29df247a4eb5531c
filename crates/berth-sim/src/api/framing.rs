//! Dispatches a generation's framing to its API: whole JSON bodies and SSE events.

use bytes::Bytes;
use serde::Serialize;

use super::generation::Generation;
use super::request::GenApi;
use super::respond::to_bytes;
use super::{anthropic, openai, sglang};

/// The `sim` object added to responses: who served the request and how long it waited.
#[derive(Debug, Serialize)]
pub(crate) struct SimInfo<'a> {
    worker_id: &'a str,
    rid: Option<&'a str>,
    cached_tokens: u64,
    queue_ms: f64,
    prefill_ms: f64,
}

pub(crate) fn sim_info(g: &Generation) -> SimInfo<'_> {
    SimInfo {
        worker_id: &g.worker_id,
        rid: g.rid.as_deref(),
        cached_tokens: g.cached_tokens,
        queue_ms: g.queue_ms,
        prefill_ms: g.prefill_ms,
    }
}

/// OpenAI `usage` with cached-token details.
#[derive(Debug, Serialize)]
pub(crate) struct Usage {
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
    prompt_tokens_details: CachedTokens,
}

#[derive(Debug, Serialize)]
struct CachedTokens {
    cached_tokens: u64,
}

pub(crate) fn usage(g: &Generation) -> Usage {
    let completion = u64::from(g.completion_tokens);
    Usage {
        prompt_tokens: g.prompt_tokens,
        completion_tokens: completion,
        total_tokens: g.prompt_tokens + completion,
        prompt_tokens_details: CachedTokens {
            cached_tokens: g.cached_tokens,
        },
    }
}

/// The whole response body, serialized. The hot OpenAI shapes are typed structs (no map
/// building per request); the others are `json!` values.
pub(crate) fn whole(api: GenApi, g: &Generation) -> Bytes {
    match api {
        GenApi::Chat => to_bytes(&openai::chat_whole(g)),
        GenApi::Completion => to_bytes(&openai::completion_whole(g)),
        GenApi::Generate => to_bytes(&sglang::whole(g)),
        GenApi::Messages => to_bytes(&anthropic::whole(g)),
        GenApi::Responses => to_bytes(&openai::responses_whole(g)),
    }
}

/// Events sent before the first token.
pub(crate) fn stream_head(api: GenApi, g: &Generation) -> Vec<Bytes> {
    match api {
        GenApi::Chat => vec![openai::chat_head(g)],
        GenApi::Messages => anthropic::head(g),
        GenApi::Responses => vec![openai::responses_head(g)],
        GenApi::Completion | GenApi::Generate => Vec::new(),
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

//! SGLang native `/generate` framing: `text` plus `meta_info`.
//!
//! Streamed chunks carry the cumulative text so far (SGLang's default) and a `meta_info` whose
//! `finish_reason` is null until the last token; the stream ends with `data: [DONE]`.

use bytes::Bytes;
use serde_json::{Value, json};

use super::framing::sim_info;
use super::generation::{Finish, Generation};
use super::respond::{sse_data, sse_done};

fn finish_reason(g: &Generation) -> Value {
    match g.finish {
        Finish::Length => json!({"type": "length", "length": g.completion_tokens}),
        Finish::Stop => json!({"type": "stop", "matched": null}),
    }
}

fn meta_info(g: &Generation, completion: u32, finished: bool) -> Value {
    json!({
        "id": g.id,
        "finish_reason": if finished { finish_reason(g) } else { Value::Null },
        "prompt_tokens": g.prompt_tokens,
        "completion_tokens": completion,
        "cached_tokens": g.cached_tokens,
        "worker_id": g.worker_id,
        "queue_ms": g.queue_ms,
        "prefill_ms": g.prefill_ms,
    })
}

pub(crate) fn whole(g: &Generation) -> Value {
    json!({
        "text": g.text,
        "meta_info": meta_info(g, g.completion_tokens, true),
        "sim": sim_info(g),
    })
}

pub(crate) fn token(g: &Generation, i: usize) -> Bytes {
    let n = u32::try_from(i + 1).unwrap_or(u32::MAX);
    sse_data(&json!({"text": g.text, "meta_info": meta_info(g, n, n == g.completion_tokens)}))
}

pub(crate) fn tail(g: &Generation) -> Vec<Bytes> {
    if g.completion_tokens == 0 {
        // No token chunk carried the finish: send one.
        return vec![sse_data(&whole(g)), sse_done()];
    }
    vec![sse_done()]
}

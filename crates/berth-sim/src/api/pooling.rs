//! Non-generative endpoints: embeddings, rerank, classify. Deterministic numbers derived from the
//! input's hash; they cost no engine time and do not touch the KV cache, but count their tokens.

use std::sync::Arc;

use http::StatusCode;
use serde_json::{Value, json};
use xxhash_rust::xxh3::xxh3_64;

use super::respond::{self, SimResponse};
use crate::state::{Shared, unix_now};
use crate::stats::Counters;
use crate::tokenize::tokenize;

const DIMENSIONS: usize = 8;

fn texts(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .collect(),
        Some(other) => vec![other.to_string()],
        None => Vec::new(),
    }
}

fn unit(seed: u64, i: usize) -> f64 {
    let h = xxh3_64(&[seed.to_le_bytes(), (i as u64).to_le_bytes()].concat());
    (h >> 11) as f64 / (1u64 << 53) as f64
}

fn count(shared: &Shared, tokens: u64) {
    Counters::bump(&shared.counters.prompt_tokens, tokens);
    Counters::bump(&shared.counters.completed, 1);
}

fn usage(tokens: u64) -> Value {
    json!({"prompt_tokens": tokens, "total_tokens": tokens, "completion_tokens": 0,
           "prompt_tokens_details": {"cached_tokens": 0}})
}

pub(crate) fn embeddings(shared: &Arc<Shared>, model: &str, body: &Value) -> SimResponse {
    let inputs = texts(body.get("input"));
    if inputs.is_empty() {
        return respond::bad_request("missing `input`");
    }
    let mut tokens = 0;
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, text)| {
            tokens += tokenize(text).len() as u64;
            let seed = xxh3_64(text.as_bytes());
            let embedding: Vec<f64> = (0..DIMENSIONS).map(|i| unit(seed, i) * 2.0 - 1.0).collect();
            json!({"object": "embedding", "index": index, "embedding": embedding})
        })
        .collect();
    count(shared, tokens);
    respond::json(
        StatusCode::OK,
        &json!({"object": "list", "data": data, "model": model, "usage": usage(tokens),
                "sim": {"worker_id": shared.worker_id}}),
    )
}

pub(crate) fn rerank(shared: &Arc<Shared>, model: &str, body: &Value) -> SimResponse {
    let query = body
        .get("query")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let documents = texts(body.get("documents"));
    let mut tokens = tokenize(query).len() as u64;
    let mut results: Vec<Value> = documents
        .iter()
        .enumerate()
        .map(|(index, doc)| {
            tokens += tokenize(doc).len() as u64;
            let score = unit(xxh3_64(format!("{query}\u{0}{doc}").as_bytes()), 0);
            json!({"index": index, "score": score, "document": doc})
        })
        .collect();
    results.sort_by(|a, b| {
        let (a, b) = (
            a["score"].as_f64().unwrap_or(0.0),
            b["score"].as_f64().unwrap_or(0.0),
        );
        b.total_cmp(&a)
    });
    count(shared, tokens);
    respond::json(
        StatusCode::OK,
        &json!({"id": format!("rerank-{}", shared.worker_id), "model": model, "results": results,
                "usage": usage(tokens), "sim": {"worker_id": shared.worker_id}}),
    )
}

pub(crate) fn classify(shared: &Arc<Shared>, model: &str, body: &Value) -> SimResponse {
    let inputs = texts(body.get("input").or_else(|| body.get("text")));
    let mut tokens = 0;
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, text)| {
            tokens += tokenize(text).len() as u64;
            let p = unit(xxh3_64(text.as_bytes()), 0);
            let label = if p >= 0.5 { "LABEL_1" } else { "LABEL_0" };
            json!({"index": index, "label": label, "probs": [1.0 - p, p], "num_classes": 2})
        })
        .collect();
    count(shared, tokens);
    respond::json(
        StatusCode::OK,
        &json!({"id": format!("classify-{}", shared.worker_id), "object": "list", "created": unix_now(),
                "model": model, "data": data, "usage": usage(tokens), "sim": {"worker_id": shared.worker_id}}),
    )
}

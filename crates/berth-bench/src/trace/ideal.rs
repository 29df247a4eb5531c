//! The trace's ideal: the cached share one unbounded prefix cache would reach on the prompts
//! exactly as sent.
//!
//! Every request's prompt is turned into tokens the way the simulated worker does it (the chat
//! messages rendered ChatML-style, then cut after whitespace and into pieces of at most 4 bytes:
//! a mirror of `berth_sim::tokenize`, pinned to it by a test), and split into 16-token blocks
//! whose hashes chain over the whole prefix, as the sim's, vLLM's and SGLang's caches do. A
//! request's ideal cached tokens are its leading blocks already seen (at most all but its last
//! token, as engines always compute one), the prompt's blocks are added when it is sent (a
//! concurrent request can share an in-flight prefill) and the prompt with its answer when the
//! answer arrives (engines cache generated tokens too). So on a single sim worker with a cache
//! that never evicts, sent one request at a time, the measured cached ratio equals the ideal.
//!
//! Memory grows with the distinct blocks sent (a hash each, about 16 bytes in the set), which is what an unbounded cache
//! would hold; nothing else is kept per request.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};

use serde_json::{Map, Value};

use crate::workload::EndpointType;

/// Tokens per block of the ideal cache (the sim worker's KV block).
pub const IDEAL_BLOCK_TOKENS: usize = 16;

/// One token as the sim counts it: up to 4 bytes packed with their length.
pub type Token = u64;

/// Appends the sim worker's tokens of `text` to `out`.
pub fn tokenize_into(text: &str, out: &mut Vec<Token>) {
    let bytes = text.as_bytes();
    let mut start = 0;
    for (i, b) in bytes.iter().enumerate() {
        if b.is_ascii_whitespace() {
            pieces(&bytes[start..=i], out);
            start = i + 1;
        }
    }
    if start < bytes.len() {
        pieces(&bytes[start..], out);
    }
}

fn pieces(piece: &[u8], out: &mut Vec<Token>) {
    for chunk in piece.chunks(4) {
        let mut packed = [0u8; 4];
        packed[..chunk.len()].copy_from_slice(chunk);
        out.push(u64::from(u32::from_le_bytes(packed)) | ((chunk.len() as u64) << 32));
    }
}

fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.as_str().or_else(|| p.get("text").and_then(Value::as_str)))
            .collect(),
        _ => String::new(),
    }
}

/// The tokens of the prompt in `body` as the sim worker reads it for `endpoint`.
pub fn sent_tokens(endpoint: EndpointType, body: &Map<String, Value>) -> Vec<Token> {
    let mut text = String::new();
    match endpoint {
        EndpointType::Chat | EndpointType::Responses => {
            let items = if endpoint == EndpointType::Chat {
                "messages"
            } else {
                "input"
            };
            for m in body
                .get(items)
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default()
            {
                text.push_str("<|im_start|>");
                text.push_str(m.get("role").and_then(Value::as_str).unwrap_or("user"));
                text.push('\n');
                text.push_str(&content_text(m.get("content")));
                text.push_str("<|im_end|>\n");
            }
            text.push_str("<|im_start|>assistant\n");
        }
        EndpointType::Completions => {
            text.push_str(body.get("prompt").and_then(Value::as_str).unwrap_or(""));
        }
        EndpointType::Generate => {
            text.push_str(body.get("text").and_then(Value::as_str).unwrap_or(""));
        }
    }
    let mut out = Vec::with_capacity(text.len() / 4 + 1);
    tokenize_into(&text, &mut out);
    out
}

/// Chained hashes of the whole blocks of `tokens`.
fn block_hashes(tokens: &[Token]) -> impl Iterator<Item = u64> + '_ {
    let mut parent = 0u64;
    tokens.chunks_exact(IDEAL_BLOCK_TOKENS).map(move |block| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        parent.hash(&mut h);
        block.hash(&mut h);
        parent = h.finish();
        parent
    })
}

/// One unbounded prefix cache over every prompt and answer sent.
#[derive(Debug, Default)]
pub struct IdealCache {
    blocks: HashSet<u64>,
}

impl IdealCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Distinct blocks held.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Whether nothing was sent yet.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Looks `prompt` up and adds its blocks: returns the tokens an unbounded cache would
    /// have served (whole leading blocks, leaving at least one token to compute).
    pub fn send(&mut self, prompt: &[Token]) -> u64 {
        let max_blocks = prompt.len().saturating_sub(1) / IDEAL_BLOCK_TOKENS;
        let mut hit = 0usize;
        let mut missed = false;
        for (i, h) in block_hashes(prompt).enumerate() {
            let seen = !self.blocks.insert(h);
            if seen && !missed && i < max_blocks {
                hit += 1;
            } else {
                missed = true;
            }
        }
        (hit * IDEAL_BLOCK_TOKENS) as u64
    }

    /// Adds the blocks of `prompt` followed by its `answer`.
    pub fn answered(&mut self, prompt: &[Token], answer: &str) {
        let mut full = prompt.to_vec();
        tokenize_into(answer, &mut full);
        self.blocks.extend(block_hashes(&full));
    }
}

#[cfg(test)]
mod tests;

//! Counters of one worker, cheap to bump from every request (relaxed atomics).

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

/// A snapshot of a worker's counters and gauges.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SimStats {
    /// Inference requests received (every API, before faults and model checks).
    pub requests: u64,
    /// Inference requests answered successfully (streams: fully sent).
    pub completed: u64,
    /// Requests answered with an injected error.
    pub errors_injected: u64,
    /// Requests refused with 404 because the model is not served here.
    pub unknown_model: u64,
    /// Prompt tokens of admitted generation requests.
    pub prompt_tokens: u64,
    /// Prompt tokens found in the KV cache.
    pub cached_tokens: u64,
    /// Tokens generated.
    pub completion_tokens: u64,
    /// Requests running now.
    pub running: u64,
    /// Requests queued now.
    pub queued: u64,
    /// Tokens held in the KV cache now (cached blocks, evictable ones included).
    pub kv_used_tokens: u64,
    /// KV tokens running requests use now (SGLang's `num_used_tokens`: evictable cache left out).
    pub kv_in_use_tokens: u64,
    /// KV cache capacity in tokens.
    pub kv_capacity_tokens: u64,
}

/// The live counters.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) requests: AtomicU64,
    pub(crate) completed: AtomicU64,
    pub(crate) errors_injected: AtomicU64,
    pub(crate) unknown_model: AtomicU64,
    pub(crate) prompt_tokens: AtomicU64,
    pub(crate) cached_tokens: AtomicU64,
    pub(crate) completion_tokens: AtomicU64,
    /// Requests dropped on a connection made dead by the close-after-stream fault.
    pub(crate) stale_cut: AtomicU64,
}

impl Counters {
    pub(crate) fn bump(counter: &AtomicU64, by: u64) -> u64 {
        counter.fetch_add(by, Ordering::Relaxed) + by
    }

    pub(crate) fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

//! Placement policies: where a request goes when no pin decides.
//!
//! - `kind.rs`: the closed set of policy names and the `policy_uses_routing_key` predicate.
//! - `simple.rs`: `random`, `round_robin`, `power_of_two`, and the least-loaded helper.
//! - `consistent.rs`: the hash ring behind `consistent_hashing`.
//! - `prefix_index.rs`: the approximate per-model prefix tree of `cache_aware` and `ttft_aware`.
//! - `cache_aware.rs`: SMG's cache-aware rule.
//! - `ttft.rs` (and `ttft/cost.rs`): `ttft_aware`, placement by predicted time to first token.
//! - `ttft/agentic.rs` and `ttft/ledger.rs`: `agentic`, `ttft_aware` priced by what a session
//!   costs the fleet (KV working sets from the session ledger, evictions).
//!
//! A policy picks one worker from the candidates the router computed (available workers that
//! serve the request's model); it never sees unavailable workers, so it cannot return one.

pub mod cache_aware;
pub mod consistent;
pub mod feedback;
mod kind;
mod prefix_index;
pub(crate) mod simple;
pub mod ttft;

pub use cache_aware::CacheAwareConfig;
pub use feedback::{FeedbackMode, Observation, Report, Ticket, Verdict};
pub use kind::{PolicyKind, policy_uses_routing_key};
pub use prefix_index::{
    CHUNK, COARSE_CHUNK, FINE_BYTES, IndexEviction, IndexStats, PrefixHasher, PrefixHashes, Prior,
    bytes_of_chunks, chunks_in_bytes,
};
pub use ttft::ledger::LedgerStats;
pub use ttft::{CostModel, TtftConfig};

use std::borrow::Cow;
use std::cell::OnceCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::{Rng, WorkerId, WorkerSnapshot};

/// What a policy may look at.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PickRequest<'a> {
    pub(crate) key: Option<&'a [u8]>,
    pub(crate) model: Option<&'a str>,
    /// Request text (or routing-token bytes) for `cache_aware` and `ttft_aware`.
    pub(crate) text: Option<&'a [u8]>,
    /// `text`'s chunk hashes when the caller computed them already (the router does, once per
    /// request, before any lock).
    pub(crate) prefix: Option<&'a PrefixHashes>,
    /// `text` holds routing-token bytes (4 per token), not characters.
    pub(crate) tokens_hint: bool,
    /// Whether the response will be a stream, when the body was read (`ttft_aware`).
    pub(crate) stream: Option<bool>,
    /// The decision's time (`ttft_aware`'s queue estimate).
    pub(crate) now: Duration,
    /// Where the policy leaves what its index believed the chosen worker held of the prompt,
    /// just before inserting it (`--cache-feedback`; `None`: not wanted).
    pub(crate) prior: Option<&'a OnceCell<Prior>>,
    /// The body was read only because the session's previous answer fell short
    /// (`--cache-feedback on`), where the hot path would have streamed it unread: the policy
    /// predicts, decides and records as for an unread turn (no move, the queue's estimate of
    /// an unread turn, `agentic`'s session ledger keeping the session's size); only the prefix
    /// index sees the text (the prediction the answer is compared with, and the insert).
    pub(crate) feedback_read: bool,
}

impl PickRequest<'_> {
    /// The prompt's chunk hashes (computed here when the caller did not), `None` without a
    /// prompt.
    pub(crate) fn hashes(&self) -> Option<Cow<'_, PrefixHashes>> {
        match (self.prefix, self.text) {
            (Some(p), _) if !p.is_empty() => Some(Cow::Borrowed(p)),
            (None, Some(t)) if !t.is_empty() => Some(Cow::Owned(PrefixHashes::of(t))),
            _ => None,
        }
    }
}

/// A configured policy, ready to pick.
#[derive(Debug)]
pub(crate) enum Policy {
    Random,
    RoundRobin(AtomicUsize),
    PowerOfTwo,
    CacheAware(cache_aware::CacheAware),
    ConsistentHashing,
    /// `ttft_aware`, and `agentic` (the same policy with its session ledger).
    TtftAware(ttft::TtftAware),
    /// `manual` places keyed requests through its assignment mode; what reaches `pick` is a
    /// keyless request the operator allowed, placed at random.
    Manual,
}

impl Policy {
    pub(crate) fn new(kind: PolicyKind, cache: CacheAwareConfig, ttft: TtftConfig) -> Self {
        match kind {
            PolicyKind::Random => Self::Random,
            PolicyKind::RoundRobin => Self::RoundRobin(AtomicUsize::new(0)),
            PolicyKind::PowerOfTwo => Self::PowerOfTwo,
            PolicyKind::CacheAware => Self::CacheAware(cache_aware::CacheAware::new(cache)),
            PolicyKind::ConsistentHashing => Self::ConsistentHashing,
            PolicyKind::TtftAware => Self::TtftAware(ttft::TtftAware::new(ttft, cache)),
            PolicyKind::Agentic => Self::TtftAware(ttft::TtftAware::agentic(ttft, cache)),
            PolicyKind::Manual => Self::Manual,
        }
    }

    /// The `ttft_aware` policy, when that is the one configured.
    pub(crate) fn ttft(&self) -> Option<&ttft::TtftAware> {
        match self {
            Self::TtftAware(t) => Some(t),
            _ => None,
        }
    }

    /// Whether the policy keeps a prefix index (and so needs the prompt's hashes).
    pub(crate) fn uses_prefix_index(&self) -> bool {
        matches!(self, Self::CacheAware(_) | Self::TtftAware(_))
    }

    /// The policy's prefix index, for the policies that keep one.
    pub(crate) fn index(&self) -> Option<&prefix_index::SharedIndex> {
        match self {
            Self::CacheAware(ca) => Some(ca.index()),
            Self::TtftAware(t) => Some(t.index()),
            _ => None,
        }
    }

    /// What the policy's prefix index holds, for the policies that keep one.
    pub(crate) fn index_stats(&self) -> Option<IndexStats> {
        match self {
            Self::CacheAware(ca) => Some(ca.index_stats()),
            Self::TtftAware(t) => Some(t.index_stats()),
            _ => None,
        }
    }

    /// What `agentic`'s session ledger holds, under that policy.
    pub(crate) fn ledger_stats(&self) -> Option<ttft::ledger::LedgerStats> {
        self.ttft().and_then(ttft::TtftAware::ledger_stats)
    }

    /// Picks one of `cands` (never anything else); `None` only when `cands` is empty.
    pub(crate) fn pick(
        &self,
        req: &PickRequest<'_>,
        snap: &WorkerSnapshot,
        cands: &[WorkerId],
        rng: &mut Rng,
    ) -> Option<WorkerId> {
        if cands.is_empty() {
            return None;
        }
        match self {
            Self::Random | Self::Manual => Some(cands[rng.below(cands.len())]),
            Self::RoundRobin(next) => {
                let i = next.fetch_add(1, Ordering::Relaxed);
                Some(cands[i % cands.len()])
            }
            Self::PowerOfTwo => Some(simple::power_of_two(snap, cands, rng)),
            Self::CacheAware(ca) => Some(ca.pick(req, snap, cands, rng)),
            Self::TtftAware(t) => t.place(&t.evaluate(req, snap, cands), rng),
            Self::ConsistentHashing => match req.key {
                Some(key) => snap.ring().lookup(key, cands),
                None => Some(cands[rng.below(cands.len())]),
            },
        }
    }
}

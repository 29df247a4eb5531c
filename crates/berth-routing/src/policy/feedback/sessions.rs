//! What each pinned session's previous answer said, for the turns whose body is not read
//! (`ttft_aware`'s hot path): the prompt tokens its worker reported. The next turn's worker
//! should hold at least that much of it; a shortfall is counted like the index's, and the
//! session's next turn is read again so the index can be corrected from it.
//!
//! Under `--cache-feedback on` a slot also keeps the session's *anchor*: the last chunk of its
//! last read prompt that the index holds for its worker (model, depth, hash). The answers of
//! its unread turns touch that path in the index (the worker has just used it), so the index's
//! recency follows the sessions that stream unread instead of evicting them first; an answer
//! that reports less cached than the anchor covers touches the path only as deep as it
//! reported (session 8: touching the whole path kept the histories the worker had lost recent
//! in the index, which then evicted what the worker still held).
//!
//! A fixed table (no growth with clients): [`SHARDS`] x [`SLOTS`] slots, each key in one slot
//! chosen by its hash; a newer session in the same slot replaces the older one (its next turn
//! then simply has no prediction).

use std::sync::{Mutex, PoisonError};

use crate::WorkerId;

/// Lock shards.
pub const SHARDS: usize = 64;
/// Slots per shard.
pub const SLOTS: usize = 256;

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// The pin's scoped key (never 0: scoped keys have their low bit set); 0: empty.
    key: u128,
    worker: u32,
    prompt_tokens: u32,
    shortfall: bool,
    anchor: Option<Anchor>,
}

/// Where a session's last read prompt ends in the index: its model's id, the number of its
/// chunks the worker's tenant held, the hash of the last of them, and the tokens those chunks
/// stand for (by the read prompt's own bytes per token).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Anchor {
    pub(crate) model: u32,
    pub(crate) depth: u32,
    pub(crate) hash: u64,
    pub(crate) tokens: u32,
}

/// A session's previous answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Previous {
    pub(crate) worker: WorkerId,
    pub(crate) prompt_tokens: u32,
    /// The previous answer reported a shortfall.
    pub(crate) shortfall: bool,
    /// Where its last read prompt ends in the index (`None`: not known).
    pub(crate) anchor: Option<Anchor>,
}

/// The table.
#[derive(Debug)]
pub(crate) struct Sessions {
    shards: Box<[Mutex<Box<[Slot]>>]>,
}

impl Default for Sessions {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(vec![Slot::default(); SLOTS].into_boxed_slice()))
                .collect(),
        }
    }
}

impl Sessions {
    fn at(key: u128) -> (usize, usize) {
        let x = (key >> 64) as u64 ^ key as u64;
        (
            (x % SHARDS as u64) as usize,
            ((x >> 32) % SLOTS as u64) as usize,
        )
    }

    /// The previous answer of `key`, if remembered.
    pub(crate) fn get(&self, key: u128) -> Option<Previous> {
        let (sh, i) = Self::at(key);
        let shard = self.shards[sh]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let s = shard[i];
        (s.key == key && key != 0).then_some(Previous {
            worker: WorkerId(s.worker),
            prompt_tokens: s.prompt_tokens,
            shortfall: s.shortfall,
            anchor: s.anchor,
        })
    }

    /// Remembers `key`'s latest answer. `anchor`: where the answered prompt ends in the index
    /// when it was read; `None` keeps the session's anchor while it stays on `worker`.
    pub(crate) fn record(
        &self,
        key: u128,
        worker: WorkerId,
        prompt_tokens: u64,
        shortfall: bool,
        anchor: Option<Anchor>,
    ) {
        let (sh, i) = Self::at(key);
        let mut shard = self.shards[sh]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let old = shard[i];
        let kept = (old.key == key && old.worker == worker.0)
            .then_some(old.anchor)
            .flatten();
        shard[i] = Slot {
            key,
            worker: worker.0,
            prompt_tokens: u32::try_from(prompt_tokens).unwrap_or(u32::MAX),
            shortfall,
            anchor: anchor.or(kept),
        };
    }
}

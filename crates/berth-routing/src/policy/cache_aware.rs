//! `cache_aware`: SMG 1.13's rule (SPEC.md section 2, with SMG 1.13's spill gate; issue #21).
//!
//! 1. The worker holding the longest prefix of the request text is the *match* when the match
//!    rate (matched / text length) exceeds `cache_threshold` (several holders: the least loaded
//!    of them, ties at random). It takes the request unless it *spills*: its load exceeds the
//!    candidates' MEAN load by the absolute margin AND by the relative threshold
//!    (`load > mean + margin` and `load > mean x balance_rel_threshold`), where the margin is
//!    `balance_abs_threshold` capped at the in-flight count's natural swing at that mean (two
//!    standard deviations of a Poisson count, `2 sqrt(mean)`, never under 4 unless the flag is
//!    lower). A spilled request goes to the least-loaded candidate. Loads are requests in
//!    flight through this gateway.
//! 2. Otherwise the worker with the smallest tree (fewest cached characters: the most free
//!    cache), preferring an idle worker (nothing in flight) with the smallest tree.
//!
//! Before SMG 1.13 the balance rule was fleet-wide (`max_load - min_load >
//! balance_abs_threshold` AND `max_load > min_load x balance_rel_threshold`), and berth copied
//! it; with the default 64 it never trips at agentic concurrency, so a prefix every session
//! shares (a coding agent's system prompt and tools) sent every request to the one worker that
//! first held it (issue #21). The spill gate makes that herd spill after a few requests; each
//! spilled request makes its worker another holder of the shared prefix, and the least loaded
//! holder takes the next.
//!
//! Rule 2 is what spreads distinct long prompts: a prompt nobody holds goes where the least
//! is cached, so four long system prompts land on four workers instead of on whichever worker
//! happened to be least loaded when each first arrived. A request with no text (no body read
//! and no routing tokens) goes to the least-loaded worker. The chosen worker becomes a tenant
//! of the text in the model's prefix index (`prefix_index.rs`), spilled or not.

use super::PickRequest;
use super::prefix_index::{Index, IndexStats, SharedIndex};
use super::simple::{least_loaded, min_by_random_tie};
use crate::{Rng, WorkerId, WorkerSnapshot};

pub use super::prefix_index::CHUNK;

/// `cache_aware` settings (SMG's flag names and defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CacheAwareConfig {
    /// Share of the text that must match for the match to decide (`--cache-threshold`).
    pub cache_threshold: f64,
    /// Requests in flight above the candidates' mean load beyond which the matched worker
    /// spills, capped at `max(4, 2 sqrt(mean))` (`--balance-abs-threshold`).
    pub balance_abs_threshold: u32,
    /// Multiple of the candidates' mean load beyond which the matched worker spills (both
    /// conditions must hold) (`--balance-rel-threshold`).
    pub balance_rel_threshold: f64,
    /// Characters each worker may hold in a tree (`--max-tree-size`).
    pub max_tree_size: usize,
    /// Bytes of prefix index over all models and workers (`--prefix-index-budget-mb`).
    pub index_budget_bytes: usize,
}

impl Default for CacheAwareConfig {
    fn default() -> Self {
        Self {
            cache_threshold: 0.3,
            balance_abs_threshold: 64,
            balance_rel_threshold: 1.5,
            max_tree_size: 1 << 26,
            index_budget_bytes: 32 << 20,
        }
    }
}

/// The policy: one prefix index for every model.
#[derive(Debug)]
pub(crate) struct CacheAware {
    cfg: CacheAwareConfig,
    index: SharedIndex,
}

impl CacheAware {
    pub(crate) fn new(cfg: CacheAwareConfig) -> Self {
        Self {
            cfg,
            index: SharedIndex::new(cfg.index_budget_bytes, cfg.max_tree_size),
        }
    }

    pub(crate) fn index_stats(&self) -> IndexStats {
        self.index.stats()
    }

    /// SMG 1.13's spill gate: whether `matched` carries clearly more than the candidates'
    /// mean load (see the module docs).
    pub(crate) fn spills(
        &self,
        snap: &WorkerSnapshot,
        cands: &[WorkerId],
        matched: WorkerId,
    ) -> bool {
        spills(
            cands.iter().map(|w| snap.load(*w)),
            snap.load(matched),
            self.cfg.balance_abs_threshold,
            self.cfg.balance_rel_threshold,
        )
    }

    pub(crate) fn index(&self) -> &SharedIndex {
        &self.index
    }

    pub(crate) fn pick(
        &self,
        req: &PickRequest<'_>,
        snap: &WorkerSnapshot,
        cands: &[WorkerId],
        rng: &mut Rng,
    ) -> WorkerId {
        let Some(text) = req.hashes() else {
            return least_loaded(snap, cands, rng);
        };
        let mut tree = self.index.lock();
        let Some(model) = tree.model(req.model, snap) else {
            return least_loaded(snap, cands, rng);
        };
        let choice = {
            let (matched, holders) = tree.longest_match(model, &text, cands);
            let rate = matched as f64 / text.text_len() as f64;
            if rate > self.cfg.cache_threshold && !holders.is_empty() {
                let holder = least_loaded(snap, &holders, rng);
                if self.spills(snap, cands, holder) {
                    least_loaded(snap, cands, rng)
                } else {
                    holder
                }
            } else {
                let idle: Vec<WorkerId> = cands
                    .iter()
                    .copied()
                    .filter(|w| snap.load(*w) == 0)
                    .collect();
                let pool = if idle.is_empty() { cands } else { &idle };
                min_by_random_tie(pool, |w| tree_size(&tree, model, w), rng)
            }
        };
        tree.insert_with_prior(model, &text, choice, usize::MAX, req.prior);
        choice
    }
}

/// The spill gate on plain numbers: `load` against the mean of `loads` (see the module docs).
pub(crate) fn spills(loads: impl Iterator<Item = u32>, load: u32, abs: u32, rel: f64) -> bool {
    let (n, sum) = loads.fold((0u32, 0u64), |(n, s), l| (n + 1, s + u64::from(l)));
    if n == 0 {
        return false;
    }
    let mean = sum as f64 / f64::from(n);
    let margin = f64::from(abs).min((2.0 * mean.sqrt()).max(4.0));
    let load = f64::from(load);
    load > mean + margin && load > mean * rel
}

/// A tenant's cached characters as a score (saturating: trees are bounded far below 4 GiB).
fn tree_size(tree: &Index, model: u32, w: WorkerId) -> u32 {
    u32::try_from(tree.tenant_chars(model, w)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests;

//! `cache_aware`: SMG's rule, exactly as SMG documents it (SPEC.md section 2).
//!
//! 1. The fleet is *imbalanced* iff `max_load - min_load > balance_abs_threshold` AND
//!    `max_load > min_load * balance_rel_threshold` (loads are requests in flight over the
//!    candidates); then the least-loaded worker takes the request.
//! 2. Otherwise the worker holding the longest prefix of the request text takes it when the
//!    match rate (matched / text length) exceeds `cache_threshold` (several holders: the least
//!    loaded of them, ties at random).
//! 3. Otherwise the worker with the smallest tree (fewest cached characters: the most free
//!    cache), preferring an idle worker (nothing in flight) with the smallest tree.
//!
//! Rule 3 is what spreads distinct long prompts: a prompt nobody holds goes where the least
//! is cached, so four long system prompts land on four workers instead of on whichever worker
//! happened to be least loaded when each first arrived. A request with no text (no body read
//! and no routing tokens) goes to the least-loaded worker. The chosen worker becomes a tenant
//! of the text in the model's prefix index (`prefix_index.rs`), imbalanced or not.

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
    /// Load spread (max - min) beyond which the fleet may be imbalanced
    /// (`--balance-abs-threshold`).
    pub balance_abs_threshold: u32,
    /// Load ratio (max / min) beyond which the fleet may be imbalanced
    /// (`--balance-rel-threshold`).
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

    pub(crate) fn index(&self) -> &SharedIndex {
        &self.index
    }

    /// Whether the candidates' loads are imbalanced by SMG's two-condition rule.
    pub(crate) fn imbalanced(&self, snap: &WorkerSnapshot, cands: &[WorkerId]) -> bool {
        let (min, max) = cands
            .iter()
            .map(|w| snap.load(*w))
            .fold((u32::MAX, 0), |(lo, hi), l| (lo.min(l), hi.max(l)));
        let min = if min == u32::MAX { 0 } else { min };
        max.saturating_sub(min) > self.cfg.balance_abs_threshold
            && f64::from(max) > f64::from(min) * self.cfg.balance_rel_threshold
    }

    pub(crate) fn pick(
        &self,
        req: &PickRequest<'_>,
        snap: &WorkerSnapshot,
        cands: &[WorkerId],
        rng: &mut Rng,
    ) -> WorkerId {
        let imbalanced = self.imbalanced(snap, cands);
        let Some(text) = req.hashes() else {
            return least_loaded(snap, cands, rng);
        };
        let mut tree = self.index.lock();
        let Some(model) = tree.model(req.model, snap) else {
            return least_loaded(snap, cands, rng);
        };
        let choice = if imbalanced {
            least_loaded(snap, cands, rng)
        } else {
            let (matched, holders) = tree.longest_match(model, &text, cands);
            let rate = matched as f64 / text.text_len() as f64;
            if rate > self.cfg.cache_threshold && !holders.is_empty() {
                least_loaded(snap, &holders, rng)
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
        if let Some(cell) = req.prior {
            let _ = cell.set(tree.prior(model, &text, choice));
        }
        tree.insert(model, &text, choice, usize::MAX);
        choice
    }
}

/// A tenant's cached characters as a score (saturating: trees are bounded far below 4 GiB).
fn tree_size(tree: &Index, model: u32, w: WorkerId) -> u32 {
    u32::try_from(tree.tenant_chars(model, w)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests;

//! `cache_aware`: send a request where its prefix is probably cached, unless that worker is
//! overloaded.
//!
//! The "approximate prefix tree" is a chained-hash index: request text (or routing-token
//! bytes, 4 per token) is cut into [`CHUNK`]-byte pieces, each hashed together with everything before it,
//! so a chunk hash names a whole prefix. A worker is a tenant of every prefix it was sent.
//! Matching walks the chunks while some candidate holds the prefix; that is a radix-tree walk
//! without the pointer chasing, approximate to one chunk. Each tree (one per model) is bounded
//! per tenant by `max_tree_size` characters with least-recently-used eviction, kept by a
//! per-tenant queue whose stale entries are skipped lazily.
//!
//! Decision: if the longest match covers more than `cache_threshold` of the text, go to the
//! least-loaded worker holding it, else to the least-loaded worker; then, if the chosen
//! worker's load exceeds both mean x `balance_rel_threshold` and mean + `balance_abs_threshold`,
//! spill to the least-loaded worker. The chosen worker becomes a tenant of the text.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::PickRequest;
use super::simple::least_loaded;
use crate::hashing::U64Map;
use crate::{Rng, WorkerId, WorkerSnapshot};

/// Bytes per indexed chunk: the granularity of the approximation.
pub const CHUNK: usize = 32;

/// `cache_aware` settings (SMG's flag names and defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CacheAwareConfig {
    /// Share of the text that must match for the match to decide (`--cache-threshold`).
    pub cache_threshold: f64,
    /// Absolute load excess over the mean that allows spilling (`--balance-abs-threshold`).
    pub balance_abs_threshold: u32,
    /// Relative load excess over the mean that allows spilling (`--balance-rel-threshold`).
    pub balance_rel_threshold: f64,
    /// Characters each worker may hold in a tree (`--max-tree-size`).
    pub max_tree_size: usize,
}

impl Default for CacheAwareConfig {
    fn default() -> Self {
        Self {
            cache_threshold: 0.3,
            balance_abs_threshold: 64,
            balance_rel_threshold: 1.5,
            max_tree_size: 1 << 24,
        }
    }
}

type SharedIndex = Arc<Mutex<PrefixIndex>>;

/// The policy: one index per model.
#[derive(Debug)]
pub(crate) struct CacheAware {
    cfg: CacheAwareConfig,
    /// Keyed by model name ("" for requests without one).
    trees: Mutex<HashMap<Box<str>, SharedIndex>>,
}

impl CacheAware {
    pub(crate) fn new(cfg: CacheAwareConfig) -> Self {
        Self {
            cfg,
            trees: Mutex::default(),
        }
    }

    fn tree(&self, model: Option<&str>) -> SharedIndex {
        let model = model.unwrap_or("");
        let mut trees = self.trees.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(t) = trees.get(model) {
            return t.clone();
        }
        trees
            .entry(model.into())
            .or_insert_with(|| Arc::new(Mutex::new(PrefixIndex::new(self.cfg.max_tree_size))))
            .clone()
    }

    pub(crate) fn pick(
        &self,
        req: &PickRequest<'_>,
        snap: &WorkerSnapshot,
        cands: &[WorkerId],
        rng: &mut Rng,
    ) -> WorkerId {
        let Some(text) = req.text.filter(|t| !t.is_empty()) else {
            return least_loaded(snap, cands, rng);
        };
        let tree = self.tree(req.model);
        let mut tree = tree.lock().unwrap_or_else(PoisonError::into_inner);
        let (matched, holders) = tree.longest_match(text, cands);
        let share = matched as f64 / text.len() as f64;
        let mut choice = if share > self.cfg.cache_threshold && !holders.is_empty() {
            least_loaded(snap, &holders, rng)
        } else {
            least_loaded(snap, cands, rng)
        };
        let total: u64 = cands.iter().map(|w| u64::from(snap.load(*w))).sum();
        let mean = total as f64 / cands.len() as f64;
        let load = f64::from(snap.load(choice));
        if load > mean * self.cfg.balance_rel_threshold
            && load > mean + f64::from(self.cfg.balance_abs_threshold)
        {
            choice = least_loaded(snap, cands, rng);
        }
        tree.insert(text, choice);
        choice
    }
}

/// Chained-hash prefix index with per-tenant LRU bounds.
#[derive(Debug)]
pub(crate) struct PrefixIndex {
    max_per_tenant: usize,
    tick: u64,
    nodes: U64Map<Vec<(WorkerId, u64)>>,
    tenants: HashMap<WorkerId, Tenant>,
}

#[derive(Debug, Default)]
struct Tenant {
    chars: usize,
    /// (chunk hash, tick when touched); stale when the node's tick for this tenant is newer.
    lru: VecDeque<(u64, u64)>,
}

fn chunk_hashes(text: &[u8]) -> impl Iterator<Item = u64> + '_ {
    text.chunks_exact(CHUNK).scan(0u64, |prev, chunk| {
        *prev = xxh3_64_with_seed(chunk, *prev);
        Some(*prev)
    })
}

impl PrefixIndex {
    pub(crate) fn new(max_per_tenant: usize) -> Self {
        Self {
            max_per_tenant: max_per_tenant.max(CHUNK),
            tick: 0,
            nodes: U64Map::default(),
            tenants: HashMap::new(),
        }
    }

    /// Matched bytes and the candidates holding that longest prefix.
    pub(crate) fn longest_match(&self, text: &[u8], cands: &[WorkerId]) -> (usize, Vec<WorkerId>) {
        let held = |tenants: &[(WorkerId, u64)]| {
            tenants.iter().any(|(w, _)| cands.binary_search(w).is_ok())
        };
        let mut depth = 0;
        let mut deepest: &[(WorkerId, u64)] = &[];
        for h in chunk_hashes(text) {
            match self.nodes.get(&h) {
                Some(tenants) if held(tenants) => {
                    deepest = tenants;
                    depth += 1;
                }
                _ => break,
            }
        }
        let holders = deepest
            .iter()
            .map(|(w, _)| *w)
            .filter(|w| cands.binary_search(w).is_ok())
            .collect();
        (depth * CHUNK, holders)
    }

    /// Makes `worker` a tenant of every prefix of `text`, then evicts its least recently used
    /// prefixes beyond the bound. The chunks are touched deepest first, so within one text a
    /// prefix is always more recent than its extensions: eviction removes leaves before the
    /// prefixes they hang from (a kept chunk whose prefix is gone could never match).
    pub(crate) fn insert(&mut self, text: &[u8], worker: WorkerId) {
        let tenant = self.tenants.entry(worker).or_default();
        let hashes: Vec<u64> = chunk_hashes(text).collect();
        for &h in hashes.iter().rev() {
            self.tick += 1;
            let tenants = self.nodes.entry(h).or_default();
            match tenants.iter_mut().find(|(w, _)| *w == worker) {
                Some(slot) => slot.1 = self.tick,
                None => {
                    tenants.push((worker, self.tick));
                    tenant.chars += CHUNK;
                }
            }
            tenant.lru.push_back((h, self.tick));
        }
        while tenant.chars > self.max_per_tenant {
            let Some((h, tick)) = tenant.lru.pop_front() else {
                break;
            };
            let Some(tenants) = self.nodes.get_mut(&h) else {
                continue;
            };
            if let Some(pos) = tenants.iter().position(|(w, t)| *w == worker && *t == tick) {
                tenants.swap_remove(pos);
                tenant.chars -= CHUNK;
                if tenants.is_empty() {
                    self.nodes.remove(&h);
                }
            }
        }
        // Touches leave stale queue entries behind; drop them once they dominate.
        let live = tenant.chars / CHUNK;
        if tenant.lru.len() > 2 * live + 1024 {
            let nodes = &self.nodes;
            tenant.lru.retain(|(h, tick)| {
                nodes
                    .get(h)
                    .is_some_and(|ts| ts.iter().any(|(w, t)| *w == worker && t == tick))
            });
        }
    }

    /// Characters held by `worker`.
    #[cfg(test)]
    pub(crate) fn tenant_chars(&self, worker: WorkerId) -> usize {
        self.tenants.get(&worker).map_or(0, |t| t.chars)
    }
}

#[cfg(test)]
mod tests;

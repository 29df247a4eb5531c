//! The prefix index as it was before issue #18 (commit 734f8ac^), kept only as this
//! benchmark's baseline: every chunk walked on match, every chunk touched on insert.
//!
//! Request text (or routing-token bytes, 4 per token) is cut into [`CHUNK`]-byte pieces, each
//! hashed together with everything before it, so a chunk hash names a whole prefix. A worker is
//! a tenant of every prefix it was sent. Matching walks the chunks while some candidate holds
//! the prefix; that is a radix-tree walk without the pointer chasing, approximate to one chunk.
//! Each index (one per model, see [`Trees`]) is bounded per tenant by `max_tree_size`
//! characters with least-recently-used eviction, kept by a per-tenant queue whose stale entries
//! are skipped lazily. Eviction removes a text's deepest chunks first, so a kept chunk's prefix
//! is always kept too (as in a radix tree, leaves go before the nodes they hang from).

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use berth_routing::WorkerId;
use xxhash_rust::xxh3::xxh3_64_with_seed;

#[derive(Default)]
struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _: &[u8]) {
        unreachable!("u64 keys only")
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

type U64Map<V> = HashMap<u64, V, BuildHasherDefault<IdentityHasher>>;

/// Bytes per indexed chunk: the granularity of the approximation.
pub(crate) const CHUNK: usize = 32;

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
        self.insert_capped(text, worker, self.max_per_tenant);
    }

    /// [`Self::insert`] with this tenant bounded by `cap` characters (at most the index's own
    /// bound): a worker whose KV capacity is known holds no more than that.
    pub(crate) fn insert_capped(&mut self, text: &[u8], worker: WorkerId, cap: usize) {
        let cap = cap.clamp(CHUNK, self.max_per_tenant);
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
        while tenant.chars > cap {
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

    /// Heap bytes from the capacities: map buckets (key, vector header, control byte), the
    /// tenant vectors and the recency queues (what the benchmark prints; not in the original).
    pub(crate) fn heap_bytes(&self) -> usize {
        let map = self.nodes.capacity() * (8 + 24 + 1);
        let tenants: usize = self.nodes.values().map(|v| v.capacity() * 16).sum();
        let queues: usize = self.tenants.values().map(|t| t.lru.capacity() * 16).sum();
        map + tenants + queues
    }

    /// Characters held by `worker`.
    pub(crate) fn tenant_chars(&self, worker: WorkerId) -> usize {
        self.tenants.get(&worker).map_or(0, |t| t.chars)
    }
}

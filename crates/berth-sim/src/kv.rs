//! The KV prefix cache: 16-token blocks with chained hashes and least-recently-used eviction.
//!
//! A block's hash covers its own tokens and its parent's hash, so a block matches only when the
//! whole prefix before it matches (as in vLLM's and SGLang's prefix caches). The chain root is the
//! model's hash: each model served by a worker has its own cache space.
//!
//! Blocks used by a running request are pinned and never evicted; unpinned blocks sit in an LRU
//! order. When a chain is (re)inserted its deeper blocks are given *older* positions than their
//! parents, so eviction eats conversations from their tails and never strands a child whose
//! parent is gone before the child itself.

use std::collections::{BTreeMap, HashMap};

use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

use crate::tokenize::Token;

/// Tokens per KV block.
pub const BLOCK_TOKENS: usize = 16;

/// The chained hashes of every whole block of `tokens`, for `model`.
pub fn block_hashes(model: &str, tokens: &[Token]) -> Vec<u64> {
    let mut parent = xxh3_64(model.as_bytes());
    let mut buf = [0u8; BLOCK_TOKENS * 8];
    tokens
        .chunks_exact(BLOCK_TOKENS)
        .map(|block| {
            for (i, t) in block.iter().enumerate() {
                buf[i * 8..i * 8 + 8].copy_from_slice(&t.to_le_bytes());
            }
            parent = xxh3_64_with_seed(&buf, parent);
            parent
        })
        .collect()
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// LRU position while unpinned.
    tick: u64,
    pins: u32,
}

/// A bounded block cache. Not thread-safe by itself; the engine keeps it behind a mutex.
#[derive(Debug)]
pub struct KvCache {
    capacity_blocks: usize,
    entries: HashMap<u64, Entry>,
    /// Unpinned blocks by LRU position, oldest first.
    lru: BTreeMap<u64, u64>,
    next_tick: u64,
}

impl KvCache {
    /// A cache holding at most `capacity_tokens / 16` blocks.
    pub fn new(capacity_tokens: u64) -> Self {
        Self {
            capacity_blocks: usize::try_from(capacity_tokens).unwrap_or(usize::MAX) / BLOCK_TOKENS,
            entries: HashMap::new(),
            lru: BTreeMap::new(),
            next_tick: 0,
        }
    }

    /// Blocks currently held.
    pub fn used_blocks(&self) -> usize {
        self.entries.len()
    }

    /// Blocks a running request uses (pinned; the rest are evictable).
    pub fn pinned_blocks(&self) -> usize {
        self.entries.len() - self.lru.len()
    }

    /// Most blocks the cache can hold.
    pub fn capacity_blocks(&self) -> usize {
        self.capacity_blocks
    }

    /// Whether a block is cached (for tests and diagnostics).
    pub fn contains(&self, hash: u64) -> bool {
        self.entries.contains_key(&hash)
    }

    /// Length in blocks of the cached prefix of `hashes`, at most `max_blocks`; pins those blocks
    /// until [`KvCache::release`] is called with the same arguments.
    pub fn acquire(&mut self, hashes: &[u64], max_blocks: usize) -> usize {
        let mut matched = 0;
        for hash in hashes.iter().take(max_blocks) {
            let Some(entry) = self.entries.get_mut(hash) else {
                break;
            };
            if entry.pins == 0 {
                self.lru.remove(&entry.tick);
            }
            entry.pins += 1;
            matched += 1;
        }
        matched
    }

    /// Unpins the first `matched` blocks of `hashes`, which [`KvCache::acquire`] pinned.
    pub fn release(&mut self, hashes: &[u64], matched: usize) {
        let ticks = self.reserve_ticks(matched);
        // Reverse order: the deepest block gets the oldest position.
        for (hash, tick) in hashes[..matched].iter().rev().zip(ticks) {
            if let Some(entry) = self.entries.get_mut(hash) {
                entry.pins = entry.pins.saturating_sub(1);
                if entry.pins == 0 {
                    entry.tick = tick;
                    self.lru.insert(tick, *hash);
                }
            }
        }
    }

    /// Inserts (or refreshes) the chain `hashes`, evicting least recently used unpinned blocks to
    /// make room. Stops early when nothing more can be evicted.
    pub fn insert(&mut self, hashes: &[u64]) {
        let mut held = 0;
        for hash in hashes.iter().take(self.capacity_blocks) {
            if let Some(entry) = self.entries.get_mut(hash) {
                if entry.pins == 0 {
                    self.lru.remove(&entry.tick);
                }
                entry.pins += 1;
            } else {
                if self.entries.len() >= self.capacity_blocks && !self.evict_one() {
                    break;
                }
                self.entries.insert(*hash, Entry { tick: 0, pins: 1 });
            }
            held += 1;
        }
        self.release(hashes, held);
    }

    /// Drops every unpinned block (SGLang's `/flush_cache`); returns how many were dropped.
    pub fn flush(&mut self) -> usize {
        let dropped = self.lru.len();
        for (_, hash) in std::mem::take(&mut self.lru) {
            self.entries.remove(&hash);
        }
        dropped
    }

    fn evict_one(&mut self) -> bool {
        match self.lru.pop_first() {
            Some((_, hash)) => {
                self.entries.remove(&hash);
                true
            }
            None => false,
        }
    }

    fn reserve_ticks(&mut self, n: usize) -> std::ops::Range<u64> {
        let start = self.next_tick;
        self.next_tick += n as u64;
        start..self.next_tick
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(n: usize, salt: u64) -> Vec<Token> {
        (0..n as u64).map(|i| i * 7 + salt * 1_000_003).collect()
    }

    #[test]
    fn only_whole_blocks_are_hashed_and_chains_depend_on_prefix() {
        let a = toks(40, 1);
        assert_eq!(block_hashes("m", &a).len(), 2);
        let mut b = toks(40, 1);
        b[0] += 1;
        let (ha, hb) = (block_hashes("m", &a), block_hashes("m", &b));
        assert_ne!(ha[1], hb[1], "a block's hash covers its whole prefix");
        assert_ne!(
            block_hashes("other", &a)[0],
            ha[0],
            "models have separate spaces"
        );
    }

    #[test]
    fn acquire_matches_the_cached_prefix_only() {
        let mut kv = KvCache::new(1024);
        let h = block_hashes("m", &toks(64, 1));
        kv.insert(&h[..2]);
        assert_eq!(kv.acquire(&h, 4), 2);
        kv.release(&h, 2);
        assert_eq!(kv.acquire(&h, 1), 1);
        kv.release(&h, 1);
    }

    #[test]
    fn evicts_least_recently_used_tails_first() {
        let mut kv = KvCache::new(4 * BLOCK_TOKENS as u64);
        let a = block_hashes("m", &toks(32, 1));
        let b = block_hashes("m", &toks(32, 2));
        kv.insert(&a);
        kv.insert(&b);
        assert_eq!(kv.used_blocks(), 4);
        let c = block_hashes("m", &toks(16, 3));
        kv.insert(&c);
        assert_eq!(kv.used_blocks(), 4);
        assert!(kv.contains(a[0]), "parent kept");
        assert!(!kv.contains(a[1]), "tail of the oldest chain evicted first");
        assert!(kv.contains(b[0]) && kv.contains(b[1]) && kv.contains(c[0]));
    }

    #[test]
    fn pinned_blocks_are_never_evicted() {
        let mut kv = KvCache::new(2 * BLOCK_TOKENS as u64);
        let a = block_hashes("m", &toks(32, 1));
        kv.insert(&a);
        assert_eq!(kv.acquire(&a, 2), 2);
        let b = block_hashes("m", &toks(32, 2));
        kv.insert(&b);
        assert!(kv.contains(a[0]) && kv.contains(a[1]));
        assert!(!kv.contains(b[0]));
        kv.release(&a, 2);
        kv.insert(&b);
        assert!(kv.contains(b[0]) && kv.contains(b[1]));
    }

    #[test]
    fn flush_keeps_only_pinned_blocks() {
        let mut kv = KvCache::new(1024);
        let a = block_hashes("m", &toks(32, 1));
        let b = block_hashes("m", &toks(32, 2));
        kv.insert(&a);
        kv.insert(&b);
        assert_eq!(kv.acquire(&a, 2), 2);
        assert_eq!(kv.flush(), 2);
        assert!(kv.contains(a[0]) && kv.contains(a[1]) && !kv.contains(b[0]));
        kv.release(&a, 2);
        assert_eq!(kv.flush(), 2);
        assert_eq!(kv.used_blocks(), 0);
    }

    #[test]
    fn a_chain_longer_than_the_cache_keeps_its_head() {
        let mut kv = KvCache::new(2 * BLOCK_TOKENS as u64);
        let a = block_hashes("m", &toks(80, 1));
        kv.insert(&a);
        assert_eq!(kv.used_blocks(), 2);
        assert!(kv.contains(a[0]) && kv.contains(a[1]));
    }
}

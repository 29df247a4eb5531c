//! The approximate prefix index shared by `cache_aware` and `ttft_aware`.
//!
//! Request text (or routing-token bytes, 4 per token) is cut into [`CHUNK`]-byte pieces (past
//! the first [`FINE_BYTES`], [`COARSE_CHUNK`]-byte pieces: a 70k-token prompt then costs about
//! 780 index entries instead of 8,750, a fifth of the hashing, and one table write per 1 KiB of
//! new text; its match is still exact to 256 tokens, 0.4% of such a prompt), each hashed
//! together with everything before it ([`PrefixHashes`]), so a chunk hash names a whole
//! prefix. The chain starts from a per-process random secret, so clients cannot craft texts
//! whose chunks collide in the index. The hashes are computed once per request, before any
//! lock is taken; matching and insertion take them.
//!
//! - `prefix_index/index.rs`: tenants (one per model and worker), segments, matching in
//!   `O(log n)` lookups per candidate, insertion of new chunks only, eviction.
//! - `prefix_index/evict.rs`: eviction (per tenant, and least recently used across tenants
//!   under the byte budget) and the table's growth and sweeps.
//! - `prefix_index/table.rs`: the compact table, 8 bytes a slot.
//!
//! One index per policy holds every model and worker under one byte budget
//! (`--prefix-index-budget-mb`), least recently used segments evicted first across all of
//! them. Each tenant is also bounded by `max_tree_size` characters (and under `ttft_aware` by
//! its worker's KV capacity). Indexes exist only for models the fleet serves; a removed
//! worker's entries are purged when the next snapshot is seen.

mod correct;
mod evict;
mod index;
mod table;

use std::hash::BuildHasher;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use xxhash_rust::xxh3::xxh3_64_with_seed;

#[cfg(test)]
pub(crate) use correct::Correction;
pub use correct::Prior;
pub use evict::IndexEviction;
pub(crate) use index::Index;

/// Bytes per indexed chunk in a prompt's first [`FINE_BYTES`]: the granularity of the
/// approximation for short prompts.
pub const CHUNK: usize = 32;
/// Prompt bytes indexed in [`CHUNK`]-byte chunks; the rest in [`COARSE_CHUNK`]-byte chunks.
pub const FINE_BYTES: usize = 16 * 1024;
/// Bytes per indexed chunk past [`FINE_BYTES`].
pub const COARSE_CHUNK: usize = 1024;
const FINE_CHUNKS: usize = FINE_BYTES / CHUNK;

/// Bytes of prompt covered by its first `chunks` chunks.
pub fn bytes_of_chunks(chunks: usize) -> usize {
    if chunks <= FINE_CHUNKS {
        chunks * CHUNK
    } else {
        FINE_BYTES + (chunks - FINE_CHUNKS) * COARSE_CHUNK
    }
}

/// Whole chunks within a prompt's first `bytes` bytes.
pub fn chunks_in_bytes(bytes: usize) -> usize {
    if bytes <= FINE_BYTES {
        bytes / CHUNK
    } else {
        FINE_CHUNKS + (bytes - FINE_BYTES) / COARSE_CHUNK
    }
}

/// This process's secret: the seed of every chunk chain and of the pin table's slot hash.
pub(crate) fn process_secret() -> u64 {
    static SECRET: OnceLock<u64> = OnceLock::new();
    *SECRET.get_or_init(|| {
        std::collections::hash_map::RandomState::new().hash_one(0x0062_6572_7468_u64)
    })
}

/// The table key of chunk hash `h` for tenant `t` (a bijective mix, so distinct tenants'
/// chunks spread independently).
pub(super) fn key_of(h: u64, t: u32) -> u64 {
    let mut x = h ^ (u64::from(t) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 33;
    x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    x ^= x >> 33;
    x
}

/// The chained chunk hashes of one prompt and its length in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrefixHashes {
    hashes: Vec<u64>,
    len: usize,
}

impl PrefixHashes {
    /// The hashes of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        let mut h = PrefixHasher::new();
        h.write(bytes);
        h.finish()
    }

    /// One hash per whole chunk.
    pub fn chunks(&self) -> &[u64] {
        &self.hashes
    }

    /// The text's length in bytes (a trailing partial chunk counts here, not in the hashes).
    pub fn text_len(&self) -> usize {
        self.len
    }

    /// Whether the text was empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Hashes a prompt fed in pieces (e.g. each message's content as a JSON scanner finds it):
/// the result equals [`PrefixHashes::of`] the concatenation.
#[derive(Debug, Clone)]
pub struct PrefixHasher {
    buf: [u8; COARSE_CHUNK],
    fill: usize,
    prev: u64,
    out: PrefixHashes,
}

impl Default for PrefixHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl PrefixHasher {
    /// An empty prompt.
    pub fn new() -> Self {
        Self {
            buf: [0; COARSE_CHUNK],
            fill: 0,
            prev: process_secret(),
            out: PrefixHashes::default(),
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        self.prev = xxh3_64_with_seed(chunk, self.prev);
        self.out.hashes.push(self.prev);
    }

    /// Appends `bytes` to the prompt.
    pub fn write(&mut self, mut bytes: &[u8]) {
        self.out.len += bytes.len();
        while !bytes.is_empty() {
            let size = if self.out.hashes.len() < FINE_CHUNKS {
                CHUNK
            } else {
                COARSE_CHUNK
            };
            if self.fill == 0 && bytes.len() >= size {
                let (chunk, rest) = bytes.split_at(size);
                self.push(chunk);
                bytes = rest;
                continue;
            }
            let take = (size - self.fill).min(bytes.len());
            self.buf[self.fill..self.fill + take].copy_from_slice(&bytes[..take]);
            self.fill += take;
            bytes = &bytes[take..];
            if self.fill == size {
                let chunk = self.buf;
                self.push(&chunk[..size]);
                self.fill = 0;
            }
        }
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.out.len
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.out.len == 0
    }

    /// The hashes of everything written.
    pub fn finish(self) -> PrefixHashes {
        self.out
    }
}

/// What the prefix index holds (for metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexStats {
    /// Bytes of table, segments and recency queues.
    pub bytes: usize,
    /// Chunks held, over all tenants.
    pub chunks: usize,
    /// Chunks evicted since start, by [`IndexEviction`] (in `IndexEviction::ALL` order).
    pub evicted_chunks: [u64; 4],
}

/// The policy's index behind its mutex.
#[derive(Debug)]
pub(crate) struct SharedIndex(Mutex<Index>);

impl SharedIndex {
    pub(crate) fn new(budget_bytes: usize, max_tree_size: usize) -> Self {
        Self(Mutex::new(Index::new(budget_bytes, max_tree_size)))
    }

    /// Locks the index (a poisoned lock still holds a usable index: every update keeps the
    /// table consistent).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Index> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn stats(&self) -> IndexStats {
        self.lock().stats()
    }
}

#[cfg(test)]
mod tests;

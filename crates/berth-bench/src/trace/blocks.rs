//! The text of a hash id: a deterministic block of `block_size` tokens, from a shared cache.
//!
//! A block is `block_size` words of three lowercase letters and a space, drawn from the id alone,
//! so equal ids give identical bytes in every session and every run, and the trace's prefix
//! sharing reaches the workers exactly. Each such 4-byte word is exactly one token for the
//! simulated worker (it cuts text after whitespace and into pieces of at most 4 bytes, see
//! `berth_sim::tokenize`), and a block ends with a space, so blocks concatenate without
//! merging tokens: `block_size` words are `block_size` sim tokens. The words are common English
//! words that BPE tokenizers of real engines (Llama, Qwen, GPT) also encode as about one token
//! each, so a real engine sees blocks of about `block_size` tokens; only the sim's count is exact.
//!
//! A row's last block is cut to `input_length - (n - 1) * block_size` words (at least 1, at most
//! `block_size`). A row without `hash_ids` gets `input_length` tokens of unique blocks (ids
//! derived from its line number, never shared).
//!
//! The cache holds the text of recently used ids in two generations of bounded size: when the
//! current one fills, it becomes the previous one and the older is dropped, so memory stays under
//! about twice [`BlockCache::generation_bytes`] however many distinct ids the trace has.

use std::collections::HashMap;
use std::sync::Arc;

use crate::rng::Rng;

const WORDS: [&str; 64] = [
    "the ", "and ", "for ", "are ", "but ", "not ", "you ", "all ", "any ", "can ", "had ", "her ",
    "was ", "one ", "our ", "out ", "day ", "get ", "has ", "him ", "his ", "how ", "man ", "new ",
    "now ", "old ", "see ", "two ", "way ", "who ", "boy ", "did ", "its ", "let ", "put ", "say ",
    "she ", "too ", "use ", "act ", "add ", "age ", "air ", "art ", "ask ", "bad ", "bed ", "big ",
    "box ", "buy ", "car ", "cat ", "cut ", "dog ", "eat ", "end ", "far ", "few ", "fun ", "hot ",
    "job ", "key ", "map ", "red ",
];

/// Bytes of one word (one sim token).
pub const WORD_BYTES: usize = 4;

/// Salt of block ids of rows without `hash_ids` (so they never equal a trace id).
const UNIQUE_SALT: u64 = 0xB10C_0000_0000_0000;

/// The full text of block `id`: `block_size` words.
pub fn block_text(id: u64, block_size: u32) -> String {
    let mut rng = Rng::new(id ^ 0x7EC5_B10C);
    let mut out = String::with_capacity(block_size as usize * WORD_BYTES);
    for _ in 0..block_size {
        out.push_str(WORDS[(rng.next_u64() >> 58) as usize]);
    }
    out
}

/// The id of unique block `k` of the row on line `line` (rows without `hash_ids`).
pub fn unique_block_id(line: u64, k: u64) -> u64 {
    let mut rng = Rng::new(line).derive(k);
    rng.next_u64() | UNIQUE_SALT
}

/// A bounded cache of block texts, shared by every session of a run.
#[derive(Debug)]
pub struct BlockCache {
    block_size: u32,
    per_generation: usize,
    current: HashMap<u64, Arc<str>>,
    previous: HashMap<u64, Arc<str>>,
}

impl BlockCache {
    /// Bytes of text one generation holds at most.
    pub fn generation_bytes() -> usize {
        16 << 20
    }

    /// A cache of blocks of `block_size` tokens.
    pub fn new(block_size: u32) -> Self {
        let per_block = (block_size as usize * WORD_BYTES).max(1);
        Self::with_entries(block_size, (Self::generation_bytes() / per_block).max(16))
    }

    /// A cache holding at most `per_generation` entries per generation (tests).
    pub fn with_entries(block_size: u32, per_generation: usize) -> Self {
        Self {
            block_size,
            per_generation: per_generation.max(1),
            current: HashMap::new(),
            previous: HashMap::new(),
        }
    }

    /// Tokens per block.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// Entries held now (both generations).
    pub fn len(&self) -> usize {
        self.current.len() + self.previous.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Most entries it can hold.
    pub fn capacity(&self) -> usize {
        self.per_generation * 2
    }

    /// The text of block `id`.
    pub fn get(&mut self, id: u64) -> Arc<str> {
        if let Some(t) = self.current.get(&id) {
            return Arc::clone(t);
        }
        let text = self
            .previous
            .remove(&id)
            .unwrap_or_else(|| Arc::from(block_text(id, self.block_size)));
        if self.current.len() >= self.per_generation {
            self.previous = std::mem::take(&mut self.current);
        }
        self.current.insert(id, Arc::clone(&text));
        text
    }

    /// Appends a row's content to `out`: the blocks `hash_ids` (unique blocks of row `line` when
    /// empty), the last one cut so the row has its `input_length` tokens where the ids allow.
    pub fn append_row(&mut self, hash_ids: &[u64], input_length: u64, line: u64, out: &mut String) {
        let b = u64::from(self.block_size.max(1));
        let unique;
        let ids: &[u64] = if hash_ids.is_empty() {
            unique = (0..input_length.div_ceil(b))
                .map(|k| unique_block_id(line, k))
                .collect::<Vec<_>>();
            &unique
        } else {
            hash_ids
        };
        let n = ids.len() as u64;
        let last_words = input_length
            .saturating_sub((n.saturating_sub(1)) * b)
            .clamp(1, b);
        for (i, id) in ids.iter().enumerate() {
            let text = self.get(*id);
            if i as u64 + 1 == n {
                out.push_str(&text[..last_words as usize * WORD_BYTES]);
            } else {
                out.push_str(&text);
            }
        }
    }
}

/// Tokens a row contributes (as [`BlockCache::append_row`] builds it).
pub fn row_tokens(hash_ids_len: usize, input_length: u64, block_size: u32) -> u64 {
    let b = u64::from(block_size.max(1));
    if hash_ids_len == 0 {
        return input_length;
    }
    let n = hash_ids_len as u64;
    (n - 1) * b + input_length.saturating_sub((n - 1) * b).clamp(1, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_deterministic_words_of_four_bytes() {
        let a = block_text(7, 16);
        assert_eq!(a.len(), 64);
        assert_eq!(a, block_text(7, 16));
        assert_ne!(a, block_text(8, 16));
        assert!(a.split_inclusive(' ').all(|w| w.len() == WORD_BYTES));
        assert_eq!(&block_text(7, 32)[..64], a, "longer blocks extend shorter");
    }

    #[test]
    fn rows_cut_the_last_block_and_count_tokens() {
        let mut c = BlockCache::new(4);
        let mut s = String::new();
        c.append_row(&[1, 2, 3], 10, 1, &mut s);
        assert_eq!(s.len(), 10 * WORD_BYTES);
        assert_eq!(row_tokens(3, 10, 4), 10);
        assert!(s.starts_with(&block_text(1, 4)));
        // More tokens than the ids cover: whole blocks; fewer: at least one word of the last.
        assert_eq!(row_tokens(3, 100, 4), 12);
        assert_eq!(row_tokens(3, 2, 4), 9);
        let mut u = String::new();
        c.append_row(&[], 6, 9, &mut u);
        assert_eq!(u.len(), 6 * WORD_BYTES);
        let mut u2 = String::new();
        c.append_row(&[], 6, 10, &mut u2);
        assert_ne!(u, u2, "rows without ids never share");
    }

    #[test]
    fn the_cache_is_bounded() {
        let mut c = BlockCache::with_entries(8, 100);
        for id in 0..10_000 {
            assert_eq!(*c.get(id % 5_000), *block_text(id % 5_000, 8));
            assert!(c.len() <= c.capacity());
        }
        assert_eq!(c.capacity(), 200);
    }
}

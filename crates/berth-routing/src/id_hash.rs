//! A hasher for maps keyed by the gateway's own dense numbers (worker ids, per-worker request
//! counters), never by client data: one multiply instead of SipHash, the maps' default, which
//! showed in the request path's profile (about 150 instructions a lookup) for a protection
//! against chosen keys that these maps do not need.

use std::hash::{BuildHasherDefault, Hasher};

/// Fibonacci hashing of an integer id; bytes (not used by the id types) folded FNV-style.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

/// `BuildHasher` for `HashMap<Id, V, IdBuildHasher>`.
pub type IdBuildHasher = BuildHasherDefault<IdHasher>;

/// Sequential ids spread over the high bits a hash table probes with.
const FIBONACCI: u64 = 0x9E37_79B9_7F4A_7C15;

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u32(&mut self, id: u32) {
        self.0 = u64::from(id).wrapping_mul(FIBONACCI);
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(FIBONACCI);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::hash::BuildHasher;

    #[test]
    fn sequential_ids_spread_over_the_high_bits() {
        let build = IdBuildHasher::default();
        // The top 7 bits (hashbrown's control byte) of 128 sequential ids: most differ.
        let tops: HashSet<u64> = (0u64..128).map(|id| build.hash_one(id) >> 57).collect();
        assert!(tops.len() > 64, "{} distinct of 128", tops.len());
        let tops32: HashSet<u64> = (0u32..128).map(|id| build.hash_one(id) >> 57).collect();
        assert!(tops32.len() > 64, "{} distinct of 128", tops32.len());
    }

    #[test]
    fn equal_ids_hash_equal_and_others_differ() {
        let build = IdBuildHasher::default();
        assert_eq!(build.hash_one(7u64), build.hash_one(7u64));
        assert_ne!(build.hash_one(7u64), build.hash_one(8u64));
        assert_ne!(
            build.hash_one(b"ab".as_slice()),
            build.hash_one(b"ba".as_slice())
        );
    }
}

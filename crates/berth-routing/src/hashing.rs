//! Hash maps keyed by values that are already hashes.
//!
//! Prefix chunks and scoped routing keys are XXH3 outputs; hashing them again with SipHash
//! would cost more than the lookup. The identity hasher passes them through.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A hasher for keys that are uniformly distributed `u64`s already.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// A map keyed by pre-hashed `u64`s.
pub(crate) type U64Map<V> = HashMap<u64, V, BuildHasherDefault<IdentityHasher>>;

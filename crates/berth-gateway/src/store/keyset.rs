//! A bounded set of pin hashes, sharded so request threads rarely contend.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use prometheus_client::metrics::counter::Counter;

const SHARDS: usize = 16;

/// Pin hashes waiting for the store (touched or moved); at most about `cap`, the rest counted
/// in `dropped`.
#[derive(Debug)]
pub(crate) struct KeySet {
    shards: Box<[Mutex<HashSet<u128>>]>,
    shard_cap: usize,
    dropped: Counter,
}

impl KeySet {
    pub(crate) fn new(cap: usize, dropped: Counter) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            shard_cap: cap.div_ceil(SHARDS).max(1),
            dropped,
        }
    }

    /// Adds `hash`; false (and counted) when its shard is full.
    pub(crate) fn insert(&self, hash: u128) -> bool {
        let mut shard = self.shards[(hash >> 64) as usize % SHARDS]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if shard.len() >= self.shard_cap && !shard.contains(&hash) {
            drop(shard);
            self.dropped.inc();
            return false;
        }
        shard.insert(hash);
        true
    }

    /// Takes every hash out.
    pub(crate) fn drain(&self) -> Vec<u128> {
        let mut out = Vec::new();
        for s in self.shards.iter() {
            let taken = std::mem::take(&mut *s.lock().unwrap_or_else(PoisonError::into_inner));
            out.extend(taken);
        }
        out
    }

    /// Hashes held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_set_stays_within_its_bound_and_counts_what_it_drops() {
        let dropped = Counter::default();
        let set = KeySet::new(64, dropped.clone());
        for h in 0..10_000u128 {
            set.insert(h << 64 | h);
        }
        assert!(set.len() <= 64, "{}", set.len());
        assert_eq!(set.len() as u64 + dropped.get(), 10_000);
        // a hash already held is not a drop
        let held = set.drain();
        assert_eq!(held.len(), 64);
        for h in &held {
            assert!(set.insert(*h));
        }
        assert!(set.insert(held[0]));
        assert_eq!(set.len(), 64);
    }
}

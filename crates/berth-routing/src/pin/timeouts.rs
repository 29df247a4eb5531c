//! Per-pin idle periods (Dynamo's `nvext.session_control` `bind` with a `timeout`): a side map
//! from pin hash to the pin's own idle period, consulted by the sweep instead of
//! `--max-idle-secs`. The pin entry (32 bytes) has no room for it; the map is bounded (a bind
//! past the bound keeps the default period and is refused, counted by the caller) and loses an
//! entry when its pin goes (swept, dropped, or evicted at the table's bound: then the stale
//! entry is removed when the sweep next finds no pin for it, or overwritten when the key binds
//! again).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

/// The bound when `--max-sticky-keys` is 0 (otherwise the pin table's own bound).
pub(crate) const DEFAULT_CAP: usize = 1 << 18;

/// The pin hash -> idle period (seconds) map.
#[derive(Debug)]
pub(crate) struct IdleTimeouts {
    map: Mutex<HashMap<u128, u32>>,
    /// Entries, readable without the lock (the sweep skips the map when it is empty).
    len: AtomicUsize,
    cap: usize,
}

impl IdleTimeouts {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
            len: AtomicUsize::new(0),
            cap,
        }
    }

    /// Sets pin `hash`'s idle period; false (nothing changed) when the map is full.
    pub(crate) fn set(&self, hash: u128, secs: u32) -> bool {
        let mut m = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if m.len() >= self.cap && !m.contains_key(&hash) {
            return false;
        }
        m.insert(hash, secs);
        self.len.store(m.len(), Ordering::Relaxed);
        true
    }

    /// Forgets pin `hash`'s own period.
    pub(crate) fn remove(&self, hash: u128) {
        if self.len() == 0 {
            return;
        }
        let mut m = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        m.remove(&hash);
        self.len.store(m.len(), Ordering::Relaxed);
    }

    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// The map, locked (the sweep reads it for one shard at a time).
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u128, u32>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Recounts after the sweep removed entries through [`Self::lock`].
    pub(crate) fn recount(&self, m: &HashMap<u128, u32>) {
        self.len.store(m.len(), Ordering::Relaxed);
    }
}

//! One shard of the pin table: an open-addressing hash table of fixed 32-byte entries.
//!
//! A hand-rolled table instead of `HashMap` for three reasons the issue asks for: compact
//! entries (a 128-bit key hash and two worker ids, no strings: 32 bytes a slot, about 54 bytes
//! a pin at 10M pins including the free slots), random sampling of occupied slots (for
//! approximate-LRU capacity eviction) and resumable scans (for the incremental idle sweep).
//! Linear probing with backward-shift deletion keeps probe sequences short without tombstones.

/// Where keys sit: the shard and home slot of a key hash. Keyed (SipHash with this process's
/// random keys) so that clients, who can compute the unkeyed 128-bit key hashes (they are the
/// shared store's key names), cannot choose keys that pile into one shard or one probe run;
/// the raw placement (the hash's own bits) is for tests that place keys on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    Keyed,
    #[cfg(test)]
    Raw,
}

impl Placement {
    /// (bits choosing the shard, bits choosing the home slot).
    pub(crate) fn spot(self, key: u128) -> (usize, usize) {
        match self {
            Self::Keyed => {
                use std::hash::BuildHasher;
                static STATE: std::sync::OnceLock<std::collections::hash_map::RandomState> =
                    std::sync::OnceLock::new();
                /// Keys remembered per thread (a power of two).
                const RECENT: usize = 64;
                type Recent = [std::cell::Cell<Option<(u128, u64)>>; RECENT];
                thread_local! {
                    /// Recent keys placed on this thread and their hashes, by the key's low
                    /// bits (a key is already a hash, so they spread): a request's key is
                    /// placed twice in a row (its shard, then its home slot in the shard), and
                    /// again when its lease is released after its response (other requests'
                    /// keys placed in between), and is hashed once.
                    static RECENT_KEYS: Recent =
                        const { [const { std::cell::Cell::new(None) }; RECENT] };
                }
                let h = RECENT_KEYS.with(|recent| {
                    // (bit 0 of a real key is always set: the bits above it choose)
                    let slot = &recent[(key >> 1) as usize & (RECENT - 1)];
                    match slot.get() {
                        Some((k, h)) if k == key => h,
                        _ => {
                            let h = STATE.get_or_init(Default::default).hash_one(key);
                            slot.set(Some((key, h)));
                            h
                        }
                    }
                });
                ((h >> 56) as usize, h as usize)
            }
            #[cfg(test)]
            Self::Raw => ((key >> 120) as usize, key as usize >> 1),
        }
    }
}

/// "No worker" in an entry's worker slot.
pub(crate) const NONE: u32 = u32::MAX;

/// One pin: the scoped key's hash, up to two remembered workers (primary first), the key's
/// requests in flight on each, and when it was last used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    /// Scoped key hash; 0 marks an empty slot (real hashes have the low bit set).
    pub(crate) key: u128,
    pub(crate) workers: [u32; 2],
    pub(crate) in_flight: [u16; 2],
    /// Seconds since the router's epoch.
    pub(crate) last_used: u32,
}

const EMPTY: Entry = Entry {
    key: 0,
    workers: [NONE, NONE],
    in_flight: [0, 0],
    last_used: 0,
};

impl Entry {
    pub(crate) fn new(key: u128, worker: u32, now: u32) -> Self {
        Self {
            key,
            workers: [worker, NONE],
            in_flight: [0, 0],
            last_used: now,
        }
    }

    /// The slot index of `worker` among the remembered ones.
    pub(crate) fn slot_of(&self, worker: u32) -> Option<usize> {
        self.workers
            .iter()
            .position(|w| *w == worker && worker != NONE)
    }

    pub(crate) fn primary(&self) -> Option<u32> {
        (self.workers[0] != NONE).then_some(self.workers[0])
    }
}

/// An open-addressing table; capacity is a power of two, load at most 7/8.
#[derive(Debug)]
pub(crate) struct Slots {
    placement: Placement,
    slots: Vec<Entry>,
    len: usize,
    /// A key's requests still in flight on a worker its entry no longer remembers (the pin
    /// moved on, or the entry was evicted for capacity), so the in-flight threshold still sees
    /// them if the worker is remembered again, and their releases land here rather than on a
    /// newer count. Only requests in flight are kept: the map stays small and empties itself.
    pub(crate) orphans: Orphans,
    /// When `ttft_aware` last moved a key of this shard (its hysteresis).
    pub(crate) moves: Moves,
}

impl Default for Slots {
    fn default() -> Self {
        Self::with_placement(Placement::Keyed)
    }
}

impl Slots {
    pub(crate) fn with_placement(placement: Placement) -> Self {
        Self {
            placement,
            slots: vec![EMPTY; 16],
            len: 0,
            orphans: Orphans::default(),
            moves: Moves::default(),
        }
    }
}

/// When each recently moved key last moved (seconds since the router's epoch). Moves are rare,
/// so a map beside the slots costs nothing on the hot path; entries older than the interval are
/// dropped whenever the map has doubled since it was last pruned.
#[derive(Debug, Default)]
pub(crate) struct Moves {
    at: std::collections::HashMap<u128, u32>,
    pruned_len: usize,
}

impl Moves {
    /// Whether `key` moved less than `interval` seconds before `now`.
    pub(crate) fn recent(&self, key: u128, now: u32, interval: u32) -> bool {
        !self.at.is_empty()
            && self
                .at
                .get(&key)
                .is_some_and(|t| now.saturating_sub(*t) < interval)
    }

    /// `key` moved at `now`; forgets moves older than `interval`.
    pub(crate) fn record(&mut self, key: u128, now: u32, interval: u32) {
        self.at.insert(key, now);
        if self.at.len() > 64 && self.at.len() > 2 * self.pruned_len {
            self.at.retain(|_, t| now.saturating_sub(*t) < interval);
            self.pruned_len = self.at.len();
        }
    }

    /// Keys remembered (tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.at.len()
    }
}

/// In-flight counts of (scoped key, worker) pairs no entry remembers.
#[derive(Debug, Default)]
pub(crate) struct Orphans(std::collections::HashMap<(u128, u32), u16>);

impl Orphans {
    /// Keeps `n` requests of `key` in flight on `worker`.
    pub(crate) fn stash(&mut self, key: u128, worker: u32, n: u16) {
        if n > 0 && worker != NONE {
            let c = self.0.entry((key, worker)).or_default();
            *c = c.saturating_add(n);
        }
    }

    /// The requests of `key` in flight on `worker` outside its entry.
    pub(crate) fn get(&self, key: u128, worker: u32) -> u16 {
        if self.0.is_empty() {
            return 0;
        }
        self.0.get(&(key, worker)).copied().unwrap_or(0)
    }

    /// Takes them back (the worker is remembered again).
    pub(crate) fn take(&mut self, key: u128, worker: u32) -> u16 {
        if self.0.is_empty() {
            return 0;
        }
        self.0.remove(&(key, worker)).unwrap_or(0)
    }

    /// How many pairs are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// One of them ended; returns whether there was one.
    pub(crate) fn release(&mut self, key: u128, worker: u32) -> bool {
        match self.0.get_mut(&(key, worker)) {
            Some(c) => {
                *c -= 1;
                if *c == 0 {
                    self.0.remove(&(key, worker));
                }
                true
            }
            None => false,
        }
    }
}

impl Slots {
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    fn home(&self, key: u128) -> usize {
        self.placement.spot(key).1 & self.mask()
    }

    fn find(&self, key: u128) -> Option<usize> {
        let mut i = self.home(key);
        loop {
            let k = self.slots[i].key;
            if k == key {
                return Some(i);
            }
            if k == 0 {
                return None;
            }
            i = (i + 1) & self.mask();
        }
    }

    pub(crate) fn get_mut(&mut self, key: u128) -> Option<&mut Entry> {
        self.find(key).map(|i| &mut self.slots[i])
    }

    /// The entry of `key` and the shard's orphaned in-flight counts, both writable.
    pub(crate) fn get_mut_with_orphans(&mut self, key: u128) -> Option<(&mut Entry, &mut Orphans)> {
        let i = self.find(key)?;
        Some((&mut self.slots[i], &mut self.orphans))
    }

    /// Inserts an entry whose key is absent.
    pub(crate) fn insert(&mut self, entry: Entry) -> &mut Entry {
        if (self.len + 1) * 8 > self.slots.len() * 7 {
            self.grow();
        }
        let i = self.place(entry);
        self.len += 1;
        &mut self.slots[i]
    }

    fn place(&mut self, entry: Entry) -> usize {
        let mut i = self.home(entry.key);
        while self.slots[i].key != 0 {
            i = (i + 1) & self.mask();
        }
        self.slots[i] = entry;
        i
    }

    fn grow(&mut self) {
        let bigger = vec![EMPTY; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, bigger);
        for e in old.into_iter().filter(|e| e.key != 0) {
            self.place(e);
        }
    }

    /// Removes the entry at slot `i` (backward-shift deletion) and returns it.
    fn remove_at(&mut self, mut i: usize) -> Entry {
        let removed = self.slots[i];
        let mask = self.mask();
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let k = self.slots[j].key;
            if k == 0 {
                break;
            }
            let home = self.home(k);
            // Move slots[j] back to i unless its home lies cyclically in (i, j].
            let in_range = if i <= j {
                i < home && home <= j
            } else {
                i < home || home <= j
            };
            if !in_range {
                self.slots[i] = self.slots[j];
                i = j;
            }
        }
        self.slots[i] = EMPTY;
        self.len -= 1;
        removed
    }

    /// Every entry, for tests that recount.
    #[cfg(test)]
    pub(crate) fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.slots.iter().filter(|e| e.key != 0)
    }

    /// Removes the entry of `key`, if any, and returns it.
    pub(crate) fn remove(&mut self, key: u128) -> Option<Entry> {
        self.find(key).map(|i| self.remove_at(i))
    }

    /// The first occupied slot at or after `start` (cyclically), if any.
    fn occupied_from(&self, start: usize) -> Option<usize> {
        let n = self.slots.len();
        (0..n)
            .map(|d| (start + d) & self.mask())
            .find(|&i| self.slots[i].key != 0)
    }

    /// Approximate LRU: among up to `samples` randomly sampled entries, removes the least
    /// recently used, preferring entries with nothing in flight.
    pub(crate) fn evict_sampled(
        &mut self,
        samples: usize,
        mut rand: impl FnMut() -> u64,
    ) -> Option<Entry> {
        if self.len == 0 {
            return None;
        }
        let mut best: Option<(bool, u32, usize)> = None;
        for _ in 0..samples {
            let start = rand() as usize & self.mask();
            let Some(i) = self.occupied_from(start) else {
                break;
            };
            let e = &self.slots[i];
            let busy = e.in_flight != [0, 0];
            let rank = (busy, e.last_used, i);
            if best.is_none_or(|b| (rank.0, rank.1) < (b.0, b.1)) {
                best = Some(rank);
            }
        }
        let gone = self.remove_at(best?.2);
        for j in 0..2 {
            self.orphans
                .stash(gone.key, gone.workers[j], gone.in_flight[j]);
        }
        Some(gone)
    }

    /// Visits the slots in `range` (clamped to the capacity): first `prune` may edit each
    /// entry in place, then entries for which `evict` says so are removed and handed to
    /// `on_removed`. Returns where the next visit should start (`None` at the end of the table).
    /// Entries shifted back into the range by a removal are visited too.
    pub(crate) fn sweep_range(
        &mut self,
        start: usize,
        len: usize,
        mut prune: impl FnMut(&mut Entry),
        mut evict: impl FnMut(&Entry) -> bool,
        mut on_removed: impl FnMut(Entry),
    ) -> Option<usize> {
        let end = start.saturating_add(len).min(self.slots.len());
        let mut i = start;
        while i < end {
            if self.slots[i].key != 0 {
                prune(&mut self.slots[i]);
                if evict(&self.slots[i]) {
                    on_removed(self.remove_at(i));
                    // slot i now holds a shifted entry (or is empty): look at it again
                    continue;
                }
            }
            i += 1;
        }
        (end < self.slots.len()).then_some(end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn entries_are_32_bytes() {
        assert_eq!(std::mem::size_of::<Entry>(), 32);
    }

    proptest! {
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec((0u8..3, 1u128..64), 1..400)) {
            let mut t = Slots::with_placement(Placement::Raw);
            let mut m: HashMap<u128, u32> = HashMap::new();
            for (op, k) in ops {
                // force collisions: many keys share low bits
                let key = (k << 100) | 1;
                match op {
                    0 => {
                        if let std::collections::hash_map::Entry::Vacant(v) = m.entry(key) {
                            v.insert(k as u32);
                            t.insert(Entry::new(key, k as u32, 0));
                        }
                    }
                    1 => {
                        prop_assert_eq!(t.remove(key).map(|e| e.workers[0]), m.remove(&key));
                    }
                    _ => {
                        prop_assert_eq!(t.get_mut(key).map(|e| e.workers[0]), m.get(&key).copied());
                    }
                }
                prop_assert_eq!(t.len(), m.len());
            }
            for (k, v) in &m {
                prop_assert_eq!(t.get_mut(*k).map(|e| e.workers[0]), Some(*v));
            }
        }

        #[test]
        fn retain_removes_exactly_the_selected(keys in proptest::collection::hash_set(1u128..5000, 1..300)) {
            let mut t = Slots::with_placement(Placement::Raw);
            for k in &keys {
                t.insert(Entry::new((k << 1) | 1, *k as u32, (*k % 7) as u32));
            }
            let mut removed = 0;
            let mut at = Some(0);
            while let Some(start) = at {
                at = t.sweep_range(start, 7, |_| {}, |e| e.last_used < 3, |_| removed += 1);
            }
            let expect = keys.iter().filter(|k| *k % 7 < 3).count();
            prop_assert_eq!(removed, expect);
            for k in &keys {
                prop_assert_eq!(t.get_mut((k << 1) | 1).is_some(), *k % 7 >= 3);
            }
        }
    }

    #[test]
    fn sampled_eviction_prefers_old_and_idle() {
        let mut t = Slots::with_placement(Placement::Raw);
        for k in 1..=8u128 {
            let mut e = Entry::new((k << 1) | 1, 0, 100 + k as u32);
            if k == 1 {
                e.in_flight = [1, 0]; // oldest, but busy
            }
            t.insert(e);
        }
        let mut x = 0u64;
        let gone = t.evict_sampled(64, || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            x
        });
        assert_eq!(gone.map(|e| e.last_used), Some(102));
        assert_eq!(t.len(), 7);
    }
}

//! The pin table: routing key -> remembered workers, for `manual` and the override.
//!
//! - `slots.rs`: one shard, an open-addressing table of 32-byte entries.
//! - `remember.rs`: changing what one pin remembers (workers, in-flight counts).
//! - `timeouts.rs`: per-pin idle periods (a session bound with a timeout), a bounded side map
//!   the sweep consults.
//! - this file: the sharded table, its bound, in-flight release and the incremental sweep.
//!
//! 256 shards, each behind its own mutex, keep contention negligible: a decision locks one
//! shard for well under a microsecond. The idle sweep visits one shard per step, so at 10M
//! pins a step touches about 40k entries and no decision waits longer than that one step.

mod remember;
pub(crate) mod slots;
mod timeouts;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

pub(crate) use remember::{bump, forget_removed, set_workers};
use slots::{Entry, NONE, Placement, Slots};
pub(crate) use timeouts::IdleTimeouts;

use crate::worker::{WorkerId, WorkerSnapshot};

/// Number of shards (a power of two).
pub(crate) const SHARDS: usize = 256;

/// Slots one sweep step visits (128 KiB of entries).
pub(crate) const SWEEP_SLOTS: usize = 4096;

/// Why pins leave the table (the `reason` label of `smg_manual_policy_evictions_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EvictionReason {
    /// Unused for longer than `--max-idle-secs`.
    Idle,
    /// The table reached `--max-sticky-keys`; the least recently used pin went.
    Capacity,
    /// A remembered worker left the fleet.
    WorkerRemoved,
}

impl EvictionReason {
    /// Every reason, for metric initialisation.
    pub const ALL: [Self; 3] = [Self::Idle, Self::Capacity, Self::WorkerRemoved];

    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Capacity => "capacity",
            Self::WorkerRemoved => "worker_removed",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The sharded pin table.
#[derive(Debug)]
pub(crate) struct PinTable {
    placement: Placement,
    shards: Box<[Mutex<Slots>]>,
    count: AtomicUsize,
    /// Most pins; 0 = unbounded.
    max: usize,
    /// Where the idle sweep resumes: (shard, slot, that shard's capacity when the slot was
    /// recorded). A shard that grew since has rehashed its entries, so its scan restarts.
    cursor: Mutex<(usize, usize, usize)>,
    evictions: [AtomicU64; 3],
    /// Pins with their own idle period (`bind` with a timeout).
    pub(crate) timeouts: IdleTimeouts,
}

impl PinTable {
    pub(crate) fn new(max: usize) -> Self {
        Self::with_placement(max, Placement::Keyed)
    }

    pub(crate) fn with_placement(max: usize, placement: Placement) -> Self {
        Self {
            placement,
            shards: (0..SHARDS)
                .map(|_| Mutex::new(Slots::with_placement(placement)))
                .collect(),
            count: AtomicUsize::new(0),
            max,
            cursor: Mutex::new((0, 0, 0)),
            evictions: Default::default(),
            timeouts: IdleTimeouts::new(if max == 0 { timeouts::DEFAULT_CAP } else { max }),
        }
    }

    pub(crate) fn lock(&self, key: u128) -> MutexGuard<'_, Slots> {
        self.shards[self.shard_of(key)]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Bytes held by the table's slots (entries and free slots).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                s.lock().unwrap_or_else(PoisonError::into_inner).capacity() * size_of::<Entry>()
            })
            .sum()
    }

    pub(crate) fn evictions(&self, reason: EvictionReason) -> u64 {
        self.evictions[reason.index()].load(Ordering::Relaxed)
    }

    pub(crate) fn count_eviction(&self, reason: EvictionReason, n: u64) {
        if n > 0 {
            self.evictions[reason.index()].fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Inserts a new pin into the locked shard `home`, first evicting an approximately least
    /// recently used pin when the table is full: sampled from `shard`, or, when it is empty,
    /// from another shard that is not locked right now (never waiting for a lock while holding
    /// one, so no deadlock). Under heavy contention the bound can be exceeded by at most the
    /// number of decisions in progress. Returns the evicted entry.
    pub(crate) fn insert_bounded(
        &self,
        home: usize,
        shard: &mut Slots,
        entry: Entry,
        mut rand: impl FnMut() -> u64,
    ) -> Option<Entry> {
        let before = self.count.fetch_add(1, Ordering::Relaxed);
        let mut evicted = None;
        if self.max > 0 && before >= self.max {
            evicted = shard.evict_sampled(8, &mut rand);
            if evicted.is_none() {
                let start = rand() as usize;
                for d in 0..SHARDS {
                    let i = (start + d) & (SHARDS - 1);
                    if i == home {
                        continue;
                    }
                    if let Ok(mut other) = self.shards[i].try_lock() {
                        evicted = other.evict_sampled(8, &mut rand);
                        if evicted.is_some() {
                            break;
                        }
                    }
                }
            }
            if evicted.is_some() {
                self.count.fetch_sub(1, Ordering::Relaxed);
                self.count_eviction(EvictionReason::Capacity, 1);
            }
        }
        shard.insert(entry);
        evicted
    }

    /// The shard index of `key`.
    pub(crate) fn shard_of(&self, key: u128) -> usize {
        self.placement.spot(key).0 & (SHARDS - 1)
    }

    /// One request for `key` on `worker` ended.
    pub(crate) fn release(&self, key: u128, worker: WorkerId) {
        let mut shard = self.lock(key);
        if let Some(e) = shard.get_mut(key)
            && let Some(i) = e.slot_of(worker.0)
        {
            e.in_flight[i] = e.in_flight[i].saturating_sub(1);
        } else {
            shard.orphans.release(key, worker.0);
        }
    }

    /// Sweeps the next [`SWEEP_SLOTS`] slots: removes pins idle for `max_idle_secs` or more
    /// (none when 0; never a pin with requests in flight) and forgets workers that left the
    /// fleet. Returns (pins removed as idle, whether this step completed a pass over the whole
    /// table). One step holds one shard's lock for a bounded scan, so a decision never waits
    /// long for the sweep.
    pub(crate) fn sweep_step(
        &self,
        now: u32,
        max_idle_secs: u32,
        snap: &WorkerSnapshot,
    ) -> (usize, bool) {
        let mut cursor = self.cursor.lock().unwrap_or_else(PoisonError::into_inner);
        // Pins with their own idle period: the map is locked before the shard (the only order
        // either lock is taken in together).
        let own = (self.timeouts.len() > 0).then(|| self.timeouts.lock());
        let has_own = own.is_some();
        let mut swept: Vec<u128> = Vec::new();
        let (shard_ix, resume, capacity) = *cursor;
        let mut shard = self.shards[shard_ix]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Growth moved entries across the resume point: visit the shard again from its start
        // (visiting an entry twice is harmless; missing one would keep an idle pin a pass).
        let start = if shard.capacity() == capacity {
            resume
        } else {
            0
        };
        let capacity = shard.capacity();
        let mut gone = 0u64;
        let (mut idle, mut emptied) = (0usize, 0usize);
        let next = shard.sweep_range(
            start,
            SWEEP_SLOTS,
            |e| gone += forget_removed(e, snap),
            |e| {
                let limit = own
                    .as_ref()
                    .and_then(|m| m.get(&e.key).copied())
                    .unwrap_or(max_idle_secs);
                e.workers[0] == NONE
                    || (limit > 0
                        && e.in_flight == [0, 0]
                        && now.saturating_sub(e.last_used) >= limit)
            },
            |e| {
                if has_own {
                    swept.push(e.key);
                }
                match e.primary() {
                    Some(p) => {
                        if let Some(s) = snap.stats(WorkerId(p)) {
                            s.pin_removed();
                        }
                        idle += 1;
                    }
                    None => emptied += 1,
                }
            },
        );
        drop(shard);
        if let Some(mut m) = own {
            for k in &swept {
                m.remove(k);
            }
            self.timeouts.recount(&m);
        }
        let finished = match next {
            Some(slot) => {
                *cursor = (shard_ix, slot, capacity);
                false
            }
            None => {
                *cursor = ((shard_ix + 1) % SHARDS, 0, 0);
                shard_ix == SHARDS - 1
            }
        };
        drop(cursor);
        self.removed(idle + emptied);
        self.count_eviction(EvictionReason::WorkerRemoved, gone);
        self.count_eviction(EvictionReason::Idle, idle as u64);
        (idle, finished)
    }

    /// A copy of every entry, for tests that recount.
    #[cfg(test)]
    pub(crate) fn entries(&self) -> Vec<Entry> {
        self.shards
            .iter()
            .flat_map(|s| {
                let s = s.lock().unwrap_or_else(PoisonError::into_inner);
                s.entries().copied().collect::<Vec<_>>()
            })
            .collect()
    }

    /// Orphaned (key, worker) in-flight pairs across shards, for tests.
    #[cfg(test)]
    pub(crate) fn orphans(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                s.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .orphans
                    .len()
            })
            .sum()
    }

    /// The orphaned in-flight count of (`key`, `worker`), for tests.
    #[cfg(test)]
    pub(crate) fn orphaned(&self, key: u128, worker: u32) -> u16 {
        self.lock(key).orphans.get(key, worker)
    }

    /// Recomputes the pin count after removals made under a shard lock.
    pub(crate) fn removed(&self, n: usize) {
        if n > 0 {
            self.count.fetch_sub(n, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests;

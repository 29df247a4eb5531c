//! Pins decided outside this router: the hooks a shared pin store (the gateway's
//! `--sticky-store`) uses to keep several gateway replicas on the same workers.
//!
//! The core stays pure: it never talks to a store. The gateway calls [`Router::route`] as
//! always, and around it uses these methods: [`Router::pin_hash`] names a key's pin the way the
//! table does (so every replica names it alike), [`Router::pinned`] reads the local pin,
//! [`Router::install_pin`] adopts workers another replica chose, and [`Router::drop_pin`]
//! forgets a pin another replica moved (the next request then learns the new one). None of
//! them is on the sticky-hit path.

use crate::WorkerSnapshot;
use crate::decision::{Leg, secs};
use crate::options::Stickiness;
use crate::pin::set_workers;
use crate::pin::slots::{Entry, NONE};
use crate::sticky::scoped_key;
use crate::{Router, WorkerId};

impl Router {
    /// The 128-bit name of `key`'s pin for this model and leg, scoped as the table scopes it
    /// (by model under the override, not under `manual`). `None` when this router keeps no pins.
    pub fn pin_hash(
        &self,
        key: &(impl AsRef<[u8]> + ?Sized),
        model: Option<&str>,
        leg: Leg,
    ) -> Option<u128> {
        match self.cfg.stickiness {
            Stickiness::None => None,
            Stickiness::Manual => Some(scoped_key(key, None, leg)),
            // every other pin-keeping mode scopes by model (as `route_pinned` does)
            _ => Some(scoped_key(key, model, leg)),
        }
    }

    /// The workers the local pin `hash` remembers, primary first; `None` when it is not pinned
    /// here.
    pub fn pinned(&self, hash: u128) -> Option<Vec<WorkerId>> {
        let mut shard = self.pins.lock(hash);
        let e = shard.get_mut(hash)?;
        Some(
            e.workers
                .iter()
                .filter(|w| **w != NONE)
                .map(|w| WorkerId(*w))
                .collect(),
        )
    }

    /// Makes the local pin `hash` remember `workers` (primary first; at most two are kept,
    /// workers no longer in `snap` are skipped): inserts the pin, or replaces what it
    /// remembered, keeping in-flight and pinned-key counts right. Returns false (and changes
    /// nothing) when no given worker is in the fleet.
    pub fn install_pin(
        &self,
        hash: u128,
        workers: &[WorkerId],
        now: std::time::Duration,
        snap: &WorkerSnapshot,
    ) -> bool {
        let mut chosen = [NONE; 2];
        let mut n = 0;
        for w in workers {
            if n < 2 && snap.get(*w).is_some() && !chosen.contains(&w.0) {
                chosen[n] = w.0;
                n += 1;
            }
        }
        if n == 0 {
            return false;
        }
        let now_s = secs(now);
        let mut shard = self.pins.lock(hash);
        if let Some((e, orphans)) = shard.get_mut_with_orphans(hash) {
            set_workers(e, chosen, orphans, snap);
            e.last_used = now_s;
            return true;
        }
        let mut entry = Entry::new(hash, chosen[0], now_s);
        entry.workers = chosen;
        for (count, w) in entry.in_flight.iter_mut().zip(chosen) {
            *count = shard.orphans.take(hash, w);
        }
        let mut x = hash as u64;
        let evicted = self
            .pins
            .insert_bounded(self.pins.shard_of(hash), &mut shard, entry, || {
                x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
                x
            });
        if let Some(s) = evicted
            .and_then(|e| e.primary())
            .and_then(|p| snap.stats(WorkerId(p)))
        {
            s.pin_removed();
        }
        if let Some(s) = snap.stats(WorkerId(chosen[0])) {
            s.pin_added();
        }
        true
    }

    /// Forgets the local pin `hash` (another replica moved it, or an operator closed the
    /// session); its requests in flight keep counting until they end. Returns whether it was
    /// pinned here.
    pub fn drop_pin(&self, hash: u128, snap: &WorkerSnapshot) -> bool {
        let mut shard = self.pins.lock(hash);
        let Some(gone) = shard.remove(hash) else {
            return false;
        };
        for j in 0..2 {
            shard
                .orphans
                .stash(hash, gone.workers[j], gone.in_flight[j]);
        }
        drop(shard);
        self.pins.timeouts.remove(hash);
        if let Some(s) = gone.primary().and_then(|p| snap.stats(WorkerId(p))) {
            s.pin_removed();
        }
        self.pins.removed(1);
        true
    }

    /// Gives the local pin `hash` its own idle period (a session bound with a `timeout`), used
    /// by the idle sweep in place of `--max-idle-secs` until the pin goes. The side map is
    /// bounded (the pin table's `--max-sticky-keys`, 262144 when unbounded); when it is full,
    /// entries whose pin is gone are cleared first.
    pub fn set_idle_timeout(&self, hash: u128, secs: u32) -> IdleTimeoutOutcome {
        if self.pinned(hash).is_none() {
            return IdleTimeoutOutcome::NotPinned;
        }
        if self.pins.timeouts.set(hash, secs) {
            return IdleTimeoutOutcome::Set;
        }
        {
            // Full: drop entries of pins that are gone (evicted at the table's bound).
            let mut m = self.pins.timeouts.lock();
            m.retain(|h, _| self.pins.lock(*h).get_mut(*h).is_some());
            self.pins.timeouts.recount(&m);
        }
        if self.pins.timeouts.set(hash, secs) {
            IdleTimeoutOutcome::Set
        } else {
            IdleTimeoutOutcome::Full
        }
    }

    /// Pins with their own idle period.
    pub fn idle_timeouts(&self) -> usize {
        self.pins.timeouts.len()
    }
}

/// What [`Router::set_idle_timeout`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleTimeoutOutcome {
    /// The pin has its own idle period now.
    Set,
    /// No local pin under that hash: nothing set.
    NotPinned,
    /// The side map is at its bound: the pin keeps `--max-idle-secs`.
    Full,
}

#[cfg(test)]
mod tests;

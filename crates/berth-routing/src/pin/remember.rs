//! Changing what one pin remembers: its workers and their in-flight counts, keeping the
//! per-worker pinned-key counts right. Used by the pinned path, the shared-store hooks and the
//! idle sweep.

use super::slots::{Entry, NONE, Orphans};
use crate::worker::{WorkerId, WorkerSnapshot};

/// Counts one more request of the key on `w`, if `w` is remembered.
pub(crate) fn bump(e: &mut Entry, w: WorkerId) {
    if let Some(j) = e.slot_of(w.0) {
        e.in_flight[j] = e.in_flight[j].saturating_add(1);
    }
}

/// Replaces the remembered workers, keeping the per-worker pinned-key counts right. Each
/// worker's in-flight count follows it: a dropped worker's goes to `orphans`, a worker
/// remembered again takes its count back from there.
pub(crate) fn set_workers(
    e: &mut Entry,
    workers: [u32; 2],
    orphans: &mut Orphans,
    snap: &WorkerSnapshot,
) {
    let mut in_flight = [0; 2];
    for j in 0..2 {
        in_flight[j] = match e.slot_of(workers[j]) {
            Some(k) => e.in_flight[k],
            None => orphans.take(e.key, workers[j]),
        };
    }
    for k in 0..2 {
        if !workers.contains(&e.workers[k]) {
            orphans.stash(e.key, e.workers[k], e.in_flight[k]);
        }
    }
    let (old, new) = (e.workers[0], workers[0]);
    if old != new {
        if let Some(s) = (old != NONE).then(|| snap.stats(WorkerId(old))).flatten() {
            s.pin_removed();
        }
        if let Some(s) = (new != NONE).then(|| snap.stats(WorkerId(new))).flatten() {
            s.pin_added();
        }
    }
    e.workers = workers;
    e.in_flight = in_flight;
    if e.workers[0] == e.workers[1] {
        e.workers[1] = NONE;
        e.in_flight[1] = 0;
    }
}

/// Drops remembered workers that left the fleet; returns how many.
pub(crate) fn forget_removed(e: &mut Entry, snap: &WorkerSnapshot) -> u64 {
    let mut gone = 0;
    for s in 0..2 {
        if e.workers[s] != NONE && snap.get(WorkerId(e.workers[s])).is_none() {
            e.workers[s] = NONE;
            e.in_flight[s] = 0;
            gone += 1;
        }
    }
    if e.workers[0] == NONE && e.workers[1] != NONE {
        e.workers.swap(0, 1);
        e.in_flight.swap(0, 1);
        if let Some(s) = snap.stats(WorkerId(e.workers[0])) {
            s.pin_added();
        }
    }
    gone
}

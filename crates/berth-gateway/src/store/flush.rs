//! The batched refresh, every `--sticky-store-sync-ms` while the store answers.
//!
//! 1. Pins moved while the store was down (dirty) are written back, overwriting, and announced:
//!    this replica saw those workers fail, so its choice is the newer one.
//! 2. Pins used since the last refresh (touched) go through place-or-get in one pipeline: an
//!    existing store pin has its TTL refreshed (the lazy TTL refresh: one command per used pin
//!    per period, not per request), a missing one (placed while the store was down, expired, or
//!    lost when Redis restarted) is written back, and one that differs from the local pin is
//!    adopted (another replica stored it first, or an invalidation was missed while the
//!    subscription was down): so replicas converge within one period.
//!
//! If the store fails mid-way, what was not written goes back into the sets for next time.

use std::sync::Arc;

use super::metrics::op;
use super::names;
use super::sync::{PinHost, Store};

/// Pipelined commands per round trip.
const BATCH: usize = 512;

/// Runs the refresh forever (spawned at start).
pub(crate) async fn run<S: PinHost>(store: Arc<Store>, state: Arc<S>) {
    let mut tick = tokio::time::interval(store.sync_every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = store.resync.notified() => {}
        }
        flush(&store, &*state).await;
    }
}

/// Writes the pins moved on the request path as they come (spawned at start): one task for
/// every move, each wake-up writing what queued meanwhile in batches.
pub(crate) async fn run_mover<S: PinHost>(store: Arc<Store>, state: Arc<S>) {
    loop {
        store.wake_mover.notified().await;
        if store.link.is_up() {
            write_dirty(&store, &*state, op::MOVE).await;
        }
    }
}

/// Writes every queued move; false when the store failed (what was not written is queued
/// again).
async fn write_dirty<S: PinHost>(store: &Store, state: &S, op: &'static str) -> bool {
    let dirty = store.dirty.drain();
    for (i, chunk) in dirty.chunks(BATCH).enumerate() {
        if !write_back(store, state, chunk, op).await {
            // what was not written goes back for the next refresh
            dirty[i * BATCH..].iter().for_each(|h| {
                store.dirty.insert(*h);
            });
            return false;
        }
    }
    true
}

/// One refresh; returns false when the store failed (or is down).
pub(crate) async fn flush<S: PinHost>(store: &Store, state: &S) -> bool {
    if !store.link.is_up() {
        return false;
    }
    if !write_dirty(store, state, op::SYNC).await {
        return false;
    }
    let touched = store.touched.drain();
    for (i, chunk) in touched.chunks(BATCH).enumerate() {
        if !refresh(store, state, chunk).await {
            touched[i * BATCH..].iter().for_each(|h| {
                store.touched.insert(*h);
            });
            return false;
        }
    }
    true
}

/// How long one batch may take: the request-path bound, plus a little per command.
fn bound(store: &Store, n: usize) -> std::time::Duration {
    store.link.timeout + std::time::Duration::from_micros(20 * n as u64)
}

async fn write_back<S: PinHost>(
    store: &Store,
    state: &S,
    hashes: &[u128],
    op: &'static str,
) -> bool {
    let view = state.view();
    let mut pipe = redis::pipe();
    pipe.load_script(&store.moved).ignore();
    let mut n = 0;
    for &h in hashes {
        let Some(value) = Store::local_value(state, &view, h) else {
            continue;
        };
        pipe.invoke_script(
            store
                .moved
                .key(store.names.key(h))
                .arg(value)
                .arg(store.ttl_ms)
                .arg(&store.names.channel)
                .arg(names::message(&store.replica, h)),
        );
        n += 1;
    }
    if n == 0 {
        return true;
    }
    let done = store
        .link
        .call_within(op, bound(store, n), |mut c| async move {
            pipe.query_async::<Vec<i64>>(&mut c).await
        })
        .await;
    match done {
        Some(changed) => {
            let moved = changed.iter().filter(|c| **c == 1).count();
            store.metrics().moves.inc_by(moved as u64);
            true
        }
        None => false,
    }
}

async fn refresh<S: PinHost>(store: &Store, state: &S, hashes: &[u128]) -> bool {
    let view = state.view();
    let mut pipe = redis::pipe();
    pipe.load_script(&store.place).ignore();
    let mut sent = Vec::with_capacity(hashes.len());
    for &h in hashes {
        let Some(value) = Store::local_value(state, &view, h) else {
            continue;
        };
        pipe.invoke_script(
            store
                .place
                .key(store.names.key(h))
                .arg(&value)
                .arg(store.ttl_ms),
        );
        sent.push((h, value));
    }
    if sent.is_empty() {
        return true;
    }
    let done = store
        .link
        .call_within(op::SYNC, bound(store, sent.len()), |mut c| async move {
            pipe.query_async::<Vec<Option<String>>>(&mut c).await
        })
        .await;
    let Some(stored) = done else { return false };
    for ((h, ours), theirs) in sent.iter().zip(stored) {
        if let Some(theirs) = theirs
            && theirs != *ours
            && Store::adopt(state, &view, *h, &theirs)
        {
            store.metrics().adopted.inc();
        }
    }
    true
}

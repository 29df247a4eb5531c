//! Workers as the core sees them: dense ids in an immutable snapshot.
//!
//! The gateway owns membership, health and breakers; whenever any of them changes it builds a
//! new [`WorkerSnapshot`] and swaps it in atomically, so a routing decision reads one
//! consistent view without taking a lock. What changes per request (in-flight counts, pinned
//! keys) lives in [`WorkerStats`], shared by `Arc` across snapshots.
//!
//! A snapshot precomputes, per model, the ids of the workers that serve it and are available,
//! and the consistent-hash ring, so a decision never filters the fleet.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Source of snapshot generations (process-wide, so two snapshots never share one).
static GENERATION: AtomicU64 = AtomicU64::new(1);

use index::SlotIndex;
pub use load::{
    DEFAULT_OVERLOAD_TOKEN_USAGE, DEFAULT_OVERLOAD_WAITING_REQUESTS, OverloadConfig, Screen,
    WorkerLoad, WorkerLoads,
};
pub(crate) use ring::Ring;

mod index;
mod load;
mod ring;

/// A worker's dense id. Ids are never reused while the gateway runs, so a pin that names a
/// removed worker can never silently point at a newcomer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkerId(pub u32);

/// State a policy keeps per worker (`ttft_aware`'s prefill queue and learned speed), opaque
/// here: the worker layer knows no policy. Created by the policy on first use.
#[derive(Default)]
pub(crate) struct PolicySlot(std::sync::OnceLock<Arc<dyn std::any::Any + Send + Sync>>);

impl PolicySlot {
    /// The policy's state of type `T`, created by `init` on first use; `None` if the slot holds
    /// another type (a worker shared by two policies, which the gateway never does).
    pub(crate) fn get_or_init<T: Send + Sync + 'static>(
        &self,
        init: impl FnOnce() -> T,
    ) -> Option<Arc<T>> {
        self.0
            .get_or_init(|| Arc::new(init()))
            .clone()
            .downcast::<T>()
            .ok()
    }
}

impl std::fmt::Debug for PolicySlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "PolicySlot(set)"
        } else {
            "PolicySlot(empty)"
        })
    }
}

/// Live per-worker counters, shared between snapshots.
#[derive(Debug, Default)]
pub struct WorkerStats {
    in_flight: AtomicU32,
    /// Of those, the requests whose answer has not yet sent its first byte (counted only while
    /// worker loads are polled: overload protection's queue, `worker/load.rs`).
    awaiting: AtomicU32,
    pinned_keys: AtomicU32,
    /// The placement policy's own state for this worker (`ttft_aware`'s).
    pub(crate) policy: PolicySlot,
    /// The worker's KV cache capacity in tokens, when it said (0: unknown).
    kv_capacity_tokens: std::sync::atomic::AtomicU64,
    /// What the worker effectively keeps, learned from its reported cached tokens
    /// (`policy/feedback.rs`; 0: nothing learned).
    learned_kv_tokens: std::sync::atomic::AtomicU64,
}

impl WorkerStats {
    /// Requests this gateway has in flight on the worker.
    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Routing keys whose primary is this worker (`smg_worker_routing_keys_active`).
    pub fn pinned_keys(&self) -> u32 {
        self.pinned_keys.load(Ordering::Relaxed)
    }

    /// Records the worker's KV cache capacity in tokens (SGLang's `max_total_num_tokens`):
    /// `ttft_aware` then bounds what its prefix index believes the worker holds to that, so a
    /// prompt the worker must have evicted stops counting as cached there.
    pub fn set_kv_capacity_tokens(&self, tokens: u64) {
        self.kv_capacity_tokens.store(tokens, Ordering::Relaxed);
    }

    /// The worker's KV cache capacity in tokens, if known.
    pub fn kv_capacity_tokens(&self) -> Option<u64> {
        Some(self.kv_capacity_tokens.load(Ordering::Relaxed)).filter(|t| *t > 0)
    }

    /// The effective KV capacity learned from reported cached tokens, if any.
    pub fn learned_kv_tokens(&self) -> Option<u64> {
        Some(self.learned_kv_tokens.load(Ordering::Relaxed)).filter(|t| *t > 0)
    }

    pub(crate) fn set_learned_kv_tokens(&self, tokens: u64) {
        self.learned_kv_tokens.store(tokens, Ordering::Relaxed);
    }

    /// The KV capacity routing assumes: the reported capacity, else the learned estimate (a
    /// worker that reports its capacity is bounded by it: learned from answers, the estimate is
    /// biased low while `ttft_aware`'s pinned turns stream unread, see `policy/feedback.rs`).
    pub fn effective_kv_tokens(&self) -> Option<u64> {
        self.kv_capacity_tokens()
            .or_else(|| self.learned_kv_tokens())
    }

    /// Requests this gateway has in flight on the worker whose answer has not yet sent its
    /// first byte (waiting or in prefill on the worker; counted while worker loads are polled).
    pub fn awaiting_first_byte(&self) -> u32 {
        self.awaiting.load(Ordering::Relaxed)
    }

    pub(crate) fn begin(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn await_first_byte(&self) {
        self.awaiting.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn first_byte_seen(&self) {
        decrement(&self.awaiting);
    }

    pub(crate) fn end(&self) {
        decrement(&self.in_flight);
    }

    pub(crate) fn pin_added(&self) {
        self.pinned_keys.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn pin_removed(&self) {
        decrement(&self.pinned_keys);
    }
}

/// One less, never below zero (the counters' one decrement).
fn decrement(count: &AtomicU32) {
    let _ = count.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_sub(1));
}

/// One worker in a snapshot.
#[derive(Debug, Clone)]
pub struct WorkerEntry {
    /// Its dense id.
    pub id: WorkerId,
    /// Its URL as registered (with `@<rank>` for data-parallel workers); this is what
    /// `x-smg-routed-worker-id` carries and what consistent hashing hashes.
    pub url: Arc<str>,
    /// The models it serves.
    pub models: Vec<Arc<str>>,
    /// Healthy, breaker not open and not vetoed by overload protection.
    pub available: bool,
    /// Its live counters.
    pub stats: Arc<WorkerStats>,
}

/// An immutable view of the fleet.
#[derive(Debug, Default)]
pub struct WorkerSnapshot {
    /// Entries in registration order; `slot` finds an id's position (sized by the number of
    /// workers, never by the largest id: `worker/index.rs`).
    entries: Vec<WorkerEntry>,
    slot: SlotIndex,
    /// Available workers per model, sorted by model: a binary search over the fleet's few
    /// names costs a few comparisons where a hash map's lookup hashed the name (SipHash) on
    /// every request.
    by_model: Vec<(Arc<str>, Vec<WorkerId>)>,
    /// Every available worker.
    all_available: Vec<WorkerId>,
    /// Consistent-hash ring over every worker (available or not), by URL.
    ring: Ring,
    /// Distinct per snapshot built (0 for the default, empty one): state derived from the
    /// fleet (the prefix index's tenants) is re-checked when it changes.
    generation: u64,
}

impl WorkerSnapshot {
    /// Builds a snapshot (and its per-model candidate lists and hash ring).
    pub fn new(entries: Vec<WorkerEntry>) -> Self {
        let slot = SlotIndex::new(entries.iter().map(|e| e.id));
        let mut by_model: BTreeMap<Arc<str>, Vec<WorkerId>> = BTreeMap::new();
        let mut all_available = Vec::new();
        for e in &entries {
            for m in &e.models {
                let list = by_model.entry(m.clone()).or_default();
                if e.available {
                    list.push(e.id);
                }
            }
            if e.available {
                all_available.push(e.id);
            }
        }
        // Sorted by id, so policies can test membership with a binary search.
        for list in by_model.values_mut() {
            list.sort_unstable();
        }
        let by_model: Vec<_> = by_model.into_iter().collect();
        all_available.sort_unstable();
        let ring = Ring::build(entries.iter().map(|e| (e.id, &*e.url)));
        Self {
            entries,
            slot,
            by_model,
            all_available,
            ring,
            generation: GENERATION.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// This snapshot's generation (distinct for every snapshot built with [`Self::new`]).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Every worker, in registration order.
    pub fn entries(&self) -> &[WorkerEntry] {
        &self.entries
    }

    /// The entry of `id`, if it is still in the fleet.
    pub fn get(&self, id: WorkerId) -> Option<&WorkerEntry> {
        self.position(id).map(|i| &self.entries[i])
    }

    /// The position of `id` in [`Self::entries`] (registration order), so a caller that keeps
    /// its own per-worker handles in the same order can find them without searching.
    pub fn position(&self, id: WorkerId) -> Option<usize> {
        self.slot.get(id)
    }

    /// Heap bytes of the id index (proportional to the number of workers, whatever their ids).
    pub fn index_bytes(&self) -> usize {
        self.slot.heap_bytes()
    }

    /// Whether any worker (available or not) serves `model`.
    pub fn serves_model(&self, model: &str) -> bool {
        self.model_workers(model).is_some()
    }

    /// The workers of `model` (available ones), if any worker serves it.
    fn model_workers(&self, model: &str) -> Option<&[WorkerId]> {
        let i = self
            .by_model
            .binary_search_by(|(m, _)| (**m).cmp(model))
            .ok()?;
        self.by_model.get(i).map(|(_, list)| list.as_slice())
    }

    /// The one model of the fleet, when every worker serves the same single model.
    pub fn only_model(&self) -> Option<&Arc<str>> {
        match self.by_model.as_slice() {
            [(m, _)] => Some(m),
            _ => None,
        }
    }

    /// How many distinct models the fleet serves.
    pub fn model_count(&self) -> usize {
        self.by_model.len()
    }

    /// The available workers for `model`, sorted by id (every available worker when `None`,
    /// or when no worker declares any model).
    pub fn candidates(&self, model: Option<&str>) -> &[WorkerId] {
        match model {
            Some(m) if !self.by_model.is_empty() => self.model_workers(m).unwrap_or(&[]),
            _ => &self.all_available,
        }
    }

    /// The stats of `id`, if it is still in the fleet.
    pub fn stats(&self, id: WorkerId) -> Option<&Arc<WorkerStats>> {
        self.get(id).map(|e| &e.stats)
    }

    /// Requests in flight on `id` (0 for a removed worker).
    pub fn load(&self, id: WorkerId) -> u32 {
        self.get(id).map_or(0, |e| e.stats.in_flight())
    }

    /// Requests in flight on `id` and, of those, the ones still awaiting their answer's first
    /// byte ((0, 0) for a removed worker): what overload protection reads
    /// (`OverloadConfig::screen`).
    pub fn flight(&self, id: WorkerId) -> (u32, u32) {
        self.get(id).map_or((0, 0), |e| {
            (e.stats.in_flight(), e.stats.awaiting_first_byte())
        })
    }

    pub(crate) fn ring(&self) -> &Ring {
        &self.ring
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn entry(id: u32, models: &[&str], available: bool) -> WorkerEntry {
        WorkerEntry {
            id: WorkerId(id),
            url: format!("http://w{id}:8000").into(),
            models: models.iter().map(|m| Arc::from(*m)).collect(),
            available,
            stats: Arc::default(),
        }
    }

    #[test]
    fn candidates_filter_by_model_and_availability() {
        let s = WorkerSnapshot::new(vec![
            entry(0, &["a"], true),
            entry(1, &["a", "b"], false),
            entry(2, &["b"], true),
        ]);
        assert_eq!(s.candidates(Some("a")), [WorkerId(0)]);
        assert_eq!(s.candidates(Some("b")), [WorkerId(2)]);
        assert_eq!(s.candidates(Some("c")), [] as [WorkerId; 0]);
        assert_eq!(s.candidates(None), [WorkerId(0), WorkerId(2)]);
        assert!(s.serves_model("b"));
        assert!(!s.serves_model("c"));
        assert_eq!(s.only_model(), None);
        let one = WorkerSnapshot::new(vec![entry(0, &["m"], true), entry(1, &["m"], true)]);
        assert_eq!(one.only_model().map(|m| &**m), Some("m"));
    }

    #[test]
    fn the_id_index_is_sized_by_the_fleet_not_by_the_largest_id() {
        // PD's prefill pool: ids from 1 << 24.
        let base = 1 << 24;
        let s = WorkerSnapshot::new(vec![
            entry(base, &["m"], true),
            entry(base + 1, &["m"], true),
        ]);
        assert!(s.index_bytes() <= 1024, "{} bytes", s.index_bytes());
        assert_eq!(s.position(WorkerId(base + 1)), Some(1));
        assert_eq!(s.get(WorkerId(base)).map(|e| e.id), Some(WorkerId(base)));
        assert_eq!(s.position(WorkerId(0)), None);
        assert_eq!(s.position(WorkerId(base + 2)), None);
        // Spread ids (one long-lived worker beside many removed ones): still small, still found.
        let spread = WorkerSnapshot::new(vec![
            entry(3, &["m"], true),
            entry(5_000_000, &["m"], true),
            entry(9, &["m"], false),
        ]);
        assert!(
            spread.index_bytes() <= 1024,
            "{} bytes",
            spread.index_bytes()
        );
        for (pos, id) in [(0, 3), (1, 5_000_000), (2, 9)] {
            assert_eq!(spread.position(WorkerId(id)), Some(pos));
        }
        assert_eq!(spread.position(WorkerId(4)), None);
        assert_eq!(WorkerSnapshot::default().position(WorkerId(0)), None);
    }

    #[test]
    fn counters_never_underflow() {
        let s = WorkerStats::default();
        s.end();
        s.pin_removed();
        assert_eq!((s.in_flight(), s.pinned_keys()), (0, 0));
        s.begin();
        s.pin_added();
        assert_eq!((s.in_flight(), s.pinned_keys()), (1, 1));
    }
}

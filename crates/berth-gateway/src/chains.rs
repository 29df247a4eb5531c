//! Responses chains: which session key each response id belongs to.
//!
//! A Responses turn names the turn it continues by `previous_response_id`; the worker that
//! produced that response holds the conversation's context. The proxy records the id of every
//! Responses answer it passes back (`proxy/chain.rs` finds it in the first bytes, without
//! holding any) under the request's routing key, and a later request's `previous_response_id`
//! is looked up here to become its key (source `previous_response_id`).
//!
//! A bounded LRU: at most `capacity` ids (the pin table's `--max-sticky-keys`, or
//! [`DEFAULT_CAPACITY`] when that is 0, unbounded pins); an id unused for
//! the pin table's idle period (`--max-idle-secs`, 0 = never) is forgotten when it is next
//! looked up or reaches the old end. Time is the gateway's injected clock, passed in.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The bound when `--max-sticky-keys` is 0 (about 300 bytes an id at most: ~80 MB full).
pub(crate) const DEFAULT_CAPACITY: usize = 1 << 18;

/// Longest response id remembered, in bytes (as a routing key).
pub(crate) const MAX_ID_BYTES: usize = 128;

/// The `event` label of `berth_response_chain_events_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct EventLabels {
    pub(crate) event: &'static str,
}

/// `berth_response_chain_*`.
#[derive(Debug, Default)]
pub(crate) struct ChainMetrics {
    entries: Gauge,
    events: Family<EventLabels, Counter>,
}

impl ChainMetrics {
    /// Registers the chain map's metrics.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "berth_response_chain_entries",
            "Response ids remembered for Responses chains",
            m.entries.clone(),
        );
        registry.register(
            "berth_response_chain_events",
            "Responses chain map events (recorded, hit, miss, expired, evicted, store_hit, \
             store_miss, store_error)",
            m.events.clone(),
        );
        m
    }

    /// Counts one event.
    pub(crate) fn count(&self, event: &'static str) {
        self.events.get_or_create(&EventLabels { event }).inc();
    }
}

struct Entry {
    key: String,
    last_used: Duration,
    seq: u64,
}

#[derive(Default)]
struct Inner {
    by_id: HashMap<String, Entry>,
    /// Use order: oldest first.
    order: BTreeMap<u64, String>,
    next_seq: u64,
}

/// The response-id -> key map.
pub(crate) struct Chains {
    inner: Mutex<Inner>,
    capacity: usize,
    idle: Option<Duration>,
    metrics: std::sync::Arc<ChainMetrics>,
}

impl std::fmt::Debug for Chains {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chains")
            .field("capacity", &self.capacity)
            .field("idle", &self.idle)
            .finish_non_exhaustive()
    }
}

impl Chains {
    /// A map of at most `capacity` ids (0: [`DEFAULT_CAPACITY`]), each forgotten after
    /// `idle_secs` unused (0: never).
    pub(crate) fn new(
        capacity: usize,
        idle_secs: u64,
        metrics: std::sync::Arc<ChainMetrics>,
    ) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            capacity: if capacity == 0 {
                DEFAULT_CAPACITY
            } else {
                capacity
            },
            idle: (idle_secs > 0).then(|| Duration::from_secs(idle_secs)),
            metrics,
        }
    }

    /// The metrics.
    pub(crate) fn metrics(&self) -> &ChainMetrics {
        &self.metrics
    }

    fn expired(&self, e: &Entry, now: Duration) -> bool {
        self.idle
            .is_some_and(|idle| now.saturating_sub(e.last_used) > idle)
    }

    /// Remembers that response `id` belongs to `key` (a repeat refreshes it). Ids that are not
    /// valid keys (empty, over 128 bytes) are not recorded.
    pub(crate) fn record(&self, id: &str, key: &str, now: Duration) {
        if id.is_empty() || id.len() > MAX_ID_BYTES {
            return;
        }
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let inner = &mut *g;
        let seq = inner.next_seq;
        inner.next_seq += 1;
        if let Some(old) = inner.by_id.insert(
            id.to_owned(),
            Entry {
                key: key.to_owned(),
                last_used: now,
                seq,
            },
        ) {
            inner.order.remove(&old.seq);
        }
        inner.order.insert(seq, id.to_owned());
        self.metrics.count("recorded");
        // Over the bound, or expired at the old end: drop from the old end.
        while let Some((&oldest, oid)) = inner.order.first_key_value() {
            let over = inner.by_id.len() > self.capacity;
            let stale = inner.by_id.get(oid).is_some_and(|e| self.expired(e, now));
            if !over && !stale {
                break;
            }
            let oid = inner.order.remove(&oldest).unwrap_or_default();
            inner.by_id.remove(&oid);
            self.metrics.count(if over { "evicted" } else { "expired" });
        }
        self.metrics.entries.set(inner.by_id.len() as i64);
    }

    /// The key response `id` belongs to, refreshing its use; `None` when unknown or idle too
    /// long (then forgotten). Counts `hit` / `miss` / `expired`.
    pub(crate) fn lookup(&self, id: &str, now: Duration) -> Option<String> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let inner = &mut *g;
        let Some(e) = inner.by_id.get(id) else {
            self.metrics.count("miss");
            return None;
        };
        if self.expired(e, now) {
            let seq = e.seq;
            inner.by_id.remove(id);
            inner.order.remove(&seq);
            self.metrics.entries.set(inner.by_id.len() as i64);
            self.metrics.count("expired");
            return None;
        }
        let seq = inner.next_seq;
        inner.next_seq += 1;
        let e = inner.by_id.get_mut(id)?;
        let old = std::mem::replace(&mut e.seq, seq);
        e.last_used = now;
        let key = e.key.clone();
        inner.order.remove(&old);
        inner.order.insert(seq, id.to_owned());
        self.metrics.count("hit");
        Some(key)
    }

    /// How many ids are remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .by_id
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chains(cap: usize, idle: u64) -> Chains {
        Chains::new(cap, idle, std::sync::Arc::default())
    }

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn records_and_finds_refreshing_use() {
        let c = chains(2, 0);
        c.record("r1", "k1", s(0));
        c.record("r2", "k2", s(1));
        assert_eq!(c.lookup("r1", s(2)).as_deref(), Some("k1"));
        // r1 was used last: a third id pushes out r2.
        c.record("r3", "k3", s(3));
        assert_eq!(c.len(), 2);
        assert_eq!(c.lookup("r2", s(4)), None);
        assert_eq!(c.lookup("r1", s(4)).as_deref(), Some("k1"));
        assert_eq!(c.lookup("r3", s(4)).as_deref(), Some("k3"));
    }

    #[test]
    fn idle_ids_are_forgotten_by_the_injected_clock() {
        let c = chains(10, 60);
        c.record("r1", "k1", s(0));
        c.record("r2", "k2", s(0));
        assert_eq!(c.lookup("r1", s(50)).as_deref(), Some("k1"));
        // r1 used at 50 s: still known at 100 s; r2 (unused since 0 s) is not.
        assert_eq!(c.lookup("r2", s(100)), None);
        assert_eq!(c.lookup("r1", s(100)).as_deref(), Some("k1"));
        assert_eq!(c.len(), 1);
        // An expired id at the old end goes when another is recorded.
        c.record("r3", "k3", s(500));
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn invalid_ids_are_not_recorded() {
        let c = chains(10, 0);
        c.record("", "k", s(0));
        c.record(&"x".repeat(129), "k", s(0));
        assert_eq!(c.len(), 0);
        assert_eq!(chains(0, 0).capacity, DEFAULT_CAPACITY);
    }
}

//! `berth_sticky_store_*`: what the shared pin store costs and how often it fails.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The store operation a sample is about.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OpLabels {
    pub(crate) op: &'static str,
}

/// Operations, for the `op` label.
pub(crate) mod op {
    /// A new key's place-or-get (on the request path).
    pub(crate) const PLACE: &str = "place";
    /// Publishing a moved pin.
    pub(crate) const MOVE: &str = "move";
    /// One batched refresh (TTLs, write-back, convergence).
    pub(crate) const SYNC: &str = "sync";
    /// Admin read or delete.
    pub(crate) const ADMIN: &str = "admin";
    /// A Responses chain entry written or read.
    pub(crate) const CHAIN: &str = "chain";
    /// Connecting (or probing) the store.
    pub(crate) const CONNECT: &str = "connect";
    /// The invalidation subscription.
    pub(crate) const SUBSCRIBE: &str = "subscribe";
}

/// The store's metrics (registered with the gateway's registry).
#[derive(Debug)]
pub(crate) struct StoreMetrics {
    pub(crate) errors: Family<OpLabels, Counter>,
    pub(crate) latency: Family<OpLabels, Histogram, fn() -> Histogram>,
    pub(crate) up: Gauge,
    pub(crate) adopted: Counter,
    pub(crate) invalidations: Counter,
    pub(crate) moves: Counter,
    pub(crate) dropped: Family<SetLabels, Counter>,
}

/// The `set` label of `berth_sticky_store_dropped_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct SetLabels {
    pub(crate) set: &'static str,
}

/// Buckets from 50 us to about 1.6 s.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
}

impl StoreMetrics {
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let m = Self {
            errors: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            up: Gauge::default(),
            adopted: Counter::default(),
            invalidations: Counter::default(),
            moves: Counter::default(),
            dropped: Family::default(),
        };
        registry.register(
            "berth_sticky_store_errors",
            "Sticky store operations that failed or timed out, by op",
            m.errors.clone(),
        );
        registry.register(
            "berth_sticky_store_latency_seconds",
            "Sticky store round trips, by op",
            m.latency.clone(),
        );
        registry.register(
            "berth_sticky_store_up",
            "1 while the sticky store answers, 0 while requests are served from local pins only",
            m.up.clone(),
        );
        registry.register(
            "berth_sticky_store_adopted",
            "Pins adopted from the store (placed by another replica or an earlier run)",
            m.adopted.clone(),
        );
        registry.register(
            "berth_sticky_store_invalidations",
            "Local pins dropped because another replica moved or deleted them",
            m.invalidations.clone(),
        );
        registry.register(
            "berth_sticky_store_moves",
            "Pin moves (failover, re-placement) this replica published",
            m.moves.clone(),
        );
        registry.register(
            "berth_sticky_store_dropped",
            "Pin hashes not queued for the store because the queue was full (set: touched, the \
             TTL refresh; dirty, moves to write)",
            m.dropped.clone(),
        );
        for set in ["touched", "dirty"] {
            let _ = m.dropped.get_or_create(&SetLabels { set });
        }
        for o in [
            op::PLACE,
            op::MOVE,
            op::SYNC,
            op::ADMIN,
            op::CHAIN,
            op::CONNECT,
            op::SUBSCRIBE,
        ] {
            let _ = m.errors.get_or_create(&OpLabels { op: o });
        }
        m
    }
}

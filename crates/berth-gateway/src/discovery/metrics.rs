//! Discovery metrics: SMG's `smg_discovery_*` names, plus berth's error counter.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct SourceLabels {
    pub(crate) source: &'static str,
}
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ResultLabels {
    pub(crate) source: &'static str,
    pub(crate) result: &'static str,
}
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReasonLabels {
    pub(crate) source: &'static str,
    pub(crate) reason: &'static str,
}

/// Discovery's metrics (registered with the gateway's registry).
#[derive(Debug)]
pub(crate) struct DiscoveryMetrics {
    /// `smg_discovery_registrations_total{source, result="success"|"failed"}`.
    pub(crate) registrations: Family<ResultLabels, Counter>,
    /// `smg_discovery_deregistrations_total{source, reason="reconciled"}`.
    pub(crate) deregistrations: Family<ReasonLabels, Counter>,
    /// `smg_discovery_workers_discovered{source}`: workers registered by discovery now.
    pub(crate) discovered: Family<SourceLabels, Gauge>,
    /// `berth_discovery_errors_total{source, reason="invalid"|"unreadable"|"missing"}`.
    pub(crate) errors: Family<ReasonLabels, Counter>,
}

impl DiscoveryMetrics {
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let m = Self {
            registrations: Family::default(),
            deregistrations: Family::default(),
            discovered: Family::default(),
            errors: Family::default(),
        };
        // The `_total` suffix of counters is added by the encoder.
        registry.register(
            "smg_discovery_registrations",
            "Workers registered by service discovery, by source and result",
            m.registrations.clone(),
        );
        registry.register(
            "smg_discovery_deregistrations",
            "Workers removed by service discovery, by source and reason",
            m.deregistrations.clone(),
        );
        registry.register(
            "smg_discovery_workers_discovered",
            "Workers registered by service discovery now, by source",
            m.discovered.clone(),
        );
        registry.register(
            "berth_discovery_errors",
            "Discovery looks that found an unreadable, invalid or vanished manifest (the last good set stays)",
            m.errors.clone(),
        );
        m
    }
}

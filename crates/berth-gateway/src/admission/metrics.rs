//! Admission metrics: SMG's `smg_http_rate_limit_total{result}` and berth's queue figures.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::RejectionKind;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ResultLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReasonLabels {
    reason: &'static str,
}

/// The limiter's metrics (registered with the gateway's registry even when the limiter is
/// off, so dashboards see zeros).
#[derive(Debug)]
pub(crate) struct AdmissionMetrics {
    decisions: Family<ResultLabels, Counter>,
    rejected: Family<ReasonLabels, Counter>,
    left: Counter,
    queue_depth: Gauge,
    in_flight: Gauge,
    wait: Histogram,
}

impl AdmissionMetrics {
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let m = Self {
            decisions: Family::default(),
            rejected: Family::default(),
            left: Counter::default(),
            queue_depth: Gauge::default(),
            in_flight: Gauge::default(),
            // 1 ms to about 9 minutes.
            wait: Histogram::new(exponential_buckets(0.001, 2.0, 20)),
        };
        registry.register(
            "smg_http_rate_limit",
            "Admission decisions on generation requests (result: allowed, rejected)",
            m.decisions.clone(),
        );
        registry.register(
            "berth_admission_rejected",
            "Requests answered 429 by admission control, by reason (queue_full, queue_timeout)",
            m.rejected.clone(),
        );
        registry.register(
            "berth_admission_queue_abandoned",
            "Queued requests whose client left before they were admitted",
            m.left.clone(),
        );
        registry.register(
            "berth_admission_queue_depth",
            "Requests waiting in the admission queue",
            m.queue_depth.clone(),
        );
        registry.register(
            "berth_admission_permits_in_use",
            "Admitted requests whose response has not ended (bounded by --max-concurrent-requests)",
            m.in_flight.clone(),
        );
        registry.register(
            "berth_admission_queue_wait_seconds",
            "Time queued requests waited before admission",
            m.wait.clone(),
        );
        m
    }

    pub(crate) fn set_levels(&self, in_use: u32, queued: usize) {
        self.in_flight.set(i64::from(in_use));
        self.queue_depth
            .set(i64::try_from(queued).unwrap_or(i64::MAX));
    }

    pub(crate) fn allowed(&self) {
        self.decisions
            .get_or_create(&ResultLabels { result: "allowed" })
            .inc();
    }

    pub(crate) fn admitted_after(&self, waited: Duration) {
        self.allowed();
        self.wait.observe(waited.as_secs_f64());
    }

    pub(crate) fn rejected(&self, kind: RejectionKind) {
        self.decisions
            .get_or_create(&ResultLabels { result: "rejected" })
            .inc();
        self.rejected
            .get_or_create(&ReasonLabels {
                reason: kind.as_str(),
            })
            .inc();
    }

    pub(crate) fn left(&self) {
        self.left.inc();
    }
}

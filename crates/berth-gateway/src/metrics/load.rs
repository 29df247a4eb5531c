//! The load monitor and worker overload protection as metrics, refreshed when scraped:
//! `berth_worker_waiting_requests` and `berth_worker_token_usage` (per worker, as last polled)
//! and `berth_worker_overload_total{outcome}` (placements that left out an overloaded worker,
//! placements made with every candidate overloaded, requests shed).

use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::WorkerLabels;
use crate::registry::View;
use crate::routing::{RouterStats, WorkerLoads};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OutcomeLabels {
    pub(crate) outcome: &'static str,
}

/// The `outcome` label values, in [`totals`]' order.
const OUTCOMES: [&str; 3] = ["vetoed", "all_over", "shed"];

fn totals(r: &RouterStats) -> [u64; 3] {
    [r.overload_vetoes, r.overload_all_over, r.overload_shed]
}

#[derive(Debug, Default)]
pub(crate) struct LoadMetrics {
    waiting: Family<WorkerLabels, Gauge>,
    usage: Family<WorkerLabels, Gauge<f64, AtomicU64>>,
    overload: Family<OutcomeLabels, Counter>,
    /// Totals already counted (the core reports totals since start).
    seen: Mutex<[u64; 3]>,
}

impl LoadMetrics {
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "berth_worker_waiting_requests",
            "Queued (waiting) requests each worker reported at the last load poll \
             (num_waiting_reqs of GET /v1/loads)",
            m.waiting.clone(),
        );
        registry.register(
            "berth_worker_token_usage",
            "KV cache token usage (0-1) each worker reported at the last load poll",
            m.usage.clone(),
        );
        registry.register(
            "berth_worker_overload",
            "Worker overload protection: placements that left out an overloaded worker \
             (vetoed), placements made while every candidate was overloaded (all_over), \
             requests refused with --worker-overload-shed (shed)",
            m.overload.clone(),
        );
        for outcome in OUTCOMES {
            let _ = m.overload.get_or_create(&OutcomeLabels { outcome });
        }
        m
    }

    /// Refreshes the gauges from the last poll round (only workers still in `view`) and the
    /// counters from the routers' totals.
    pub(crate) fn update(
        &self,
        view: &View,
        loads: Option<&WorkerLoads>,
        routers: &[&RouterStats],
    ) {
        self.waiting.clear();
        self.usage.clear();
        if let Some(loads) = loads {
            for w in &view.workers {
                if let Some(l) = loads.get(w.id) {
                    let labels = WorkerLabels {
                        worker: w.url.clone(),
                    };
                    self.waiting
                        .get_or_create(&labels)
                        .set(i64::from(l.waiting_reqs));
                    self.usage.get_or_create(&labels).set(l.token_usage);
                }
            }
        }
        let mut now = [0u64; 3];
        for r in routers {
            for (n, t) in now.iter_mut().zip(totals(r)) {
                *n += t;
            }
        }
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        for ((outcome, total), last) in OUTCOMES.iter().zip(now).zip(seen.iter_mut()) {
            self.overload
                .get_or_create(&OutcomeLabels { outcome })
                .inc_by(total.saturating_sub(*last));
            *last = total.max(*last);
        }
    }
}

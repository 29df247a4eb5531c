//! What workers report as cached against what the prefix index predicted (`--cache-feedback`,
//! `cache_aware` and `ttft_aware`), per worker:
//!
//! - `berth_cached_tokens_predicted_total{worker,source}` and
//!   `berth_cached_tokens_reported_total{worker,source}`: tokens predicted cached and reported
//!   cached over the compared answers (`source`: `index` for the prefix index's prediction,
//!   `session` for a pinned turn whose body was not read, compared with its previous answer);
//! - `berth_cached_tokens_prediction_error{worker,source}`: histogram of |predicted - reported|
//!   tokens per answer (its sum over its count is the index's mean absolute error);
//! - `berth_cached_tokens_reports_total{worker,verdict}`: answers by verdict (`confirmed`,
//!   `shortfall`, `surplus`; `unknown`: the answer reported no cached tokens, `uncompared`:
//!   nothing to compare with);
//! - `berth_prefix_index_corrections_total{worker}`: answers that corrected the index (the
//!   chunks dropped are `berth_prefix_index_evicted_chunks_total{reason="reported"}`);
//! - `berth_worker_effective_kv_tokens{worker}`: the KV capacity routing assumes (the reported
//!   `max_total_num_tokens`, else the learned estimate), and
//!   `berth_worker_learned_kv_tokens{worker}`: the estimate learned from the reports; set when
//!   scraped.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::WorkerLabels;
use crate::routing::policy::Observation;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct SourceWorkerLabels {
    pub(crate) worker: Arc<str>,
    pub(crate) source: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct VerdictLabels {
    pub(crate) worker: Arc<str>,
    pub(crate) verdict: &'static str,
}

type HistogramFamily = Family<SourceWorkerLabels, Histogram, fn() -> Histogram>;

fn error_histogram() -> Histogram {
    // 16 tokens to ~1M
    Histogram::new(exponential_buckets(16.0, 2.0, 17))
}

#[derive(Debug)]
pub(crate) struct FeedbackMetrics {
    predicted: Family<SourceWorkerLabels, Counter>,
    reported: Family<SourceWorkerLabels, Counter>,
    error: HistogramFamily,
    reports: Family<VerdictLabels, Counter>,
    corrections: Family<WorkerLabels, Counter>,
    pub(super) effective_kv: Family<WorkerLabels, Gauge>,
    pub(super) learned_kv: Family<WorkerLabels, Gauge>,
}

impl FeedbackMetrics {
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let m = Self {
            predicted: Family::default(),
            reported: Family::default(),
            error: Family::new_with_constructor(error_histogram),
            reports: Family::default(),
            corrections: Family::default(),
            effective_kv: Family::default(),
            learned_kv: Family::default(),
        };
        registry.register(
            "berth_cached_tokens_predicted",
            "cache_aware, ttft_aware: prompt tokens predicted cached on the worker that answered \
             (source: index or session)",
            m.predicted.clone(),
        );
        registry.register(
            "berth_cached_tokens_reported",
            "cache_aware, ttft_aware: prompt tokens the worker reported cached, over the same \
             answers",
            m.reported.clone(),
        );
        registry.register(
            "berth_cached_tokens_prediction_error",
            "cache_aware, ttft_aware: |predicted - reported| cached tokens per answer",
            m.error.clone(),
        );
        registry.register(
            "berth_cached_tokens_reports",
            "cache_aware, ttft_aware: answers read for cached tokens, by verdict (confirmed, \
             shortfall, surplus, unknown, uncompared)",
            m.reports.clone(),
        );
        registry.register(
            "berth_prefix_index_corrections",
            "cache_aware, ttft_aware: answers whose reported cached tokens corrected the prefix \
             index (--cache-feedback on)",
            m.corrections.clone(),
        );
        registry.register(
            "berth_worker_effective_kv_tokens",
            "cache_aware, ttft_aware: the KV capacity routing assumes for the worker (its \
             max_total_num_tokens, else the capacity learned from its reported cached tokens)",
            m.effective_kv.clone(),
        );
        registry.register(
            "berth_worker_learned_kv_tokens",
            "cache_aware, ttft_aware: the worker's effective KV capacity as learned from its \
             reported cached tokens (--cache-feedback on)",
            m.learned_kv.clone(),
        );
        m
    }

    /// Counts one read answer of `worker`: `None` when it reported no cached tokens
    /// (`unknown`), `Some(None)` when there was nothing to compare with.
    pub(crate) fn answer(&self, worker: &Arc<str>, outcome: Option<Option<&Observation>>) {
        let verdict = match outcome {
            None => "unknown",
            Some(None) => "uncompared",
            Some(Some(o)) => o.verdict.as_str(),
        };
        self.reports
            .get_or_create(&VerdictLabels {
                worker: worker.clone(),
                verdict,
            })
            .inc();
        let Some(Some(o)) = outcome else {
            return;
        };
        let labels = SourceWorkerLabels {
            worker: worker.clone(),
            source: if o.from_session { "session" } else { "index" },
        };
        let predicted = o.predicted_tokens.max(0.0);
        self.predicted
            .get_or_create(&labels)
            .inc_by(predicted.round() as u64);
        self.reported
            .get_or_create(&labels)
            .inc_by(o.reported_tokens);
        self.error
            .get_or_create(&labels)
            .observe((predicted - o.reported_tokens as f64).abs());
        if o.corrected_chunks > 0 {
            self.corrections
                .get_or_create(&WorkerLabels {
                    worker: worker.clone(),
                })
                .inc();
        }
    }
}

//! Prometheus metrics with SMG's names.
//!
//! Counters and histograms on the request path are updated as requests go; per-worker gauges
//! (`smg_worker_*`) and the pin table's figures (`smg_manual_policy_cache_entries`,
//! `smg_manual_policy_evictions_total`) are read from the registry and the router when scraped,
//! so the request path never touches them.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};

mod feedback;
mod hot;
mod index;
mod load;

use hot::{HotFamily, HotLabels, same_str};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::admission::AdmissionMetrics;
use crate::discovery::DiscoveryMetrics;
use crate::registry::View;
use crate::routing::{Branch, KeySource, RouterStats};
use crate::store::StoreMetrics;
use crate::upstream::UpstreamMetrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct BranchLabels {
    pub(crate) branch: &'static str,
}
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct LegBranchLabels {
    pub(crate) leg: &'static str,
    pub(crate) branch: &'static str,
}
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct LegLabels {
    pub(crate) leg: &'static str,
}
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReasonLabels {
    pub(crate) reason: &'static str,
}
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct SourceLabels {
    pub(crate) source: &'static str,
}
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct SessionLabels {
    pub(crate) action: &'static str,
    pub(crate) outcome: &'static str,
}
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct WorkerLabels {
    pub(crate) worker: Arc<str>,
}
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TermLabels {
    pub(crate) worker: Arc<str>,
    pub(crate) term: &'static str,
}
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct BodyPathLabels {
    pub(crate) path: &'static str,
    pub(crate) reason: &'static str,
}
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RequestLabels {
    pub(crate) model: Arc<str>,
    pub(crate) endpoint: &'static str,
    pub(crate) streaming: &'static str,
}

// (the label sets are taken apart whole: a member added to one must be compared here too, or
// its `same` would answer `true` where `==` answers `false`)
impl HotLabels for BodyPathLabels {
    fn same(&self, other: &Self) -> bool {
        let Self { path, reason } = self;
        same_str(path, other.path) && same_str(reason, other.reason)
    }
}

impl HotLabels for RequestLabels {
    fn same(&self, other: &Self) -> bool {
        let Self {
            model,
            endpoint,
            streaming,
        } = self;
        same_str(model, &other.model)
            && same_str(endpoint, other.endpoint)
            && same_str(streaming, other.streaming)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ResponseLabels {
    pub(crate) status_code: u16,
    pub(crate) error_code: &'static str,
}

/// Every metric the gateway exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub(crate) branch: Family<BranchLabels, Counter>,
    /// `branch`'s counters by `Branch as usize`, resolved on first use.
    branch_hot: Resolved<8>,
    cache_entries: Gauge,
    idle_timeouts: Gauge,
    evictions: Family<ReasonLabels, Counter>,
    evictions_seen: Mutex<[u64; 3]>,
    pub(crate) key_source: Family<SourceLabels, Counter>,
    /// `key_source`'s counters by `KeySource as usize`, resolved on first use.
    key_source_hot: Resolved<16>,
    pub(crate) session_control: Family<SessionLabels, Counter>,
    worker_keys: Family<WorkerLabels, Gauge>,
    pub(crate) body_path: HotFamily<BodyPathLabels>,
    pub(crate) requests: HotFamily<RequestLabels>,
    pub(crate) duration: Histogram,
    pub(crate) ttft: Histogram,
    /// The upstream attempt's counters (status codes, stale-connection re-sends).
    pub(crate) upstream: UpstreamMetrics,
    responses: Family<ResponseLabels, Counter>,
    /// `responses{status_code="200",error_code="none"}`, resolved once: the request path's
    /// common case skips the family's lookup.
    responses_ok: Counter,
    pub(crate) retries: Counter,
    pub(crate) stream_errors: Counter,
    worker_active: Family<WorkerLabels, Gauge>,
    worker_cb_state: Family<WorkerLabels, Gauge>,
    worker_healthy: Family<WorkerLabels, Gauge>,
    ttft_model: Family<TermLabels, Gauge<f64, AtomicU64>>,
    ttft_queued: Family<WorkerLabels, Gauge<f64, AtomicU64>>,
    /// PD mode: `smg_manual_policy_branch_total` split by leg (`berth_pd_branch_total`).
    pub(crate) pd_branch: Family<LegBranchLabels, Counter>,
    /// PD mode: pins held by leg (`berth_pd_cache_entries`), set when scraped.
    pub(crate) pd_pins: Family<LegLabels, Gauge>,
    /// `berth_sticky_store_*` (registered even without a store, so dashboards see zeros).
    pub(crate) store: Arc<StoreMetrics>,
    /// `smg_http_rate_limit_total` and `berth_admission_*` (registered even when admission
    /// control is off).
    pub(crate) admission: Arc<AdmissionMetrics>,
    /// `smg_discovery_*` and `berth_discovery_errors_total` (registered even without discovery).
    pub(crate) discovery: Arc<DiscoveryMetrics>,
    /// `berth_buffered_body_*` and `berth_body_budget_rejected_total`.
    pub(crate) body_budget: Arc<crate::request_body::BodyBudgetMetrics>,
    /// `berth_prefix_index_*`.
    index: index::IndexMetrics,
    /// `berth_cached_tokens_*`, `berth_prefix_index_corrections_total`,
    /// `berth_worker_effective_kv_tokens`.
    pub(crate) feedback: feedback::FeedbackMetrics,
    /// `berth_response_chain_*`.
    pub(crate) chains: Arc<crate::chains::ChainMetrics>,
    /// `berth_worker_waiting_requests`, `berth_worker_token_usage`, `berth_worker_overload_total`.
    pub(crate) load: load::LoadMetrics,
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let store = Arc::new(StoreMetrics::register(&mut registry));
        let admission = Arc::new(AdmissionMetrics::register(&mut registry));
        let discovery = Arc::new(DiscoveryMetrics::register(&mut registry));
        let body_budget = Arc::new(crate::request_body::BodyBudgetMetrics::register(
            &mut registry,
        ));
        let index = index::IndexMetrics::register(&mut registry);
        let feedback = feedback::FeedbackMetrics::register(&mut registry);
        let chains = Arc::new(crate::chains::ChainMetrics::register(&mut registry));
        let load = load::LoadMetrics::register(&mut registry);
        let hist = || Histogram::new(exponential_buckets(0.001, 2.0, 20));
        let m = Self {
            branch: Family::default(),
            cache_entries: Gauge::default(),
            idle_timeouts: Gauge::default(),
            evictions: Family::default(),
            evictions_seen: Mutex::new([0; 3]),
            key_source: Family::default(),
            session_control: Family::default(),
            worker_keys: Family::default(),
            body_path: HotFamily::default(),
            requests: HotFamily::default(),
            duration: hist(),
            ttft: hist(),
            upstream: UpstreamMetrics::default(),
            responses: Family::default(),
            responses_ok: Counter::default(),
            branch_hot: Resolved::default(),
            key_source_hot: Resolved::default(),
            retries: Counter::default(),
            stream_errors: Counter::default(),
            worker_active: Family::default(),
            worker_cb_state: Family::default(),
            worker_healthy: Family::default(),
            ttft_model: Family::default(),
            ttft_queued: Family::default(),
            pd_branch: Family::default(),
            pd_pins: Family::default(),
            store,
            admission,
            discovery,
            body_budget,
            index,
            feedback,
            chains,
            load,
            registry: Registry::default(),
        };
        // The `_total` suffix of counters is added by the encoder.
        registry.register(
            "smg_manual_policy_branch",
            "Sticky decisions by branch",
            m.branch.clone(),
        );
        registry.register(
            "berth_pd_branch",
            "PD mode: pinned-path decisions by leg (prefill, decode) and branch",
            m.pd_branch.clone(),
        );
        registry.register(
            "berth_pd_cache_entries",
            "PD mode: pins held by leg (prefill, decode)",
            m.pd_pins.clone(),
        );
        registry.register(
            "smg_manual_policy_cache_entries",
            "Sticky pins held",
            m.cache_entries.clone(),
        );
        registry.register(
            "berth_session_idle_timeouts",
            "Pins with their own idle period (nvext.session_control bind with a timeout)",
            m.idle_timeouts.clone(),
        );
        registry.register(
            "smg_manual_policy_evictions",
            "Pins evicted, by reason",
            m.evictions.clone(),
        );
        registry.register(
            "smg_routing_key_source",
            "Routing keys by source",
            m.key_source.clone(),
        );
        registry.register(
            "berth_session_control",
            "nvext.session_control actions, by outcome",
            m.session_control.clone(),
        );
        registry.register(
            "smg_worker_routing_keys_active",
            "Keys pinned to each worker",
            m.worker_keys.clone(),
        );
        registry.register(
            "smg_router_request_body_path",
            "Request bodies buffered, scanned (held until a body key member settles the key) or \
             streamed, and why",
            m.body_path.family().clone(),
        );
        registry.register(
            "smg_router_requests",
            "Requests by model, endpoint and streaming",
            m.requests.family().clone(),
        );
        registry.register(
            "smg_router_request_duration_seconds",
            "Request duration through the gateway, to the end of the response body",
            m.duration.clone(),
        );
        registry.register(
            "smg_router_ttft_seconds",
            "Time from request arrival to the first response body byte",
            m.ttft.clone(),
        );
        registry.register(
            "smg_router_upstream_responses",
            "Worker responses by status code",
            m.upstream.status.clone(),
        );
        registry.register(
            "smg_http_responses",
            "Responses to clients by status and gateway error code (none: a worker's response or \
             a gateway success)",
            m.responses.clone(),
        );
        registry.register(
            "smg_router_retries",
            "Requests re-sent to another worker",
            m.retries.clone(),
        );
        registry.register(
            "smg_router_stale_connection_resends",
            "Requests re-sent on a fresh connection to the same worker after a reused connection closed before answering",
            m.upstream.stale_resends.clone(),
        );
        registry.register(
            "smg_router_upstream_stream_errors",
            "Worker responses broken off after their headers were sent",
            m.stream_errors.clone(),
        );
        registry.register(
            "smg_worker_requests_active",
            "Requests in flight per worker",
            m.worker_active.clone(),
        );
        registry.register(
            "smg_worker_cb_state",
            "Circuit breaker per worker (0 closed, 1 open, 2 half-open)",
            m.worker_cb_state.clone(),
        );
        registry.register(
            "smg_worker_healthy",
            "Worker health (1 healthy)",
            m.worker_healthy.clone(),
        );
        registry.register(
            "berth_worker_ttft_model_ms",
            "ttft_aware: each worker's learned cost model (term base: ms; per_1k_tokens: ms per \
             1000 uncached prompt tokens; per_decoding_request: ms)",
            m.ttft_model.clone(),
        );
        registry.register(
            "berth_worker_ttft_queued_prefill_tokens",
            "ttft_aware: estimated uncached prompt tokens this gateway has queued on each worker",
            m.ttft_queued.clone(),
        );
        let responses_ok = m
            .responses
            .get_or_create(&ResponseLabels {
                status_code: 200,
                error_code: "none",
            })
            .clone();
        Self {
            registry,
            responses_ok,
            ..m
        }
    }

    /// Counts a response to a client: its status, and the gateway's error code if it made one
    /// (a worker's response counts as `none`, even when the worker set the header itself).
    pub(crate) fn response(
        &self,
        status: http::StatusCode,
        headers: &http::HeaderMap,
        from_worker: bool,
    ) {
        const CODE: http::HeaderName =
            http::HeaderName::from_static(crate::error::ERROR_CODE_HEADER);
        let code_header = if from_worker {
            None
        } else {
            headers.get(&CODE)
        };
        if status == http::StatusCode::OK && code_header.is_none() {
            self.responses_ok.inc();
            return;
        }
        let error_code = code_header
            .and_then(|v| crate::error::ErrorCode::from_wire(v.as_bytes()))
            .map_or("none", crate::error::ErrorCode::as_str);
        self.responses
            .get_or_create(&ResponseLabels {
                status_code: status.as_u16(),
                error_code,
            })
            .inc();
    }

    /// Counts a routing decision's branch (`smg_manual_policy_branch_total`).
    pub(crate) fn count_branch(&self, branch: Branch) {
        self.branch_hot.inc(branch as usize, || {
            self.branch
                .get_or_create(&BranchLabels {
                    branch: branch.as_str(),
                })
                .clone()
        });
    }

    /// Counts where a routing key came from (`smg_routing_key_source_total`).
    pub(crate) fn count_key_source(&self, source: KeySource) {
        self.key_source_hot.inc(source as usize, || {
            self.key_source
                .get_or_create(&SourceLabels {
                    source: source.as_str(),
                })
                .clone()
        });
    }

    /// Prometheus text exposition, after refreshing the scrape-time figures.
    pub(crate) fn render(
        &self,
        view: &View,
        router: &RouterStats,
        now: std::time::Duration,
    ) -> String {
        self.render_pools(&[(view, router)], now)
    }

    /// [`Self::render`] over several pools (PD mode: decode, then prefill): per-worker figures
    /// for every pool's workers, pin and eviction counts summed over their routers.
    pub(crate) fn render_pools(
        &self,
        pools: &[(&View, &RouterStats)],
        now: std::time::Duration,
    ) -> String {
        let sum = |f: fn(&RouterStats) -> u64| pools.iter().map(|(_, r)| f(r)).sum::<u64>();
        self.index
            .update(pools.iter().filter_map(|(_, r)| r.prefix_index.as_ref()));
        self.index
            .update_ledger(pools.iter().filter_map(|(_, r)| r.agentic_ledger.as_ref()));
        let router = &RouterStats {
            pins: pools.iter().map(|(_, r)| r.pins).sum(),
            idle_timeouts: pools.iter().map(|(_, r)| r.idle_timeouts).sum(),
            evicted_idle: sum(|r| r.evicted_idle),
            evicted_capacity: sum(|r| r.evicted_capacity),
            evicted_worker_removed: sum(|r| r.evicted_worker_removed),
            ttft_fleet: None,
            ttft_workers: Vec::new(),
            prefix_index: None,
            agentic_ledger: None,
            overload_vetoes: 0,
            overload_all_over: 0,
            overload_shed: 0,
        };
        self.cache_entries
            .set(i64::try_from(router.pins).unwrap_or(i64::MAX));
        self.idle_timeouts
            .set(i64::try_from(router.idle_timeouts).unwrap_or(i64::MAX));
        {
            let mut seen = self
                .evictions_seen
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let totals = [
                router.evicted_idle,
                router.evicted_capacity,
                router.evicted_worker_removed,
            ];
            for ((reason, total), last) in ["idle", "capacity", "worker_removed"]
                .iter()
                .zip(totals)
                .zip(seen.iter_mut())
            {
                let counter = self.evictions.get_or_create(&ReasonLabels { reason });
                counter.inc_by(total.saturating_sub(*last));
                *last = total.max(*last);
            }
        }
        for fam in [
            &self.worker_keys,
            &self.worker_active,
            &self.worker_cb_state,
            &self.worker_healthy,
        ] {
            fam.clear();
        }
        self.ttft_model.clear();
        self.ttft_queued.clear();
        self.feedback.effective_kv.clear();
        self.feedback.learned_kv.clear();
        for (view, stats) in pools {
            self.render_workers(view, stats, now);
        }
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }

    fn render_workers(&self, view: &View, router: &RouterStats, now: std::time::Duration) {
        for w in &view.workers {
            let labels = WorkerLabels {
                worker: w.url.clone(),
            };
            let (healthy, cb) = {
                let s = w.state();
                (s.health.is_healthy(), s.breaker.state(now).gauge())
            };
            self.worker_keys
                .get_or_create(&labels)
                .set(i64::from(w.stats.pinned_keys()));
            self.worker_active
                .get_or_create(&labels)
                .set(i64::from(w.stats.in_flight()));
            self.worker_cb_state.get_or_create(&labels).set(cb);
            self.worker_healthy
                .get_or_create(&labels)
                .set(i64::from(healthy));
            for (fam, kv) in [
                (&self.feedback.effective_kv, w.stats.effective_kv_tokens()),
                (&self.feedback.learned_kv, w.stats.learned_kv_tokens()),
            ] {
                if let Some(kv) = kv {
                    fam.get_or_create(&labels)
                        .set(i64::try_from(kv).unwrap_or(i64::MAX));
                }
            }
            if let Some((_, m, queued)) = router.ttft_workers.iter().find(|(id, ..)| *id == w.id) {
                for (term, v) in [
                    ("base", m.base_ms),
                    ("per_1k_tokens", m.per_token_ms * 1000.0),
                    ("per_decoding_request", m.per_decode_ms),
                ] {
                    let labels = TermLabels {
                        worker: w.url.clone(),
                        term,
                    };
                    self.ttft_model.get_or_create(&labels).set(v);
                }
                self.ttft_queued.get_or_create(&labels).set(*queued);
            }
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Counters of one family indexed by a closed enum's discriminant, each resolved from the
/// family on first use: the request path's count is then one atomic load and add instead of a
/// label lookup under the family's lock, and a series still appears only once it is counted.
/// An index past `N` falls back to the lookup.
#[derive(Debug)]
struct Resolved<const N: usize>([OnceLock<Counter>; N]);

impl<const N: usize> Default for Resolved<N> {
    fn default() -> Self {
        Self(std::array::from_fn(|_| OnceLock::new()))
    }
}

impl<const N: usize> Resolved<N> {
    fn inc(&self, i: usize, resolve: impl FnOnce() -> Counter) {
        match self.0.get(i) {
            Some(c) => c.get_or_init(resolve).inc(),
            None => resolve().inc(),
        };
    }
}

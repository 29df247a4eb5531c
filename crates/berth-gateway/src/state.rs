//! What every request handler shares.

use std::sync::Arc;

use crate::admission::Admission;
use crate::clock::Clock;
use crate::config::GatewayConfig;
use crate::metrics::Metrics;
use crate::registry::Registry;
use crate::routing::Router;
use crate::store::Store;
use crate::upstream::{HttpClient, Pool};

/// The gateway's shared state: configuration, routing, workers, client, metrics.
pub(crate) struct AppState {
    pub(crate) config: GatewayConfig,
    pub(crate) router: Router,
    pub(crate) registry: Arc<Registry>,
    pub(crate) client: HttpClient,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) clock: Arc<Clock>,
    /// The shared pin store (`--sticky-store`), if configured.
    pub(crate) store: Option<Arc<Store>>,
    /// Admission control, if any limit is configured.
    pub(crate) admission: Option<Arc<Admission>>,
    /// PD mode (`--pd-disaggregation`): the prefill leg; the regular registry and router are
    /// then the decode leg's.
    pub(crate) pd: Option<crate::pd::PdLegs>,
    /// HTTPS towards clients (`--tls-cert-path`/`--tls-key-path`), if configured.
    pub(crate) tls: Option<tokio_rustls::TlsAcceptor>,
    /// Bytes buffered request bodies may hold together (`--buffered-body-budget-mb`).
    pub(crate) body_budget: Arc<crate::request_body::BodyBudget>,
    /// Responses chains: which key each response id belongs to.
    pub(crate) chains: crate::chains::Chains,
    /// The generator routing decisions draw from (`--routing-seed`).
    pub(crate) routing_rng: crate::rng::RoutingRng,
}

/// What one IO thread's connections share: the state and that thread's worker connections (so
/// a connection and its upstream connections live on one thread).
#[derive(Debug)]
pub(crate) struct IoCtx {
    pub(crate) state: Arc<AppState>,
    pub(crate) pool: Arc<Pool>,
}

impl AppState {
    /// The Prometheus text: both pools in PD mode.
    pub(crate) fn render_metrics(&self) -> String {
        let now = self.clock.now();
        let stats_of = |router: &crate::routing::Router, view: &crate::registry::View| {
            let mut stats = router.stats();
            stats.ttft_workers = router.ttft_figures(&view.snapshot, now);
            stats
        };
        let view = self.registry.view();
        let stats = stats_of(&self.router, &view);
        let loads = self.registry.loads();
        let prefill_stats = self
            .pd
            .as_ref()
            .map(|pd| stats_of(&pd.router, &pd.registry.view()));
        let routers: Vec<&crate::routing::RouterStats> = std::iter::once(&stats)
            .chain(prefill_stats.as_ref())
            .collect();
        self.metrics.load.update(&view, loads.as_deref(), &routers);
        match &self.pd {
            None => self.metrics.render(&view, &stats, now),
            Some(pd) => {
                let prefill = pd.registry.view();
                let prefill_stats = stats_of(&pd.router, &prefill);
                for (leg, pins) in [("decode", stats.pins), ("prefill", prefill_stats.pins)] {
                    self.metrics
                        .pd_pins
                        .get_or_create(&crate::metrics::LegLabels { leg })
                        .set(i64::try_from(pins).unwrap_or(i64::MAX));
                }
                self.metrics
                    .render_pools(&[(&view, &stats), (&prefill, &prefill_stats)], now)
            }
        }
    }
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl crate::store::PinHost for AppState {
    fn router(&self) -> &Router {
        &self.router
    }

    fn view(&self) -> Arc<crate::registry::View> {
        self.registry.view()
    }

    fn now(&self) -> std::time::Duration {
        self.clock.now()
    }

    fn store(&self) -> Option<&Arc<Store>> {
        self.store.as_ref()
    }
}

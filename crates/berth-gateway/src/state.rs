//! What every request handler shares.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::admission::Admission;
use crate::clock::Clock;
use crate::config::GatewayConfig;
use crate::metrics::Metrics;
use crate::pool::Pool;
use crate::registry::Registry;
use crate::routing::{Rng, Router};
use crate::store::Store;
use crate::upstream::HttpClient;

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
    pub(crate) body_budget: Arc<crate::body_budget::BodyBudget>,
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
        let (view, stats) = (self.registry.view(), self.router.stats());
        match &self.pd {
            None => self.metrics.render(&view, &stats, now),
            Some(pd) => {
                let (prefill, prefill_stats) = (pd.registry.view(), pd.router.stats());
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

/// A seed that differs per call (time and a counter), for per-thread generators.
pub(crate) fn fresh_seed() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos
        ^ COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

thread_local! {
    static RNG: RefCell<Rng> = RefCell::new(Rng::seeded(fresh_seed()));
}

/// Runs `f` with this thread's generator (routing is synchronous, so no await inside).
pub(crate) fn with_rng<T>(f: impl FnOnce(&mut Rng) -> T) -> T {
    RNG.with_borrow_mut(f)
}

//! The prefill leg at run time.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use tokio::task::JoinHandle;

use super::PdSettings;
use crate::clock::Clock;
use crate::error::GatewayError;
use crate::registry::{self, Registry, Worker};
use crate::registry::{BreakerSettings, HealthSettings};
use crate::routing::{Router, RouterOptions};
use crate::upstream::HttpClient;

/// Prefill worker ids start here, so the two pools' ids never collide (connection pools and
/// `DELETE /workers/{id}` key on them).
const PREFILL_FIRST_ID: u32 = 1 << 24;

/// Prefill workers registered at start-up, awaiting their first health probe.
pub(crate) type Starting = Vec<Arc<Worker>>;

/// The prefill workers, their router and their bootstrap ports.
#[derive(Debug)]
pub(crate) struct PdLegs {
    /// Prefill workers: membership, health, breakers.
    pub(crate) registry: Arc<Registry>,
    /// The prefill policy and the prefill leg's pins.
    pub(crate) router: Router,
    /// Bootstrap port by prefill worker URL (as registered).
    ports: RwLock<HashMap<Arc<str>, Option<u16>>>,
}

impl PdLegs {
    /// The prefill leg `pd` describes (`base`: the regular router options, whose policy the
    /// prefill policy replaces), its workers registered (awaiting their first health probe).
    pub(crate) fn new(
        pd: &PdSettings,
        base: &RouterOptions,
        breaker: BreakerSettings,
        health: HealthSettings,
        clock: Arc<Clock>,
    ) -> Result<(Self, Starting), GatewayError> {
        let router = Router::new(&pd.router_options(base))
            .map_err(|e| GatewayError::Config(e.to_string()))?;
        let registry =
            Arc::new(Registry::new(breaker, health, clock).with_first_id(PREFILL_FIRST_ID));
        let urls: Vec<String> = pd.prefill.iter().map(|p| p.url.clone()).collect();
        let starting = registry::register_startup(&registry, &urls)
            .map_err(|e| GatewayError::Config(format!("--prefill: {e}")))?;
        let legs = Self {
            registry,
            router,
            ports: RwLock::default(),
        };
        for p in &pd.prefill {
            legs.set_port(&p.url, p.bootstrap_port);
        }
        Ok((legs, starting))
    }

    /// Records a prefill worker's bootstrap port.
    pub(crate) fn set_port(&self, url: &str, port: Option<u16>) {
        self.ports
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(Arc::from(url), port);
    }

    /// Forgets a removed prefill worker's bootstrap port.
    pub(crate) fn forget_port(&self, url: &str) {
        self.ports
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(url);
    }

    /// `bootstrap_host` and `bootstrap_port` for requests whose prefill runs on `worker`: the
    /// host of its URL (SMG's choice), and its configured port.
    pub(crate) fn bootstrap(&self, worker: &Worker) -> (String, Option<u16>) {
        let port = self
            .ports
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&worker.url)
            .copied()
            .flatten();
        (bootstrap_host(&worker.url), port)
    }

    /// The first health round of the prefill workers, then their health-check task.
    pub(crate) async fn start_health(
        &self,
        health: &HealthSettings,
        startup_timeout: std::time::Duration,
        client: &HttpClient,
        starting: Vec<Arc<Worker>>,
    ) -> JoinHandle<()> {
        let waiting = registry::first_round(&self.registry, client, starting, health.timeout).await;
        if !waiting.is_empty() {
            let list = waiting.iter().map(|u| &**u).collect::<Vec<_>>().join(" ");
            tracing::warn!(waiting = %list, "serving while waiting for prefill workers to answer GET /health");
        }
        registry::spawn_health_checks(
            self.registry.clone(),
            client.clone(),
            health.clone(),
            startup_timeout,
        )
    }
}

/// The host part of a worker URL (without IPv6 brackets).
fn bootstrap_host(url: &str) -> String {
    let base = url.split('@').next().unwrap_or(url);
    base.parse::<http::Uri>()
        .ok()
        .and_then(|u| u.host().map(|h| h.trim_matches(['[', ']']).to_owned()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_bootstrap_host_is_the_url_host() {
        assert_eq!(super::bootstrap_host("http://10.0.0.1:8000"), "10.0.0.1");
        assert_eq!(super::bootstrap_host("http://[::1]:8000/v1"), "::1");
        assert_eq!(super::bootstrap_host("http://p.local"), "p.local");
    }
}

//! Starting, running and stopping the gateway.
//!
//! [`Gateway::builder`] takes already-bound listeners (tests bind `127.0.0.1:0` and pass them in),
//! registers the start-up workers (not yet healthy), starts serving at once (`/health` answers,
//! `/readiness` is 503 until a worker is available), probes the workers once (those that answer
//! are in routing when `start` returns), spawns the health-check and eviction tasks, and serves until
//! [`GatewayHandle::shutdown`]: then it stops accepting, asks every connection to finish its
//! current request, and waits up to the grace period before dropping what is left.
//!
//! Threading: one accept loop deals connections round robin to the IO loops. With
//! `io_threads = N` (the CLI's default is one per CPU) each IO loop is an OS thread running a
//! single-threaded runtime with its own worker connections, so a request never crosses threads
//! (nginx's worker model; measured ~10-15% less CPU per request than tokio's work-stealing
//! runtime here). With 0, one IO loop runs on the caller's runtime (tests, embedding).
//!
//! - `io.rs`: the accept loop and the IO loops.
//! - `conn.rs`: one client connection (TLS, then `h1/`), and the Prometheus endpoint's.
//! - `h1/`: the client connection's HTTP/1.1 (heads, bodies, keep-alive, pipelining,
//!   `Expect`, the header timeout, graceful close).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;

use self::conn::serve_metrics;
use self::io::{accept_loop, spawn_io};
use crate::admission::Admission;
use crate::clock::Clock;
use crate::config::GatewayConfig;
use crate::error::GatewayError;
use crate::metrics::Metrics;
use crate::registry::{self, Registry};
use crate::routing::Router;
use crate::state::AppState;
use crate::{eviction, upstream};

mod conn;
mod h1;
mod io;

/// Entry point for embedding the gateway.
#[derive(Debug)]
pub struct Gateway;

impl Gateway {
    /// Starts building a gateway with this configuration.
    pub fn builder(config: GatewayConfig) -> GatewayBuilder {
        GatewayBuilder {
            config,
            listener: None,
            metrics_listener: None,
        }
    }
}

/// Collects the listeners, then [`GatewayBuilder::start`]s.
#[derive(Debug)]
pub struct GatewayBuilder {
    config: GatewayConfig,
    listener: Option<TcpListener>,
    metrics_listener: Option<TcpListener>,
}

impl GatewayBuilder {
    /// The listener for client traffic (required).
    pub fn listener(mut self, listener: TcpListener) -> Self {
        self.listener = Some(listener);
        self
    }

    /// A listener for the Prometheus endpoint; otherwise `config.prometheus_addr` is bound, if set.
    pub fn metrics_listener(mut self, listener: TcpListener) -> Self {
        self.metrics_listener = Some(listener);
        self
    }

    /// Validates, waits for the start-up workers, and starts serving.
    pub async fn start(self) -> Result<GatewayHandle, GatewayError> {
        let config = self.config;
        config.validate()?;
        let listener = self
            .listener
            .ok_or_else(|| GatewayError::Startup("no listener given".to_owned()))?;
        let router =
            Router::new(&config.router).map_err(|e| GatewayError::Config(e.to_string()))?;
        let metrics_listener = match (self.metrics_listener, config.prometheus_addr) {
            (Some(l), _) => Some(l),
            (None, Some(addr)) => Some(TcpListener::bind(addr).await.map_err(|e| {
                GatewayError::Startup(format!("--prometheus-host/--prometheus-port {addr}: {e}"))
            })?),
            (None, None) => None,
        };
        let clock = Arc::new(Clock::new());
        let client = upstream::HttpClient::new(crate::tls::connector(&config.tls)?);
        let tls = crate::tls::acceptor(&config.tls)?;
        let registry = Arc::new(Registry::new(
            config.breaker.clone(),
            config.health.clone(),
            clock.clone(),
        ));
        let starting = registry::register_startup(&registry, &config.worker_urls)?;
        let (pd, pd_starting) = match &config.pd {
            Some(pd) => {
                let (legs, starting) = crate::pd::PdLegs::new(
                    pd,
                    &config.router,
                    config.breaker.clone(),
                    config.health.clone(),
                    clock.clone(),
                )?;
                (Some(legs), starting)
            }
            None => (None, Vec::new()),
        };
        let metrics = Arc::new(Metrics::new());
        let store = match &config.sticky_store {
            Some(s) => Some(Arc::new(
                crate::store::Store::new(s, config.router.max_idle_secs, metrics.store.clone())
                    .map_err(GatewayError::Config)?,
            )),
            None => None,
        };
        let admission = config
            .admission
            .enabled()
            .then(|| Admission::new(config.admission, metrics.admission.clone()));
        let body_budget = crate::request_body::BodyBudget::new(
            config.buffered_body_budget_mb << 20,
            metrics.body_budget.clone(),
        );
        let chains = crate::chains::Chains::new(
            config.router.max_sticky_keys,
            config.router.max_idle_secs,
            metrics.chains.clone(),
        );
        let state = Arc::new(AppState {
            routing_rng: crate::rng::RoutingRng::new(config.routing_seed),
            chains,
            body_budget,
            tls,
            store,
            admission,
            router,
            registry: registry.clone(),
            client: client.clone(),
            metrics,
            clock: clock.clone(),
            config,
            pd,
        });
        let addr = listener.local_addr()?;
        let metrics_addr = metrics_listener
            .as_ref()
            .map(TcpListener::local_addr)
            .transpose()?;
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut background = JoinSet::new();
        crate::store::start(&state, &mut background).await;
        if let Some(d) = state.config.discovery.clone() {
            let fleet = crate::discovery::Fleet {
                registry: state.registry.clone(),
                client: state.client.clone(),
                probe_timeout: state.config.health.timeout,
                metrics: state.metrics.discovery.clone(),
            };
            background.spawn(crate::discovery::run(fleet, d));
        }
        if let Some(l) = metrics_listener {
            background.spawn(serve_metrics(l, state.clone(), stop_rx.clone()));
        }
        let io = spawn_io(&state, state.config.io_threads, &stop_rx)?;
        let (health_tx, health_rx) = oneshot::channel::<Vec<tokio::task::JoinHandle<()>>>();
        let evict = eviction::spawn(state.clone());
        let task = tokio::spawn({
            async move {
                accept_loop(listener, io, stop_rx).await;
                for health in health_rx.await.unwrap_or_default() {
                    health.abort();
                }
                if let Some(e) = evict {
                    e.abort();
                }
                background.shutdown().await;
            }
        });
        let scheme = if state.tls.is_some() { "https" } else { "http" };
        tracing::info!(%addr, scheme, ?metrics_addr, policy = state.config.router.policy.as_str(), "berth gateway listening");
        // Serving already: probe the start-up workers once (each that answers is in routing when
        // this returns), then leave the rest to the health checks.
        let waiting =
            registry::first_round(&registry, &client, starting, state.config.health.timeout).await;
        if !waiting.is_empty() {
            let list = waiting.iter().map(|u| &**u).collect::<Vec<_>>().join(" ");
            tracing::warn!(waiting = %list, "serving while waiting for workers to answer GET /health");
        }
        let health = registry::spawn_health_checks(
            registry,
            client.clone(),
            state.config.health.clone(),
            state.config.worker_startup_timeout,
        );
        let mut health = vec![health];
        let router = &state.config.router;
        if state.config.load_monitor.runs(
            router.overload.enabled,
            router.policy == crate::routing::PolicyKind::Agentic,
        ) {
            health.push(registry::spawn_load_monitor(
                state.registry.clone(),
                client.clone(),
                state.config.load_monitor.interval,
                state.config.health.timeout,
            ));
        }
        if let Some(pd) = &state.pd {
            health.push(
                pd.start_health(
                    &state.config.health,
                    state.config.worker_startup_timeout,
                    &client,
                    pd_starting,
                )
                .await,
            );
        }
        let _ = health_tx.send(health);
        Ok(GatewayHandle {
            addr,
            metrics_addr,
            stop: stop_tx,
            task,
            state,
        })
    }
}

/// A running gateway.
#[derive(Debug)]
pub struct GatewayHandle {
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    state: Arc<AppState>,
}

impl GatewayHandle {
    /// Where client traffic goes.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where the Prometheus endpoint listens, if it runs.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The gateway's clock (tests advance it to make pins idle).
    pub fn clock(&self) -> &Clock {
        &self.state.clock
    }

    /// Runs one pin-eviction sweep now; returns the number of idle pins removed.
    pub async fn sweep_now(&self) -> usize {
        eviction::sweep(&self.state).await
    }

    /// The current metrics in Prometheus text format.
    pub fn metrics_text(&self) -> String {
        self.state.render_metrics()
    }

    /// Stops accepting, drains in-flight requests within the grace period, and returns.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Runs a gateway on `listener` until `shutdown` resolves, then drains (the CLI's path).
pub async fn serve(
    listener: TcpListener,
    config: GatewayConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), GatewayError> {
    let handle = Gateway::builder(config).listener(listener).start().await?;
    shutdown.await;
    handle.shutdown().await;
    Ok(())
}

//! `SimWorker::builder()`: configure a worker and start it on a listener the caller bound.
//!
//! Taking a bound listener (instead of a port) means tests bind `127.0.0.1:0`, read the port, and
//! never race another process for it.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::config::SimConfig;
use crate::faults::Faults;
use crate::handle::SimHandle;
use crate::pd::PdMode;
use crate::state::Shared;
use crate::tls::TlsPem;
use crate::{SimError, server};

/// The simulated worker. Start one with [`SimWorker::builder`].
#[derive(Debug)]
pub struct SimWorker;

impl SimWorker {
    /// A builder with the defaults of [`SimConfig::default`].
    pub fn builder() -> SimWorkerBuilder {
        SimWorkerBuilder {
            config: SimConfig::default(),
        }
    }
}

/// Configures and starts a [`SimWorker`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until spawned"]
pub struct SimWorkerBuilder {
    config: SimConfig,
}

impl SimWorkerBuilder {
    /// Starts from a whole configuration.
    pub fn config(mut self, config: SimConfig) -> Self {
        self.config = config;
        self
    }

    /// Identity reported in `x-sim-worker-id` (default `sim-<port>`).
    pub fn worker_id(mut self, id: impl Into<String>) -> Self {
        self.config.worker_id = Some(id.into());
        self
    }

    /// Models served (the first is the default); others get 404.
    pub fn models<S: Into<String>>(mut self, models: impl IntoIterator<Item = S>) -> Self {
        self.config.models = models.into_iter().map(Into::into).collect();
        self
    }

    /// Serves exactly one model.
    pub fn model(self, model: impl Into<String>) -> Self {
        self.models([model.into()])
    }

    /// KV cache capacity in tokens.
    pub fn kv_capacity_tokens(mut self, tokens: u64) -> Self {
        self.config.kv_capacity_tokens = tokens;
        self
    }

    /// Prefill speed for uncached tokens.
    pub fn prefill_tokens_per_sec(mut self, tokens_per_sec: f64) -> Self {
        self.config.latency.prefill_tokens_per_sec = tokens_per_sec;
        self
    }

    /// Cost of a cached prompt token relative to an uncached one (0..=1).
    pub fn cached_token_cost(mut self, fraction: f64) -> Self {
        self.config.latency.cached_token_cost = fraction;
        self
    }

    /// Decode step time with a batch of one.
    pub fn decode_step(mut self, step: Duration) -> Self {
        self.config.latency.decode_step = step;
        self
    }

    /// Added to each decode step per request in the batch.
    pub fn decode_step_per_running(mut self, step: Duration) -> Self {
        self.config.latency.decode_step_per_running = step;
        self
    }

    /// Multiplies every delay; 0 makes the worker instant.
    pub fn time_scale(mut self, scale: f64) -> Self {
        self.config.latency.time_scale = scale;
        self
    }

    /// Requests running at once; the rest queue.
    pub fn max_running(mut self, n: usize) -> Self {
        self.config.max_running = n;
        self
    }

    /// Longest prompt plus generation a request may ask for (longer: 400).
    pub fn context_length(mut self, tokens: u64) -> Self {
        self.config.context_length = tokens;
        self
    }

    /// Tokens generated when a request sets no limit.
    pub fn default_max_tokens(mut self, n: u32) -> Self {
        self.config.default_max_tokens = n;
        self
    }

    /// How many received requests to remember for [`SimHandle::received`] (0: none).
    pub fn record_capacity(mut self, n: usize) -> Self {
        self.config.record_capacity = n;
        self
    }

    /// Faults injected from the start.
    pub fn faults(mut self, faults: Faults) -> Self {
        self.config.faults = faults;
        self
    }

    /// The role in a prefill/decode pair: a prefill worker also opens a bootstrap listener
    /// (on the main listener's address, at [`Self::bootstrap_port`] or a free port).
    pub fn mode(mut self, mode: PdMode) -> Self {
        self.config.mode = mode;
        self
    }

    /// Prefill mode: the bootstrap listener's port (default: a free one, see
    /// [`SimHandle::bootstrap_port`]).
    pub fn bootstrap_port(mut self, port: u16) -> Self {
        self.config.bootstrap_port = Some(port);
        self
    }

    /// Decode mode: how long a request waits for its room's KV cache.
    pub fn bootstrap_timeout(mut self, timeout: Duration) -> Self {
        self.config.bootstrap_timeout = timeout;
        self
    }

    /// Serves HTTPS with this identity ([`SimHandle::url`] is then `https://`).
    pub fn tls(mut self, pem: TlsPem) -> Self {
        self.config.tls = Some(pem);
        self
    }

    /// Starts the worker on `listener`; `Err` if the configuration is invalid.
    pub fn try_spawn(self, listener: TcpListener) -> Result<SimHandle, SimError> {
        self.config.validate()?;
        let addr = listener.local_addr()?;
        let bootstrap = if self.config.mode == PdMode::Prefill {
            let l =
                std::net::TcpListener::bind((addr.ip(), self.config.bootstrap_port.unwrap_or(0)))?;
            l.set_nonblocking(true)?;
            Some(TcpListener::from_std(l)?)
        } else {
            None
        };
        let bootstrap_addr = bootstrap
            .as_ref()
            .map(TcpListener::local_addr)
            .transpose()?;
        let worker_id = self
            .config
            .worker_id
            .clone()
            .unwrap_or_else(|| format!("sim-{}", addr.port()));
        let tls = self
            .config
            .tls
            .as_ref()
            .map(crate::tls::acceptor)
            .transpose()?;
        let shared = Arc::new(Shared::new(worker_id, self.config));
        if let Some(l) = bootstrap {
            tokio::spawn(crate::pd::serve_bootstrap(l, Arc::clone(&shared)));
        }
        let task = tokio::spawn(server::serve(listener, Arc::clone(&shared), tls));
        Ok(SimHandle::new(addr, shared, task, bootstrap_addr))
    }

    /// Starts the worker on `listener`. Must be called within a tokio runtime.
    ///
    /// # Panics
    /// If the configuration is invalid (use [`SimWorkerBuilder::try_spawn`] to handle that).
    pub fn spawn(self, listener: TcpListener) -> SimHandle {
        match self.try_spawn(listener) {
            Ok(handle) => handle,
            Err(err) => panic!("cannot start sim worker: {err}"),
        }
    }

    /// Binds `127.0.0.1:0` and starts the worker there: the test-harness shortcut.
    ///
    /// # Panics
    /// If binding fails or the configuration is invalid.
    pub async fn spawn_on_loopback(self) -> SimHandle {
        match TcpListener::bind(("127.0.0.1", 0)).await {
            Ok(listener) => self.spawn(listener),
            Err(err) => panic!("cannot bind 127.0.0.1:0 for a sim worker: {err}"),
        }
    }
}

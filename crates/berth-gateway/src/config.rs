//! The gateway's typed configuration, validated once.
//!
//! [`GatewayConfig`] is what [`crate::Gateway`] runs on. It is built from the command line (and
//! `--config FILE`) by [`GatewayConfig::from_args`], or constructed directly by embedders and
//! tests (`GatewayConfig::new(urls)` then adjust the pub fields). Either way [`GatewayConfig::validate`]
//! runs before anything starts, and every refusal names the flag to fix.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

pub use crate::registry::{BreakerSettings, HealthSettings, LoadMonitorSettings};
pub use crate::request_body::BodyTimeouts;

use crate::admission::AdmissionSettings;
use crate::discovery::DiscoverySettings;
use crate::error::GatewayError;
use crate::pd::PdSettings;
use crate::routing::{Router, RouterOptions};
use crate::store::StoreSettings;
use crate::tls::TlsSettings;
use crate::upstream::WorkerAddr;

/// The longest time any setting may name (100 years): deadlines are `now + setting`, and a
/// larger value would overflow the clock instead of meaning "never".
pub const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 86_400);

/// Defaults shared by the CLI help, the docs and [`GatewayConfig::new`].
pub mod defaults {
    /// `--host` (SMG's: every interface).
    pub const HOST: &str = "0.0.0.0";
    /// `--port`.
    pub const PORT: u16 = 30000;
    /// `--max-payload-size` (bytes).
    pub const MAX_PAYLOAD_SIZE: usize = 512 * 1024 * 1024;
    /// `--buffered-body-budget-mb`.
    pub const BUFFERED_BODY_BUDGET_MB: usize = 256;
    /// `--request-timeout-secs`.
    pub const REQUEST_TIMEOUT_SECS: u64 = 1800;
    /// `--retry-max-retries`.
    pub const RETRY_MAX_RETRIES: u32 = 5;
    /// `--cb-failure-threshold`.
    pub const CB_FAILURE_THRESHOLD: u32 = 10;
    /// `--cb-success-threshold`.
    pub const CB_SUCCESS_THRESHOLD: u32 = 3;
    /// `--cb-timeout-duration-secs`.
    pub const CB_TIMEOUT_DURATION_SECS: u64 = 60;
    /// `--health-check-interval-secs`.
    pub const HEALTH_CHECK_INTERVAL_SECS: u64 = 60;
    /// `--health-check-timeout-secs`.
    pub const HEALTH_CHECK_TIMEOUT_SECS: u64 = 5;
    /// `--health-failure-threshold`.
    pub const HEALTH_FAILURE_THRESHOLD: u32 = 3;
    /// `--health-success-threshold`.
    pub const HEALTH_SUCCESS_THRESHOLD: u32 = 2;
    /// `--worker-startup-timeout-secs`.
    pub const WORKER_STARTUP_TIMEOUT_SECS: u64 = 1800;
    /// `--prometheus-host` when `--host` is IPv4 (SMG's: every interface of `--host`'s family).
    pub const PROMETHEUS_HOST: &str = "0.0.0.0";
    /// `--prometheus-port`.
    pub const PROMETHEUS_PORT: u16 = 29000;
    /// `--header-read-timeout-secs`.
    pub const HEADER_READ_TIMEOUT_SECS: u64 = 30;
    /// `--load-monitor-interval` (SMG's, seconds).
    pub const LOAD_MONITOR_INTERVAL_SECS: u64 = 10;
    pub use crate::store::defaults::{
        STICKY_STORE_PREFIX, STICKY_STORE_SYNC_MS, STICKY_STORE_TIMEOUT_MS,
    };
    /// `--shutdown-grace-period-secs`.
    pub const SHUTDOWN_GRACE_PERIOD_SECS: u64 = 180;
    /// `--request-body-timeout-secs`.
    pub const REQUEST_BODY_TIMEOUT_SECS: u64 = 300;
    /// `--request-body-idle-timeout-secs`.
    pub const REQUEST_BODY_IDLE_TIMEOUT_SECS: u64 = 30;
    /// `--queue-size` (SMG's).
    pub const QUEUE_SIZE: usize = 100;
    /// `--queue-timeout-secs` (SMG's).
    pub const QUEUE_TIMEOUT_SECS: u64 = 60;
}

/// A string that never shows up in `Debug` output or logs (API keys).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Everything the gateway needs to run.
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    /// Workers registered at start (`--worker-urls`).
    pub worker_urls: Vec<String>,
    /// Routing options handed to the core (policy, override, assignment mode, eviction, ...).
    pub router: RouterOptions,
    /// Largest accepted request body, bytes (`--max-payload-size`).
    pub max_payload_size: usize,
    /// Bytes all buffered request bodies may hold together, MiB (`--buffered-body-budget-mb`).
    pub buffered_body_budget_mb: usize,
    /// Time allowed for a worker's response headers (`--request-timeout-secs`).
    pub request_timeout: Duration,
    /// Extra attempts on other workers (`--retry-max-retries`).
    pub retry_max_retries: u32,
    /// Circuit breaker.
    pub breaker: BreakerSettings,
    /// Health checks.
    pub health: HealthSettings,
    /// How long start-up waits for the `--worker-urls` to answer `/health`.
    pub worker_startup_timeout: Duration,
    /// The load monitor (`--load-monitor-interval`, `--disable-load-monitoring`).
    pub load_monitor: LoadMonitorSettings,
    /// Inbound auth for generation routes (`--api-key`).
    pub api_key: Option<Secret>,
    /// Auth for the `/workers` admin API (`--admin-api-key`).
    pub admin_api_key: Option<Secret>,
    /// Where the Prometheus endpoint listens when the CLI binds it; `None` disables it.
    pub prometheus_addr: Option<SocketAddr>,
    /// How long in-flight requests may run after shutdown starts.
    pub shutdown_grace: Duration,
    /// Dedicated IO threads (each a single-threaded runtime); 0 serves on the caller's runtime.
    pub io_threads: usize,
    /// Close a client connection whose request head (or, when idle, whose next request) does
    /// not arrive within this time; `None` never closes it.
    pub header_read_timeout: Option<Duration>,
    /// The shared pin store (`--sticky-store`); `None` keeps pins in this replica only.
    pub sticky_store: Option<StoreSettings>,
    /// Limits on how long the gateway waits for a client's request body.
    pub body_timeouts: BodyTimeouts,
    /// Admission control for generation routes (off unless a limit is set).
    pub admission: AdmissionSettings,
    /// `--pd-disaggregation`: the prefill workers and policy (the decode workers are
    /// `worker_urls`, the decode policy `router.policy`); `None` in regular mode.
    pub pd: Option<crate::pd::PdSettings>,
    /// Service discovery (`--discovery-provider`); `None`: workers come from `--worker-urls` and
    /// the admin API only.
    pub discovery: Option<DiscoverySettings>,
    /// TLS: HTTPS towards clients and the trust and identity used with `https://` workers.
    pub tls: TlsSettings,
    /// Seed of the generator routing draws from (`--routing-seed`); `None` seeds each IO
    /// thread's generator from the clock.
    pub routing_seed: Option<u64>,
}

impl GatewayConfig {
    /// A configuration with SMG's defaults for these workers.
    pub fn new(worker_urls: Vec<String>) -> Self {
        use defaults::*;
        Self {
            worker_urls,
            router: RouterOptions::default(),
            max_payload_size: MAX_PAYLOAD_SIZE,
            buffered_body_budget_mb: BUFFERED_BODY_BUDGET_MB,
            request_timeout: Duration::from_secs(REQUEST_TIMEOUT_SECS),
            retry_max_retries: RETRY_MAX_RETRIES,
            breaker: BreakerSettings {
                failure_threshold: CB_FAILURE_THRESHOLD,
                success_threshold: CB_SUCCESS_THRESHOLD,
                open_timeout: Duration::from_secs(CB_TIMEOUT_DURATION_SECS),
            },
            health: HealthSettings {
                interval: Duration::from_secs(HEALTH_CHECK_INTERVAL_SECS),
                timeout: Duration::from_secs(HEALTH_CHECK_TIMEOUT_SECS),
                failure_threshold: HEALTH_FAILURE_THRESHOLD,
                success_threshold: HEALTH_SUCCESS_THRESHOLD,
            },
            worker_startup_timeout: Duration::from_secs(WORKER_STARTUP_TIMEOUT_SECS),
            load_monitor: LoadMonitorSettings {
                interval: Duration::from_secs(LOAD_MONITOR_INTERVAL_SECS),
                always: true,
            },
            api_key: None,
            admin_api_key: None,
            prometheus_addr: None,
            shutdown_grace: Duration::from_secs(SHUTDOWN_GRACE_PERIOD_SECS),
            io_threads: 0,
            header_read_timeout: Some(Duration::from_secs(HEADER_READ_TIMEOUT_SECS)),
            sticky_store: None,
            body_timeouts: BodyTimeouts {
                total: Some(Duration::from_secs(REQUEST_BODY_TIMEOUT_SECS)),
                idle: Some(Duration::from_secs(REQUEST_BODY_IDLE_TIMEOUT_SECS)),
            },
            admission: AdmissionSettings {
                max_concurrent: None,
                queue_size: QUEUE_SIZE,
                queue_timeout: Duration::from_secs(QUEUE_TIMEOUT_SECS),
                rate: None,
            },
            pd: None,
            discovery: None,
            tls: TlsSettings::default(),
            routing_seed: None,
        }
    }

    /// Checks what the routing core does not: refuses with a message naming the flag.
    pub fn validate(&self) -> Result<(), GatewayError> {
        let bad = |flag: &str, why: &str| Err(GatewayError::Config(format!("{flag}: {why}")));
        if let Some(pd) = &self.pd {
            self.validate_pd(pd)?;
            if self.discovery.is_some() {
                return bad(
                    "--discovery-provider",
                    "not supported with --pd-disaggregation yet (list --prefill and --decode)",
                );
            }
        } else if self.worker_urls.is_empty() && self.discovery.is_none() {
            return bad(
                "--worker-urls",
                "at least one worker URL is required (or --discovery-provider)",
            );
        }
        if let Some(d) = &self.discovery {
            d.validate().map_err(GatewayError::Config)?;
        }
        self.tls.validate().map_err(GatewayError::Config)?;
        for url in &self.worker_urls {
            WorkerAddr::parse(url)
                .map_err(|e| GatewayError::Config(format!("--worker-urls: {e}")))?;
        }
        // The routing core validates its own options and names the flag.
        let router = Router::new(&self.router).map_err(|e| GatewayError::Config(e.to_string()))?;
        if let Some(store) = &self.sticky_store {
            store.validate().map_err(GatewayError::Config)?;
            if !router.keeps_pins() {
                return bad(
                    "--sticky-store",
                    "this policy keeps no pins to share (use --policy manual, or \
                     --routing-key-override with a policy other than consistent_hashing)",
                );
            }
        }
        if self.max_payload_size == 0 {
            return bad("--max-payload-size", "must be at least 1 byte");
        }
        if self.buffered_body_budget_mb == 0 || self.buffered_body_budget_mb > 1 << 30 {
            return bad(
                "--buffered-body-budget-mb",
                "must be between 1 and 1073741824",
            );
        }
        if self.request_timeout.is_zero() {
            return bad("--request-timeout-secs", "must be at least 1");
        }
        if self.breaker.failure_threshold == 0 {
            return bad("--cb-failure-threshold", "must be at least 1");
        }
        if self.breaker.success_threshold == 0 {
            return bad("--cb-success-threshold", "must be at least 1");
        }
        if self.breaker.open_timeout.is_zero() {
            return bad("--cb-timeout-duration-secs", "must be at least 1");
        }
        if self.load_monitor.interval.is_zero() {
            return bad("--load-monitor-interval", "must be at least 1");
        }
        if self.health.interval.is_zero() {
            return bad("--health-check-interval-secs", "must be at least 1");
        }
        if self.health.timeout.is_zero() {
            return bad("--health-check-timeout-secs", "must be at least 1");
        }
        if self.health.failure_threshold == 0 {
            return bad("--health-failure-threshold", "must be at least 1");
        }
        if self.health.success_threshold == 0 {
            return bad("--health-success-threshold", "must be at least 1");
        }
        if self.api_key.as_ref().is_some_and(|k| k.0.is_empty()) {
            return bad("--api-key", "must not be empty");
        }
        if self.admin_api_key.as_ref().is_some_and(|k| k.0.is_empty()) {
            return bad("--admin-api-key", "must not be empty");
        }
        self.validate_durations()?;
        let adm = &self.admission;
        if adm.max_concurrent == Some(0) {
            return bad(
                "--max-concurrent-requests",
                "must be at least 1 (-1 turns the limit off)",
            );
        }
        if adm.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
            return bad(
                "--rate-limit-tokens-per-second",
                "must be a positive number of requests per second",
            );
        }
        // One token must arrive within the longest wait the gateway can represent.
        if adm
            .rate
            .is_some_and(|r| r < 1.0 / MAX_DURATION.as_secs_f64())
        {
            return bad(
                "--rate-limit-tokens-per-second",
                "too small: one request per 100 years is the least",
            );
        }
        if adm.enabled() && adm.queue_size > 0 && adm.queue_timeout.is_zero() {
            return bad(
                "--queue-timeout-secs",
                "must be at least 1 while requests may queue (or set --queue-size 0)",
            );
        }
        Ok(())
    }

    /// Refuses a PD configuration that cannot run, naming the flag.
    fn validate_pd(&self, pd: &PdSettings) -> Result<(), GatewayError> {
        let config = self;
        let bad = |flag: &str, why: String| Err(GatewayError::Config(format!("{flag}: {why}")));
        if pd.prefill.is_empty() {
            return bad(
                "--prefill",
                "--pd-disaggregation needs at least one".to_owned(),
            );
        }
        if config.worker_urls.is_empty() {
            return bad(
                "--decode",
                "--pd-disaggregation needs at least one".to_owned(),
            );
        }
        for p in &pd.prefill {
            if let Err(e) = WorkerAddr::parse(&p.url) {
                return bad("--prefill", e);
            }
        }
        for url in &config.worker_urls {
            if let Err(e) = WorkerAddr::parse(url) {
                return bad("--decode", e);
            }
        }
        Router::new(&pd.router_options(&config.router))
            .map_err(|e| GatewayError::Config(format!("--prefill-policy: {e}")))?;
        if config.sticky_store.is_some() {
            return bad(
                "--sticky-store",
                "not supported with --pd-disaggregation yet (the prefill leg's pins would stay local)"
                    .to_owned(),
            );
        }
        Ok(())
    }

    /// Refuses a time setting longer than [`MAX_DURATION`], naming its flag.
    fn validate_durations(&self) -> Result<(), GatewayError> {
        let secs = |s: u64| Some(Duration::from_secs(s));
        let mut settings = vec![
            ("--request-timeout-secs", Some(self.request_timeout)),
            (
                "--cb-timeout-duration-secs",
                Some(self.breaker.open_timeout),
            ),
            ("--health-check-interval-secs", Some(self.health.interval)),
            ("--health-check-timeout-secs", Some(self.health.timeout)),
            ("--load-monitor-interval", Some(self.load_monitor.interval)),
            (
                "--worker-startup-timeout-secs",
                Some(self.worker_startup_timeout),
            ),
            ("--shutdown-grace-period-secs", Some(self.shutdown_grace)),
            ("--header-read-timeout-secs", self.header_read_timeout),
            ("--request-body-timeout-secs", self.body_timeouts.total),
            ("--request-body-idle-timeout-secs", self.body_timeouts.idle),
            ("--queue-timeout-secs", Some(self.admission.queue_timeout)),
            ("--max-idle-secs", secs(self.router.max_idle_secs)),
            (
                "--eviction-interval-secs",
                secs(self.router.eviction_interval_secs),
            ),
        ];
        if let Some(store) = &self.sticky_store {
            settings.push(("--sticky-store-timeout-ms", Some(store.timeout)));
            settings.push(("--sticky-store-sync-ms", Some(store.sync_every)));
        }
        if let Some(d) = &self.discovery {
            settings.push(("--discovery-check-interval-secs", Some(d.check_interval)));
        }
        for (flag, value) in settings {
            if value.is_some_and(|v| v > MAX_DURATION) {
                return Err(GatewayError::Config(format!(
                    "{flag}: too large: {} seconds (100 years) is the most",
                    MAX_DURATION.as_secs()
                )));
            }
        }
        Ok(())
    }
}

//! The connection to the store: every call is bounded by `--sticky-store-timeout-ms`, and the
//! first failure marks the store down, so later requests skip it at no cost until a background
//! probe (with exponential backoff) reaches it again. An outage is logged once when it starts
//! and once when it ends, never per request.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::Notify;

use super::metrics::{OpLabels, StoreMetrics, op};
use super::settings::{StoreSettings, redact};

/// Backoff of the reconnection probe: from this, doubling ...
const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// ... up to this.
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// A shared, self-healing connection to the store.
pub(crate) struct Link {
    pub(crate) client: redis::Client,
    /// The shared connection (the main runtime's tasks; IO threads until theirs is made).
    conn: ArcSwapOption<ConnectionManager>,
    /// Bumped with each new shared connection: the IO threads' connections are made again.
    generation: AtomicU64,
    up: AtomicBool,
    pub(crate) timeout: Duration,
    pub(crate) metrics: Arc<StoreMetrics>,
    wake: Notify,
    shown_url: String,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("url", &self.shown_url)
            .field("up", &self.is_up())
            .finish_non_exhaustive()
    }
}

impl Link {
    pub(crate) fn new(
        settings: &StoreSettings,
        metrics: Arc<StoreMetrics>,
    ) -> Result<Self, String> {
        let client = redis::Client::open(settings.url.as_str())
            .map_err(|e| format!("--sticky-store: {e}"))?;
        Ok(Self {
            client,
            conn: ArcSwapOption::empty(),
            generation: AtomicU64::new(0),
            up: AtomicBool::new(false),
            timeout: settings.timeout,
            metrics,
            wake: Notify::new(),
            shown_url: redact(&settings.url),
        })
    }

    /// Whether the store answered last time (calls are skipped while it did not).
    pub(crate) fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// Runs `f` on the connection within the timeout, timing it under `op`. `None` when the
    /// store is down (not tried) or the call failed (then the store is marked down).
    pub(crate) async fn call<T, F, Fut>(self: &Arc<Self>, op: &'static str, f: F) -> Option<T>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        self.call_within(op, self.timeout, f).await
    }

    /// [`Link::call`] with another bound (the batched refresh sends many commands at once).
    pub(crate) async fn call_within<T, F, Fut>(
        self: &Arc<Self>,
        op: &'static str,
        bound: Duration,
        f: F,
    ) -> Option<T>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        if !self.is_up() {
            return None;
        }
        let generation = self.generation.load(Ordering::Relaxed);
        let conn = match super::local::thread_conn(self, generation) {
            Some(c) => c,
            None => (*self.conn.load_full()?).clone(),
        };
        let start = Instant::now();
        let result = tokio::time::timeout(bound, f(conn)).await;
        self.metrics
            .latency
            .get_or_create(&OpLabels { op })
            .observe(start.elapsed().as_secs_f64());
        match result {
            Ok(Ok(v)) => Some(v),
            Ok(Err(e)) => {
                self.failed(op, &e.to_string());
                None
            }
            Err(_) => {
                self.failed(op, "timed out");
                None
            }
        }
    }

    /// Counts a failure and marks the store down (logging only the first of an outage).
    pub(crate) fn failed(&self, op: &'static str, why: &str) {
        self.metrics.errors.get_or_create(&OpLabels { op }).inc();
        if self.up.swap(false, Ordering::Relaxed) {
            self.metrics.up.set(0);
            tracing::warn!(
                store = %self.shown_url,
                op,
                error = why,
                "sticky store unavailable; serving from local pins until it answers again"
            );
            self.wake.notify_one();
        }
    }

    /// One connection attempt: a fresh connection manager (connect and response timeouts set)
    /// and a `PING`, within the timeout.
    pub(super) async fn connect(&self) -> Result<ConnectionManager, String> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(1);
        let attempt = async {
            let mut conn = ConnectionManager::new_with_config(self.client.clone(), config)
                .await
                .map_err(|e| e.to_string())?;
            redis::cmd("PING")
                .query_async::<String>(&mut conn)
                .await
                .map_err(|e| e.to_string())?;
            Ok(conn)
        };
        // connecting may take a few round trips (TLS, HELLO, AUTH): allow some slack
        match tokio::time::timeout(self.timeout * 4, attempt).await {
            Ok(r) => r,
            Err(_) => Err("timed out".to_owned()),
        }
    }

    /// Makes `conn` the shared connection (a new generation) and marks the store up.
    fn install(&self, conn: ConnectionManager) {
        self.conn.store(Some(Arc::new(conn)));
        self.generation.fetch_add(1, Ordering::Relaxed);
        self.up.store(true, Ordering::Relaxed);
        self.metrics.up.set(1);
    }

    /// Connects now (start-up); logs once if the store cannot be reached.
    pub(crate) async fn start(&self) {
        match self.connect().await {
            Ok(conn) => {
                self.install(conn);
                tracing::info!(store = %self.shown_url, "sticky store connected");
            }
            Err(e) => {
                self.metrics
                    .errors
                    .get_or_create(&OpLabels { op: op::CONNECT })
                    .inc();
                tracing::warn!(
                    store = %self.shown_url,
                    error = %e,
                    "sticky store unreachable at start-up; serving from local pins until it answers"
                );
            }
        }
    }

    /// The reconnection loop: while the store is down, tries again with exponential backoff;
    /// `on_up` runs after each recovery.
    pub(crate) async fn run(self: Arc<Self>, on_up: impl Fn()) {
        let mut outage_start = (!self.is_up()).then(Instant::now);
        let mut backoff = BACKOFF_MIN;
        loop {
            if self.is_up() {
                self.wake.notified().await;
                if self.is_up() {
                    continue;
                }
                outage_start = Some(Instant::now());
                backoff = BACKOFF_MIN;
            }
            tokio::time::sleep(backoff).await;
            match self.connect().await {
                Ok(conn) => {
                    self.install(conn);
                    tracing::info!(
                        store = %self.shown_url,
                        outage_secs = outage_start.map_or(0.0, |s| s.elapsed().as_secs_f64()),
                        "sticky store reachable again; writing local pins back as they are used"
                    );
                    on_up();
                }
                Err(e) => {
                    self.metrics
                        .errors
                        .get_or_create(&OpLabels { op: op::CONNECT })
                        .inc();
                    tracing::debug!(error = %e, "sticky store still unreachable");
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
            }
        }
    }
}

//! State shared by the session tasks of one run.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::config::BenchConfig;
use crate::metrics::RequestRecord;
use crate::rng::Rng;
use crate::transport::HttpClient;

/// Shared by every task of a run.
#[derive(Debug)]
pub struct RunContext {
    /// The validated configuration.
    pub config: BenchConfig,
    /// The pooled client.
    pub client: HttpClient,
    /// The shared system prompts (none when `--shared-system-prompt-length` is 0).
    pub system_prompts: Vec<String>,
    /// The run's seed (drawn from the OS when not given).
    pub seed_value: u64,
    /// A generator from that seed, never advanced: sessions derive their own from it.
    pub seed: Rng,
    /// When the run started.
    pub started: Instant,
    /// Requests sent (also the next sequence number).
    pub sent: AtomicU64,
    /// Requests finished successfully.
    pub succeeded: AtomicU64,
    /// Requests finished with an error.
    pub failed: AtomicU64,
    /// Sessions (roots and children) running now.
    pub live_sessions: AtomicU64,
    /// Most sessions running at once so far.
    pub peak_live_sessions: AtomicU64,
    stop_tx: watch::Sender<bool>,
    records: Mutex<Vec<RequestRecord>>,
}

impl RunContext {
    /// A context for `config`, starting now.
    pub fn new(config: BenchConfig, client: HttpClient) -> Self {
        let seed = config.seed.unwrap_or_else(|| {
            let bytes = uuid::Uuid::new_v4().into_bytes();
            u64::from_le_bytes([
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
            ])
        });
        let system_prompts = config.shape.system_prompts(seed);
        let (stop_tx, _) = watch::channel(false);
        Self {
            config,
            client,
            system_prompts,
            seed_value: seed,
            seed: Rng::new(seed),
            started: Instant::now(),
            sent: AtomicU64::new(0),
            succeeded: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            live_sessions: AtomicU64::new(0),
            peak_live_sessions: AtomicU64::new(0),
            stop_tx,
            records: Mutex::new(Vec::new()),
        }
    }

    /// Asks every session to stop before its next turn.
    pub fn stop(&self) {
        self.stop_tx.send_replace(true);
    }

    /// Whether the run is stopping.
    pub fn stopped(&self) -> bool {
        *self.stop_tx.borrow()
    }

    /// Sleeps for `d` unless the run stops first; returns whether it is still running.
    pub async fn sleep(&self, d: Duration) -> bool {
        if d.is_zero() {
            return !self.stopped();
        }
        let mut rx = self.stop_tx.subscribe();
        if *rx.borrow() {
            return false;
        }
        tokio::select! {
            _ = tokio::time::sleep(d) => !self.stopped(),
            _ = rx.wait_for(|stopped| *stopped) => false,
        }
    }

    /// Resolves when the run is asked to stop.
    pub async fn stopping(&self) {
        let mut rx = self.stop_tx.subscribe();
        // The sender lives in `self`, so the channel cannot close while we wait.
        let _ = rx.wait_for(|stopped| *stopped).await;
    }

    /// Milliseconds since the run started.
    pub fn elapsed_ms(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.started).as_secs_f64() * 1000.0
    }

    /// Counts a session as running until the returned guard drops.
    pub fn session_started(&self) -> LiveSession<'_> {
        let now = self.live_sessions.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak_live_sessions.fetch_max(now, Ordering::Relaxed);
        LiveSession(self)
    }

    /// Stores one record.
    pub fn push(&self, record: RequestRecord) {
        if record.ok {
            self.succeeded.fetch_add(1, Ordering::Relaxed);
        } else {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        if let Ok(mut records) = self.records.lock() {
            records.push(record);
        }
    }

    /// Takes every record stored so far, in send order.
    pub fn take_records(&self) -> Vec<RequestRecord> {
        let mut records = self
            .records
            .lock()
            .map(|mut r| std::mem::take(&mut *r))
            .unwrap_or_default();
        records.sort_by_key(|r| r.seq);
        records
    }
}

/// A running session, counted in [`RunContext::live_sessions`] until dropped.
#[derive(Debug)]
pub struct LiveSession<'a>(&'a RunContext);

impl Drop for LiveSession<'_> {
    fn drop(&mut self) {
        self.0.live_sessions.fetch_sub(1, Ordering::Relaxed);
    }
}

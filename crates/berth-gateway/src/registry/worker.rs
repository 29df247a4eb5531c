//! One registered worker.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use http::HeaderValue;

use crate::routing::{Breaker, HealthTracker, WorkerId, WorkerStats};
use crate::upstream::WorkerAddr;

/// What a worker's `GET /v1/models` says about one model besides its id (`created`,
/// `owned_by`): the gateway's own `/v1/models` and `/workers` show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ModelCard {
    pub(crate) id: Arc<str>,
    /// Unix seconds, 0 when the worker did not say.
    pub(crate) created: u64,
    /// The serving runtime as the worker names itself (`sglang`, `vllm`, ...).
    pub(crate) owned_by: Option<Arc<str>>,
}

/// Health and breaker state; changed by probes and request outcomes.
#[derive(Debug)]
pub(crate) struct WorkerState {
    pub(crate) health: HealthTracker,
    pub(crate) breaker: Breaker,
    pub(crate) models: Vec<Arc<str>>,
}

/// A registered worker. Shared by the request path through the [`super::View`].
#[derive(Debug)]
pub(crate) struct Worker {
    pub(crate) id: WorkerId,
    /// The URL exactly as registered: the `x-smg-routed-worker-id` value and the metric label.
    pub(crate) url: Arc<str>,
    pub(crate) url_header: HeaderValue,
    /// `Host` for proxied requests.
    pub(crate) host_header: HeaderValue,
    pub(crate) addr: WorkerAddr,
    pub(crate) stats: Arc<WorkerStats>,
    /// The breaker is closed with no failure counted (a success needs no update).
    pub(crate) breaker_clean: AtomicBool,
    /// A start-up worker that has not answered yet: its first good probe brings it in.
    awaited: AtomicBool,
    state: Mutex<WorkerState>,
    /// The model cards from the worker's last `GET /v1/models` that listed any.
    cards: Mutex<Vec<ModelCard>>,
}

impl Worker {
    pub(crate) fn new(id: WorkerId, url: &str, state: WorkerState) -> Result<Self, String> {
        let addr = WorkerAddr::parse(url)?;
        let url_header = HeaderValue::from_str(url)
            .map_err(|_| format!("`{url}` is not a valid header value"))?;
        let host_header = addr
            .host_header()
            .ok_or_else(|| format!("`{url}` has an invalid host"))?;
        Ok(Self {
            id,
            url: Arc::from(url),
            url_header,
            host_header,
            addr,
            stats: Arc::default(),
            breaker_clean: AtomicBool::new(true),
            awaited: AtomicBool::new(false),
            state: Mutex::new(state),
            cards: Mutex::default(),
        })
    }

    /// Whether this start-up worker has not answered yet.
    pub(crate) fn awaited(&self) -> bool {
        self.awaited.load(Ordering::Relaxed)
    }

    /// Marks a start-up worker as awaited (registered before its first probe).
    pub(crate) fn await_startup(&self) {
        self.awaited.store(true, Ordering::Relaxed);
    }

    /// No longer awaited (it came up, or start-up waiting is over).
    pub(crate) fn stop_awaiting(&self) {
        self.awaited.store(false, Ordering::Relaxed);
    }

    /// The model cards the worker listed (empty until it answered `GET /v1/models`).
    pub(crate) fn cards(&self) -> Vec<ModelCard> {
        self.cards.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Records the cards of a `GET /v1/models` answer (an empty answer keeps the old ones).
    pub(crate) fn set_cards(&self, cards: Vec<ModelCard>) {
        if !cards.is_empty() {
            *self.cards.lock().unwrap_or_else(|p| p.into_inner()) = cards;
        }
    }

    /// Locks the health/breaker state (never held across an await).
    pub(crate) fn state(&self) -> MutexGuard<'_, WorkerState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::WorkerAddr;

    #[test]
    fn rank_suffixes() {
        let plain = WorkerAddr::parse("http://127.0.0.1:30001").unwrap();
        assert_eq!(plain.rank(), None);
        let r1 = WorkerAddr::parse("http://127.0.0.1:30001@1").unwrap();
        assert_eq!(r1.rank(), Some(1));
        assert_eq!(r1.socket_target(), "127.0.0.1:30001");
        assert_eq!(r1.uri("/health").unwrap(), "http://127.0.0.1:30001/health");
        let prefixed = WorkerAddr::parse("http://h:1/v1/@7").unwrap();
        assert_eq!(prefixed.rank(), Some(7));
        assert_eq!(prefixed.uri("/health").unwrap(), "http://h:1/v1/health");
        for bad in [
            "http://h:1@",
            "http://h:1@x",
            "http://h:1@-1",
            "http://h:1@+1",
            "http://h:1@4294967296",
            "http://u@h:1",
            "http://u@h:1@0",
        ] {
            let err = WorkerAddr::parse(bad).unwrap_err();
            assert!(err.contains(bad), "{err}");
        }
    }
}

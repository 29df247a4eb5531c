//! The member list and the lock-free view the request path reads.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use arc_swap::{ArcSwap, ArcSwapOption};

use super::settings::{BreakerSettings, HealthSettings};
use super::worker::{Worker, WorkerState};
use crate::clock::Clock;
use crate::error::GatewayError;
use crate::routing::{
    Breaker, BreakerConfig, BreakerState, HealthTracker, Outcome, WorkerEntry, WorkerId,
    WorkerLoads, WorkerSnapshot,
};

/// A tracker for a new worker: healthy, or (when its start-up probes failed) unhealthy, so it
/// needs `success_threshold` good probes to come in.
fn start_health(settings: &HealthSettings, healthy: bool) -> HealthTracker {
    HealthTracker::starting(
        healthy,
        settings.failure_threshold,
        settings.success_threshold,
    )
}

/// What the request path sees: the core's snapshot plus the gateway's worker handles.
#[derive(Debug, Default)]
pub(crate) struct View {
    pub(crate) snapshot: WorkerSnapshot,
    pub(crate) workers: Vec<Arc<Worker>>,
    /// Distinct models across all workers (sorted): `/v1/models`.
    pub(crate) models: Vec<Arc<str>>,
    /// True when workers serve more than one model, so requests need their `model` read.
    pub(crate) multi_model: bool,
    /// Whether any worker is available (readiness).
    pub(crate) any_available: bool,
    /// Whether any worker is a data-parallel rank (`<url>@<rank>`): bodies are then buffered so
    /// the rank can be written into them after routing.
    pub(crate) data_parallel: bool,
}

impl View {
    /// The worker with this id (`workers` is in the snapshot's order).
    pub(crate) fn worker(&self, id: WorkerId) -> Option<&Arc<Worker>> {
        self.snapshot
            .position(id)
            .and_then(|i| self.workers.get(i))
            .filter(|w| w.id == id)
    }
}

/// Membership, health and breakers. Writers lock `members`; readers load `view`.
#[derive(Debug)]
pub(crate) struct Registry {
    members: Mutex<Vec<Arc<Worker>>>,
    view: ArcSwap<View>,
    next_id: AtomicU32,
    breaker: BreakerSettings,
    health: HealthSettings,
    pub(crate) clock: Arc<Clock>,
    /// The workers' loads as last polled (`registry/loads.rs`); `None` until the first round,
    /// and always when nothing polls.
    loads: ArcSwapOption<WorkerLoads>,
}

impl Registry {
    pub(crate) fn new(breaker: BreakerSettings, health: HealthSettings, clock: Arc<Clock>) -> Self {
        Self {
            members: Mutex::default(),
            view: ArcSwap::from_pointee(View::default()),
            next_id: AtomicU32::new(0),
            breaker,
            health,
            clock,
            loads: ArcSwapOption::empty(),
        }
    }

    /// The workers' loads as last polled, if the load monitor runs.
    pub(crate) fn loads(&self) -> Option<Arc<WorkerLoads>> {
        self.loads.load_full()
    }

    /// Publishes a poll round's loads.
    pub(crate) fn set_loads(&self, loads: WorkerLoads) {
        self.loads.store(Some(Arc::new(loads)));
    }

    /// Numbers this registry's workers from `first` on (a second pool, e.g. PD prefill workers,
    /// must not share ids with the first).
    pub(crate) fn with_first_id(self, first: u32) -> Self {
        self.next_id.store(first, Ordering::Relaxed);
        self
    }

    /// The current view (cheap: one atomic load and a refcount).
    pub(crate) fn view(&self) -> Arc<View> {
        self.view.load_full()
    }

    fn members(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Worker>>> {
        self.members.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// All registered workers (for health checks and the admin API).
    pub(crate) fn workers(&self) -> Vec<Arc<Worker>> {
        self.members().clone()
    }

    /// Registers a worker; refuses a URL that is already registered.
    pub(crate) fn add(
        &self,
        url: &str,
        models: Vec<Arc<str>>,
        healthy: bool,
    ) -> Result<Arc<Worker>, GatewayError> {
        let mut members = self.members();
        if members.iter().any(|w| &*w.url == url) {
            return Err(GatewayError::BadRequest(format!(
                "worker `{url}` is already registered"
            )));
        }
        let state = WorkerState {
            health: start_health(&self.health, healthy),
            breaker: Breaker::new(BreakerConfig {
                failure_threshold: self.breaker.failure_threshold,
                success_threshold: self.breaker.success_threshold,
                open_timeout: self.breaker.open_timeout,
            }),
            models,
        };
        let id = WorkerId(self.next_id.fetch_add(1, Ordering::Relaxed));
        let worker = Arc::new(Worker::new(id, url, state).map_err(GatewayError::BadRequest)?);
        members.push(worker.clone());
        self.publish(&members);
        Ok(worker)
    }

    /// Removes a worker by id or by its URL as registered.
    pub(crate) fn remove(&self, id_or_url: &str) -> Option<Arc<Worker>> {
        let mut members = self.members();
        let pos = members.iter().position(|w| {
            &*w.url == id_or_url || id_or_url.parse::<u32>().is_ok_and(|n| w.id == WorkerId(n))
        })?;
        let worker = members.remove(pos);
        self.publish(&members);
        Some(worker)
    }

    /// Rebuilds the view from the members' current state (after a health or breaker change,
    /// or when an open breaker's timeout has passed).
    /// Nothing is published when nothing a view holds changed (the health loop refreshes
    /// after every round of probes: building a snapshot, its ring and model table each time
    /// cost the request path's IO thread about 250 instructions a request under load).
    pub(crate) fn refresh(&self) {
        let members = self.members();
        if self.unchanged(&members) {
            return;
        }
        self.publish(&members);
    }

    /// Whether the published view already shows `members` as they are: the same workers in
    /// the same order, each with its availability and models.
    fn unchanged(&self, members: &[Arc<Worker>]) -> bool {
        let view = self.view.load();
        let now = self.clock.now();
        view.workers.len() == members.len()
            && members.iter().zip(&view.workers).all(|(w, v)| {
                let s = w.state();
                let available = s.health.is_healthy() && s.breaker.allows(now);
                Arc::ptr_eq(w, v)
                    && view
                        .snapshot
                        .get(w.id)
                        .is_some_and(|e| e.available == available && e.models == s.models)
            })
    }

    fn publish(&self, members: &[Arc<Worker>]) {
        let now = self.clock.now();
        let mut models: Vec<Arc<str>> = Vec::new();
        let mut entries = Vec::with_capacity(members.len());
        let mut any_available = false;
        for w in members {
            let s = w.state();
            let available = s.health.is_healthy() && s.breaker.allows(now);
            any_available |= available;
            models.extend(s.models.iter().cloned());
            entries.push(WorkerEntry {
                id: w.id,
                url: w.url.clone(),
                models: s.models.clone(),
                available,
                stats: w.stats.clone(),
            });
        }
        models.sort();
        models.dedup();
        let view = View {
            snapshot: WorkerSnapshot::new(entries),
            workers: members.to_vec(),
            multi_model: models.len() > 1,
            models,
            any_available,
            data_parallel: members.iter().any(|w| w.addr.rank().is_some()),
        };
        self.view.store(Arc::new(view));
    }

    /// Feeds one request outcome to the worker's breaker; republishes on a transition.
    /// Returns the new state when it changed.
    pub(crate) fn report(
        self: &Arc<Self>,
        worker: &Worker,
        outcome: Outcome,
    ) -> Option<BreakerState> {
        // A success on a closed breaker with no failures counted changes nothing: skip the lock
        // (the common case, and the lock is shared by every IO thread).
        if outcome == Outcome::Success && worker.breaker_clean.load(Ordering::Relaxed) {
            return None;
        }
        let now = self.clock.now();
        let transition = {
            let mut s = worker.state();
            let t = s.breaker.on_outcome(outcome, now);
            let clean = outcome == Outcome::Success && s.breaker.state(now) == BreakerState::Closed;
            worker.breaker_clean.store(clean, Ordering::Relaxed);
            t
        }?;
        tracing::warn!(worker = %worker.url, from = ?transition.from, to = ?transition.to, "circuit breaker transition");
        self.refresh();
        let reopens_at = worker.state().breaker.reopens_at();
        if let Some(until) = reopens_at {
            // Availability changes again when the open period ends: republish then.
            let this = Arc::clone(self);
            let wait = until.saturating_sub(now) + std::time::Duration::from_millis(1);
            tokio::spawn(async move {
                tokio::time::sleep(wait).await;
                this.refresh();
            });
        }
        Some(transition.to)
    }

    /// Feeds one health probe result; republishes when health flips. Returns the new health.
    pub(crate) fn on_probe(&self, worker: &Worker, ok: bool) -> Option<bool> {
        let flipped = worker.state().health.on_probe(ok)?;
        if flipped {
            tracing::info!(worker = %worker.url, "worker healthy again; back in routing");
        } else {
            tracing::warn!(worker = %worker.url, "worker unhealthy; out of routing");
        }
        self.refresh();
        Some(flipped)
    }

    /// A start-up worker answered: it is healthy now (one good probe, as at start-up), with the
    /// models it listed (kept unknown when it listed none), and republishes.
    pub(crate) fn mark_up(&self, worker: &Worker, models: Vec<Arc<str>>) {
        if !worker.awaited() {
            return;
        }
        {
            let mut s = worker.state();
            s.health = start_health(&self.health, true);
            if !models.is_empty() {
                s.models = models;
            }
        }
        worker.stop_awaiting();
        tracing::info!(worker = %worker.url, "worker answered GET /health; in routing");
        self.refresh();
    }

    /// Sets a worker's models (discovered after it became healthy) and republishes.
    pub(crate) fn set_models(&self, worker: &Worker, models: Vec<Arc<str>>) {
        worker.state().models = models;
        self.refresh();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refresh_publishes_only_what_changed() {
        let cfg = crate::GatewayConfig::new(vec![]);
        let registry = Registry::new(cfg.breaker, cfg.health, Arc::default());
        let w = registry
            .add("http://127.0.0.1:1", Vec::new(), true)
            .unwrap();
        let first = registry.view();
        registry.refresh();
        assert!(Arc::ptr_eq(&first, &registry.view()), "nothing changed");
        registry.set_models(&w, vec![Arc::from("m")]);
        let with_model = registry.view();
        assert!(!Arc::ptr_eq(&first, &with_model));
        assert_eq!(with_model.models, vec![Arc::from("m")]);
        registry.set_models(&w, vec![Arc::from("m")]);
        assert!(
            Arc::ptr_eq(&with_model, &registry.view()),
            "the same models"
        );
        // health flips (after enough failed probes): published
        let flipped = (0..100).any(|_| registry.on_probe(&w, false) == Some(false));
        assert!(flipped);
        let down = registry.view();
        assert!(!Arc::ptr_eq(&with_model, &down));
        assert!(!down.any_available);
        // a member added or removed: published
        registry
            .add("http://127.0.0.1:2", Vec::new(), true)
            .unwrap();
        assert_eq!(registry.view().workers.len(), 2);
        registry.remove("http://127.0.0.1:2");
        assert_eq!(registry.view().workers.len(), 1);
    }
}

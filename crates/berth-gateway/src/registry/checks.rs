//! The health-check task: every worker is probed (`GET /health`) on its own schedule.
//!
//! A healthy worker is probed every `--health-check-interval-secs`. A worker that is not healthy
//! (down at start-up, or taken out by failed probes) is probed quickly, with backoff: after
//! [`FAST_FIRST`], then twice as long each time up to the interval, so a worker that comes up is
//! in routing within about a second instead of after `interval x success-threshold`.
//!
//! Start-up workers that have never answered are logged as awaited (every [`WAIT_LOG_EVERY`])
//! until they come up or `--worker-startup-timeout-secs` passes; their first good probe brings
//! them in at once, as if they had answered at start-up.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use super::health::{bring_up, learn_worker, probe_health};
use super::settings::HealthSettings;
use super::{Registry, Worker};
use crate::routing::WorkerId;
use crate::upstream::HttpClient;

/// First re-probe of a worker that is not healthy.
pub(crate) const FAST_FIRST: Duration = Duration::from_millis(250);
/// How often the start-up workers still awaited are logged.
const WAIT_LOG_EVERY: Duration = Duration::from_secs(10);
/// Longest sleep of the task (new workers and breaker timeouts are noticed within it).
const MAX_SLEEP: Duration = Duration::from_secs(1);

/// When a worker is probed next, and the backoff after that if it is still not healthy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Next {
    pub(crate) at: Instant,
    pub(crate) backoff: Duration,
}

impl Next {
    /// The schedule of a worker first seen at `now`.
    pub(crate) fn first(now: Instant, healthy: bool, interval: Duration) -> Self {
        let fast = FAST_FIRST.min(interval);
        Self {
            at: now + if healthy { interval } else { fast },
            backoff: (fast * 2).min(interval),
        }
    }

    /// The schedule after a probe at `now` that left the worker `healthy` or not.
    pub(crate) fn after(self, now: Instant, healthy: bool, interval: Duration) -> Self {
        if healthy {
            return Self::first(now, true, interval);
        }
        Self {
            at: now + self.backoff,
            backoff: (self.backoff * 2).min(interval),
        }
    }
}

/// Probes every worker on its schedule until the task is aborted.
pub(crate) fn spawn_health_checks(
    registry: Arc<Registry>,
    client: HttpClient,
    settings: HealthSettings,
    startup_timeout: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let started = Instant::now();
        let mut schedule: HashMap<WorkerId, Next> = HashMap::new();
        let mut next_wait_log = started + WAIT_LOG_EVERY;
        loop {
            let now = Instant::now();
            let workers = registry.workers();
            schedule.retain(|id, _| workers.iter().any(|w| w.id == *id));
            let mut set = JoinSet::new();
            for worker in &workers {
                let next = *schedule.entry(worker.id).or_insert_with(|| {
                    Next::first(now, worker.state().health.is_healthy(), settings.interval)
                });
                if next.at <= now {
                    let (client, worker, timeout) =
                        (client.clone(), worker.clone(), settings.timeout);
                    set.spawn(async move {
                        let ok = probe_health(&client, &worker.addr, timeout).await;
                        (worker, ok, client)
                    });
                }
            }
            while let Some(Ok((worker, ok, client))) = set.join_next().await {
                recheck(&registry, &client, &worker, ok, settings.timeout).await;
                let healthy = worker.state().health.is_healthy();
                if let Some(next) = schedule.get_mut(&worker.id) {
                    *next = next.after(Instant::now(), healthy, settings.interval);
                }
            }
            // An open breaker's timeout may have passed: republish availability.
            registry.refresh();
            let now = Instant::now();
            if now >= next_wait_log {
                next_wait_log = now + WAIT_LOG_EVERY;
                log_awaited(&workers, started, startup_timeout, now);
            }
            let wake = schedule
                .values()
                .map(|n| n.at)
                .min()
                .unwrap_or(now + MAX_SLEEP)
                .min(now + MAX_SLEEP);
            tokio::time::sleep_until(wake).await;
        }
    })
}

/// Logs the start-up workers not up yet; once `--worker-startup-timeout-secs` has passed, says
/// so once and treats them like any unhealthy worker from then on.
fn log_awaited(workers: &[Arc<Worker>], started: Instant, timeout: Duration, now: Instant) {
    let awaited: Vec<&Arc<Worker>> = workers.iter().filter(|w| w.awaited()).collect();
    if awaited.is_empty() {
        return;
    }
    let list = awaited
        .iter()
        .map(|w| &*w.url)
        .collect::<Vec<_>>()
        .join(" ");
    if now.duration_since(started) < timeout {
        tracing::warn!(waiting = %list, "still waiting for workers to answer GET /health");
        return;
    }
    tracing::warn!(
        waiting = %list,
        "workers did not come up within --worker-startup-timeout-secs; they stay registered and are probed like any unhealthy worker"
    );
    for w in awaited {
        w.stop_awaiting();
    }
}

async fn recheck(
    registry: &Registry,
    client: &HttpClient,
    worker: &Worker,
    ok: bool,
    timeout: Duration,
) {
    if ok && worker.awaited() {
        bring_up(registry, client, worker, timeout).await;
        return;
    }
    registry.on_probe(worker, ok);
    // A worker whose model list is still unknown (its `/v1/models` failed when it joined, or it
    // joined unhealthy) asks again after every good probe until it answers.
    let unknown_models = {
        let state = worker.state();
        state.health.is_healthy() && state.models.is_empty()
    };
    if ok && unknown_models {
        let models = learn_worker(client, worker, timeout).await;
        if !models.is_empty() {
            registry.set_models(worker, models);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unhealthy_worker_is_probed_fast_then_backs_off_to_the_interval() {
        let interval = Duration::from_secs(60);
        let t0 = Instant::now();
        let mut n = Next::first(t0, false, interval);
        assert_eq!(n.at, t0 + FAST_FIRST);
        let mut gaps = Vec::new();
        let mut now = n.at;
        for _ in 0..12 {
            let next = n.after(now, false, interval);
            gaps.push(next.at - now);
            now = next.at;
            n = next;
        }
        assert_eq!(gaps[0], FAST_FIRST * 2);
        assert_eq!(gaps[1], FAST_FIRST * 4);
        assert!(gaps.windows(2).all(|g| g[1] >= g[0]), "{gaps:?}");
        assert_eq!(*gaps.last().unwrap(), interval, "capped at the interval");
        // Healthy again: the steady interval, and the backoff starts over.
        let healthy = n.after(now, true, interval);
        assert_eq!(healthy.at, now + interval);
        assert_eq!(healthy.after(now, false, interval).at, now + FAST_FIRST * 2);
        // A healthy worker first seen waits a whole interval; a short interval caps the start.
        assert_eq!(Next::first(t0, true, interval).at, t0 + interval);
        let short = Duration::from_millis(50);
        assert_eq!(Next::first(t0, false, short).at, t0 + short);
    }
}

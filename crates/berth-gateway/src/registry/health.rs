//! Probing workers: at start-up, periodically, and for the admin API.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;

use super::{Registry, Worker, WorkerAddr};
use crate::config::HealthSettings;
use crate::error::GatewayError;
use crate::upstream::{self, HttpClient};

/// Largest `/v1/models` body read.
const MODELS_LIMIT: usize = 1 << 20;

/// `GET /health` answered 2xx within the timeout.
pub(crate) async fn probe_health(
    client: &HttpClient,
    addr: &WorkerAddr,
    timeout: Duration,
) -> bool {
    let Ok(uri) = addr.uri("/health") else {
        return false;
    };
    matches!(
        upstream::get(client, uri, timeout, 64 * 1024).await,
        Ok((200..=299, _))
    )
}

/// The ids listed by the worker's `GET /v1/models` (empty when it has none or fails).
pub(crate) async fn fetch_models(
    client: &HttpClient,
    addr: &WorkerAddr,
    timeout: Duration,
) -> Vec<Arc<str>> {
    #[derive(serde::Deserialize)]
    struct Model {
        id: String,
    }
    #[derive(serde::Deserialize)]
    struct List {
        data: Vec<Model>,
    }
    let Ok(uri) = addr.uri("/v1/models") else {
        return Vec::new();
    };
    match upstream::get(client, uri, timeout, MODELS_LIMIT).await {
        Ok((200..=299, body)) => serde_json::from_slice::<List>(&body)
            .map(|l| l.data.into_iter().map(|m| Arc::from(m.id)).collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Registers the start-up workers, waiting for each to answer `/health` until `deadline`.
/// Workers that never answer are registered as unhealthy (health checks may bring them in);
/// if none answers, start-up is refused.
pub(crate) async fn startup(
    registry: &Registry,
    client: &HttpClient,
    urls: &[String],
    deadline: Duration,
    probe_timeout: Duration,
) -> Result<(), GatewayError> {
    let mut set = JoinSet::new();
    for (i, url) in urls.iter().enumerate() {
        let addr = WorkerAddr::parse(url)
            .map_err(|e| GatewayError::Config(format!("--worker-urls: {e}")))?;
        let client = client.clone();
        set.spawn(async move {
            let give_up = tokio::time::Instant::now() + deadline;
            loop {
                if probe_health(&client, &addr, probe_timeout).await {
                    return (i, Some(fetch_models(&client, &addr, probe_timeout).await));
                }
                let now = tokio::time::Instant::now();
                if now >= give_up {
                    return (i, None);
                }
                tokio::time::sleep_until((now + Duration::from_millis(250)).min(give_up)).await;
            }
        });
    }
    let mut results = vec![None; urls.len()];
    while let Some(joined) = set.join_next().await {
        let (i, models) = joined.map_err(|e| GatewayError::Startup(e.to_string()))?;
        results[i] = models;
    }
    if results.iter().all(Option::is_none) {
        return Err(GatewayError::Startup(format!(
            "--worker-urls: no worker answered GET /health within --worker-startup-timeout-secs ({}s): {}",
            deadline.as_secs(),
            urls.join(" ")
        )));
    }
    for (url, models) in urls.iter().zip(results) {
        let healthy = models.is_some();
        if !healthy {
            tracing::warn!(worker = %url, "worker not reachable at start-up; registered as unhealthy");
        }
        registry.add(url, models.unwrap_or_default(), healthy)?;
    }
    Ok(())
}

/// Probes every worker each `settings.interval` until the task is aborted.
pub(crate) fn spawn_health_checks(
    registry: Arc<Registry>,
    client: HttpClient,
    settings: HealthSettings,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(settings.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let mut set = JoinSet::new();
            for worker in registry.workers() {
                let client = client.clone();
                let timeout = settings.timeout;
                set.spawn(async move {
                    let ok = probe_health(&client, &worker.addr, timeout).await;
                    (worker, ok, client)
                });
            }
            while let Some(Ok((worker, ok, client))) = set.join_next().await {
                recheck(&registry, &client, &worker, ok, settings.timeout).await;
            }
            // An open breaker's timeout may have passed: republish availability.
            registry.refresh();
        }
    })
}

async fn recheck(
    registry: &Registry,
    client: &HttpClient,
    worker: &Worker,
    ok: bool,
    timeout: Duration,
) {
    registry.on_probe(worker, ok);
    // A worker whose model list is still unknown (its `/v1/models` failed when it joined, or it
    // joined unhealthy) asks again after every good probe until it answers.
    let unknown_models = {
        let state = worker.state();
        state.health.is_healthy() && state.models.is_empty()
    };
    if ok && unknown_models {
        let models = fetch_models(client, &worker.addr, timeout).await;
        if !models.is_empty() {
            registry.set_models(worker, models);
        }
    }
}

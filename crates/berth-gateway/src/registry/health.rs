//! Probing workers (`GET /health`, `GET /v1/models`) and bringing start-up workers in; the
//! periodic task that drives the probes is `checks.rs`.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;

use super::worker::ModelCard;
use super::{Registry, Worker};
use crate::error::GatewayError;
use crate::upstream::WorkerAddr;
use crate::upstream::{self, HttpClient};

/// Largest `/v1/models` body read.
const MODELS_LIMIT: usize = 1 << 20;

/// `GET /health` answered 2xx within the timeout.
pub(crate) async fn probe_health(
    client: &HttpClient,
    addr: &WorkerAddr,
    timeout: Duration,
) -> bool {
    matches!(
        upstream::get(client, addr, "/health", timeout, 64 * 1024).await,
        Ok((200..=299, _))
    )
}

/// The models listed by the worker's `GET /v1/models` (empty when it has none or fails), with
/// the `created` and `owned_by` it gives for each.
pub(crate) async fn fetch_models(
    client: &HttpClient,
    addr: &WorkerAddr,
    timeout: Duration,
) -> Vec<ModelCard> {
    #[derive(serde::Deserialize)]
    struct Model {
        id: String,
        #[serde(default)]
        created: Option<u64>,
        #[serde(default)]
        owned_by: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct List {
        data: Vec<Model>,
    }
    match upstream::get(client, addr, "/v1/models", timeout, MODELS_LIMIT).await {
        Ok((200..=299, body)) => serde_json::from_slice::<List>(&body)
            .map(|l| {
                l.data
                    .into_iter()
                    .map(|m| ModelCard {
                        id: Arc::from(m.id),
                        created: m.created.unwrap_or(0),
                        owned_by: m.owned_by.map(Arc::from),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// The worker's KV cache capacity in tokens from SGLang's `GET /get_server_info`
/// (`max_total_num_tokens`; berth's sim worker answers it too); `None` when it does not say.
/// `ttft_aware` bounds what it believes the worker caches by it.
pub(crate) async fn fetch_kv_capacity(
    client: &HttpClient,
    addr: &WorkerAddr,
    timeout: Duration,
) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Info {
        max_total_num_tokens: Option<u64>,
    }
    match upstream::get(client, addr, "/get_server_info", timeout, MODELS_LIMIT).await {
        Ok((200..=299, body)) => serde_json::from_slice::<Info>(&body)
            .ok()?
            .max_total_num_tokens
            .filter(|t| *t > 0),
        _ => None,
    }
}

/// Learns what a worker that answered says about itself: its models (returned; their cards
/// recorded on the worker) and its KV capacity (recorded in its stats).
pub(crate) async fn learn_worker(
    client: &HttpClient,
    worker: &Worker,
    timeout: Duration,
) -> Vec<Arc<str>> {
    let (cards, kv) = tokio::join!(
        fetch_models(client, &worker.addr, timeout),
        fetch_kv_capacity(client, &worker.addr, timeout)
    );
    if let Some(tokens) = kv {
        worker.stats.set_kv_capacity_tokens(tokens);
    }
    let models = cards.iter().map(|c| c.id.clone()).collect();
    worker.set_cards(cards);
    models
}

/// Probes a worker and registers it, healthy (with its models and KV capacity) or not (its
/// health checks bring it in later): the path of `POST /workers` and of service discovery.
/// Refuses an invalid URL or one already registered.
pub(crate) async fn join(
    registry: &Registry,
    client: &HttpClient,
    url: &str,
    timeout: Duration,
) -> Result<Arc<Worker>, GatewayError> {
    let addr = WorkerAddr::parse(url).map_err(GatewayError::BadRequest)?;
    let healthy = probe_health(client, &addr, timeout).await;
    let (cards, kv) = if healthy {
        tokio::join!(
            fetch_models(client, &addr, timeout),
            fetch_kv_capacity(client, &addr, timeout)
        )
    } else {
        (Vec::new(), None)
    };
    let models = cards.iter().map(|c| c.id.clone()).collect();
    let worker = registry.add(url, models, healthy)?;
    worker.set_cards(cards);
    if let Some(tokens) = kv {
        worker.stats.set_kv_capacity_tokens(tokens);
    }
    Ok(worker)
}

/// Registers the start-up workers at once, not yet healthy and with unknown models, so the
/// gateway can serve while they come up; each is awaited until its first good probe.
pub(crate) fn register_startup(
    registry: &Registry,
    urls: &[String],
) -> Result<Vec<Arc<Worker>>, GatewayError> {
    let mut out = Vec::with_capacity(urls.len());
    for url in urls {
        WorkerAddr::parse(url).map_err(|e| GatewayError::Config(format!("--worker-urls: {e}")))?;
        let worker = registry.add(url, Vec::new(), false)?;
        worker.await_startup();
        out.push(worker);
    }
    Ok(out)
}

/// One probe of every start-up worker, in parallel: each that answers is in routing when this
/// returns. Returns the URLs still awaited.
pub(crate) async fn first_round(
    registry: &Arc<Registry>,
    client: &HttpClient,
    workers: Vec<Arc<Worker>>,
    timeout: Duration,
) -> Vec<Arc<str>> {
    let mut set = JoinSet::new();
    for worker in workers {
        let (registry, client) = (registry.clone(), client.clone());
        set.spawn(async move {
            if probe_health(&client, &worker.addr, timeout).await {
                bring_up(&registry, &client, &worker, timeout).await;
            }
            worker
        });
    }
    let mut waiting = Vec::new();
    while let Some(joined) = set.join_next().await {
        if let Ok(worker) = joined
            && worker.awaited()
        {
            waiting.push(worker.url.clone());
        }
    }
    waiting
}

/// A start-up worker answered its first probe: learn its models, then put it in routing at once.
pub(crate) async fn bring_up(
    registry: &Registry,
    client: &HttpClient,
    worker: &Worker,
    timeout: Duration,
) {
    let models = learn_worker(client, worker, timeout).await;
    registry.mark_up(worker, models);
}

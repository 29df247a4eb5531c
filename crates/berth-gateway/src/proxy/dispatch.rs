//! Stage 3 of a regular proxied request: the attempts.
//!
//! Send to the chosen worker; on a connect error, timeout or 502/503/504 *before any byte
//! reached the client*, route again (on the view as it is then) excluding every worker tried and
//! re-send (a streamed body is replayed from what was kept, see `replay.rs`), up to
//! `--retry-max-retries`. A send that fails on a *reused* pooled connection before any response
//! byte is first re-sent once on a fresh connection to the same worker (the worker closed it
//! after its previous reply): neither a retry nor a worker failure.
//!
//! PD mode has its own dispatcher beside this one (`pd/dispatch.rs`).

use std::sync::Arc;
use std::time::Instant;

use http::Response;

use super::Endpoint;
use super::prepare::Prepared;
use super::respond::respond;
use super::route::{RouteFacts, record_decision, route_error};
use super::wait::response_within;
use crate::body::ResBody;
use crate::error::GatewayError;
use crate::metrics::StatusLabels;
use crate::pool::{Fresh, Pool, Reuse};
use crate::routing::{Leg, Outcome, WorkerId, is_retryable_status};
use crate::state::AppState;
use crate::store;

/// Sends the request to one worker, retrying elsewhere on failures before its first byte.
pub(crate) async fn regular(
    state: &Arc<AppState>,
    pool: &Arc<Pool>,
    endpoint: Endpoint,
    prep: Prepared,
    start: Instant,
) -> Result<Response<ResBody>, GatewayError> {
    let Prepared {
        parts,
        mut held,
        inspected,
        tokens,
        inspect_body,
        view,
    } = prep;
    let facts = RouteFacts::new(
        endpoint,
        &parts,
        &inspected,
        tokens.as_deref(),
        inspect_body,
        &view,
    );
    let model = facts.model;
    let mut tried: Vec<WorkerId> = Vec::new();
    // Each attempt routes on the current view: a retry must see workers added, removed, opened or
    // recovered while the failed attempt was waiting.
    let route = |view: &crate::registry::View, exclude: &[WorkerId]| {
        facts
            .route(state, &state.router, Leg::Regular, view, exclude)
            .inspect(|d| store::observe(state, d, model))
    };
    let mut current = Arc::clone(&view);
    let mut decision = route(&current, &tried).map_err(|e| route_error(state, &state.router, e))?;
    // a new key consults the shared pin store (no-op without one, and on a sticky hit)
    decision = store::settle(state, decision, model, || route(&current, &tried)).await;
    loop {
        let Some(worker) = current.worker(decision.worker).cloned() else {
            return Err(GatewayError::NoAvailableWorkers);
        };
        let worker_arc = worker;
        let worker = &*worker_arc;
        record_decision(state, &decision, worker, Leg::Regular, model);
        let Some(up) = held.request(&parts, worker)? else {
            return Err(GatewayError::UpstreamConnection {
                worker: worker.url.to_string(),
                reason: "the request body could not be re-sent for a retry".to_owned(),
            });
        };
        let timeout = state.config.request_timeout;
        let mut sent =
            response_within(pool.send(worker, up, Reuse::Pooled), timeout, held.upload()).await;
        // A reused connection that failed before any response byte was most likely closed by
        // the worker after its previous reply (llama-server does so after every stream): re-send
        // once on a fresh connection to the same worker, not a failure of the worker.
        if matches!(&sent, Some(Err(e)) if e.reused)
            && held.client_failure().is_none()
            && let Some(up) = held.request(&parts, worker)?
        {
            state.metrics.stale_resends.inc();
            tracing::debug!(worker = %worker.url, "reused connection closed before answering; re-sending on a fresh one");
            sent = response_within(pool.send(worker, up, Fresh), timeout, held.upload()).await;
        }
        // A client that was too slow, sent too much or went away failed the attempt itself: no
        // breaker failure, no retry, no upstream error.
        if let Some(e) = held.client_failure() {
            return Err(e);
        }
        let retry_left = (tried.len() as u32) < state.config.retry_max_retries && held.replayable();
        let failure = match sent {
            Some(Ok((resp, conn))) => {
                let status = resp.status().as_u16();
                state
                    .metrics
                    .upstream_status
                    .get_or_create(&StatusLabels {
                        status_code: status,
                    })
                    .inc();
                if !is_retryable_status(status) {
                    let outcome = if status >= 500 {
                        Outcome::Failure
                    } else {
                        Outcome::Success
                    };
                    state.registry.report(worker, outcome);
                    return Ok(respond(state, resp, conn, &worker_arc, decision, start));
                }
                state.registry.report(worker, Outcome::Failure);
                // A retryable status: re-send elsewhere if we can, else pass it through untouched.
                if retry_left {
                    tried.push(worker.id);
                    current = state.registry.view();
                    if let Ok(next) = route(&current, &tried) {
                        state.metrics.retries.inc();
                        tracing::debug!(worker = %worker.url, status, "retrying on another worker");
                        decision = next;
                        continue;
                    }
                }
                return Ok(respond(state, resp, conn, &worker_arc, decision, start));
            }
            Some(Err(e)) => GatewayError::UpstreamConnection {
                worker: worker.url.to_string(),
                reason: e.reason,
            },
            None => GatewayError::UpstreamTimeout(worker.url.to_string()),
        };
        state.registry.report(worker, Outcome::Failure);
        tracing::warn!(worker = %worker.url, error = %failure, "worker request failed");
        if !retry_left {
            return Err(failure);
        }
        tried.push(worker.id);
        current = state.registry.view();
        match route(&current, &tried) {
            Ok(next) => {
                state.metrics.retries.inc();
                decision = next;
            }
            Err(_) => return Err(failure),
        }
    }
}

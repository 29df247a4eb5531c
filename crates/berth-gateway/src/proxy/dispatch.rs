//! Stage 3 of a regular proxied request: the attempts.
//!
//! Send to the chosen worker (one [`Upstream::attempt`]: stale-connection re-send, timeout,
//! status count, breaker report); on a connect error, timeout or 502/503/504 *before any byte
//! reached the client*, route again (on the view as it is then) excluding every worker tried and
//! re-send (a streamed body is replayed from what was kept, `upstream/replay.rs`), up to
//! `--retry-max-retries`.
//!
//! PD mode has its own dispatcher beside this one (`pd/dispatch.rs`); both send through the
//! same attempt.

use std::sync::Arc;
use std::time::Instant;

use http::Response;

use super::Endpoint;
use super::chain::ChainWatch;
use super::prepare::Prepared;
use super::respond::{Body, respond};
use super::route::{RouteFacts, record_decision, route_error};
use crate::error::GatewayError;
use crate::routing::{Leg, WorkerId, is_retryable_status};
use crate::state::AppState;
use crate::store;
use crate::upstream::{AttemptError, Pool, Target, Upstream};

/// Sends the request to one worker, retrying elsewhere on failures before its first byte.
///
/// `prep` is borrowed from the caller's future, not moved into this one: the request's
/// prepared parts stay where `prepare` left them (a move of `Prepared` and of a future
/// holding its fields is a `memcpy` each), and this future holds one reference to them.
pub(crate) async fn regular(
    state: &Arc<AppState>,
    pool: &Arc<Pool>,
    endpoint: Endpoint,
    prep: &mut Prepared,
    start: Instant,
) -> Result<Response<Body>, GatewayError> {
    let Prepared {
        parts,
        held,
        inspected,
        tokens,
        inspect_body,
        feedback_read,
        view,
        nvext: _,
    } = prep;
    let parts = &*parts;
    let facts = RouteFacts::new(
        endpoint,
        parts,
        inspected,
        tokens.as_deref(),
        (*inspect_body, *feedback_read),
        view,
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
    let mut current = Arc::clone(view);
    let mut decision = route(&current, &tried).map_err(|e| route_error(state, &state.router, e))?;
    // a new key consults the shared pin store (no-op without one, and on a sticky hit)
    if state.store.is_some() {
        // boxed: the store's round trip is a large future, absent without `--sticky-store`
        decision = Box::pin(store::settle(state, decision, model, || {
            route(&current, &tried)
        }))
        .await;
    }
    let upstream = Upstream {
        pool,
        timeout: state.config.request_timeout,
        metrics: &state.metrics.upstream,
    };
    loop {
        let Some(worker_arc) = current.worker(decision.worker).cloned() else {
            return Err(GatewayError::NoAvailableWorkers);
        };
        let worker = &*worker_arc;
        record_decision(state, &decision, worker, Leg::Regular, model);
        let target = Target {
            id: worker.id,
            addr: &worker.addr,
            url: &worker.url,
        };
        let upload = held.upload().cloned();
        let sent = upstream
            .attempt(
                target,
                upload.as_ref(),
                || held.request(parts, worker),
                |outcome| {
                    state.registry.report(worker, outcome);
                },
            )
            .await;
        let retry_left = (tried.len() as u32) < state.config.retry_max_retries && held.replayable();
        let failure = match sent {
            Ok(resp) => {
                let status = resp.status().as_u16();
                // A retryable status: re-send elsewhere if we can, else pass it through untouched.
                if is_retryable_status(status) && retry_left {
                    tried.push(worker.id);
                    current = state.registry.view();
                    if let Ok(next) = route(&current, &tried) {
                        state.metrics.retries.inc();
                        tracing::debug!(worker = %worker.url, status, "retrying on another worker");
                        decision = next;
                        continue;
                    }
                }
                let chain = (endpoint == Endpoint::Responses)
                    .then(|| {
                        let key = decision.key.as_ref().map(|k| k.key.as_str());
                        ChainWatch::new(state, key, worker.id, None, model)
                    })
                    .flatten();
                return Ok(respond(state, resp, &worker_arc, decision, start, chain));
            }
            Err(AttemptError::Request(e)) => return Err(e),
            Err(AttemptError::Worker(e)) => e,
        };
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

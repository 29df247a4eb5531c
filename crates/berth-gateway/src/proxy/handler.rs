//! One proxied request, start to finish.
//!
//! 1. Decide whether the body must be read (the core's `body_path`, or `data_parallel_rank` when
//!    the worker view holds `<url>@<rank>` workers), count it, and read it with the
//!    `--max-payload-size` limit, or leave it to stream.
//! 2. Route (key derivation, pins, policy) on the current worker view. A body sent to a rank
//!    worker gets its `data_parallel_rank` (see `rank.rs`); every other body goes byte-exact.
//! 3. Send to the worker; on a connect error, timeout or 502/503/504 *before any byte reached the
//!    client*, route again (on the view as it is then) excluding every worker tried and re-send
//!    (a streamed body is replayed from what was kept, see `replay.rs`), up to
//!    `--retry-max-retries`.
//!    A send that fails on a *reused* pooled connection before any response byte is first
//!    re-sent once on a fresh connection to the same worker (the worker closed it after its
//!    previous reply): neither a retry nor a worker failure.
//! 4. Stream the response back with `x-smg-routed-worker-id` and the lease attached.

use std::sync::Arc;
use std::time::Instant;

use http::{HeaderMap, Request, Response, header};
use hyper::body::Incoming;

use super::Endpoint;
use super::deadline::{BodyDeadline, read_body};
use super::headers::{self, HeaderMapSource, ROUTED_WORKER, ROUTING_TOKENS};
use super::held::Held;
use super::inspect::{Inspected, inspect};
use super::lookahead::{LateCheck, Lookahead, read_ahead};
use super::replay::{CAPTURE_LIMIT, Replayable};
use super::wait::response_within;
use crate::body::{ProxiedBody, RequestGuard, ResBody, SseEnd};
use crate::error::GatewayError;
use crate::metrics::{BodyPathLabels, BranchLabels, RequestLabels, SourceLabels, StatusLabels};
use crate::pool::{Conn, Fresh, Pool, Reuse};
use crate::registry::{View, Worker};
use crate::request_body::ClientBody;
use crate::routing::{
    BodyPath, Branch, Decision, Error as RouteError, Leg, Outcome, PolicyKind, RouteRequest,
    WorkerId, is_retryable_status, parse_routing_tokens,
};
use crate::state::{AppState, with_rng};
use crate::store;

/// Proxies one generation request; every failure becomes its gateway error response.
pub(crate) async fn proxy(
    state: &Arc<AppState>,
    pool: &Arc<Pool>,
    endpoint: Endpoint,
    req: Request<ClientBody>,
) -> Response<ResBody> {
    let start = Instant::now();
    match forward(state, pool, endpoint, req, start).await {
        Ok(resp) => resp,
        Err(err) => {
            tracing::debug!(code = err.code().as_str(), error = %err, "request refused");
            err.to_response()
        }
    }
}

async fn forward(
    state: &Arc<AppState>,
    pool: &Arc<Pool>,
    endpoint: Endpoint,
    req: Request<ClientBody>,
    start: Instant,
) -> Result<Response<ResBody>, GatewayError> {
    let (parts, body) = req.into_parts();
    let deadline = BodyDeadline::new(state.config.body_timeouts, tokio::time::Instant::now());
    let view = state.registry.view();
    let tokens = parts
        .headers
        .get(ROUTING_TOKENS)
        .and_then(|v| parse_routing_tokens(v.as_bytes()));
    let core_path = state.router.request_body_path(
        &HeaderMapSource(&parts.headers),
        tokens.is_some(),
        view.multi_model,
        &view.snapshot,
        state.clock.now(),
    );
    // Routing reads the body only when the core asks; rank workers need it held to add the rank.
    let inspect_body = matches!(core_path, BodyPath::Buffered(_));
    let body_path = match core_path {
        BodyPath::Streamed(_) if view.data_parallel => BodyPath::Buffered("data_parallel_rank"),
        path => path,
    };
    let buffered = matches!(body_path, BodyPath::Buffered(_));
    state
        .metrics
        .body_path
        .get_or_create(&BodyPathLabels {
            path: body_path.path(),
            reason: body_path.reason(),
        })
        .inc();
    let max = state.config.max_payload_size;
    if content_length(&parts.headers).is_some_and(|n| n > max as u64) {
        return Err(GatewayError::PayloadTooLarge(max));
    }
    // `stream` for the requests metric: `None` when the body was not read as a JSON object.
    let (mut held, inspected, stream) = if inspect_body {
        let bytes = read_body(body, max, deadline).await?;
        let want_text = matches!(
            state.config.router.policy,
            PolicyKind::CacheAware | PolicyKind::TtftAware
        ) && tokens.is_none();
        let inspected = inspect(&bytes, want_text)?;
        let stream = Some(inspected.stream);
        (Held::Buffered(bytes), inspected, stream)
    } else if buffered {
        // Held only for the rank: routing sees what a streamed body gives it (nothing), and a
        // body that is not JSON is no error here.
        let bytes = read_body(body, max, deadline).await?;
        let read = inspect(&bytes, false).ok();
        let stream = read.as_ref().map(|i| i.stream);
        // Routing sees nothing of the body, but its model is still checked.
        let inspected = Inspected {
            model: read.and_then(|i| i.model),
            ..Inspected::default()
        };
        (Held::Buffered(bytes), inspected, stream)
    } else {
        let capture = if state.config.retry_max_retries > 0 {
            CAPTURE_LIMIT
        } else {
            0
        };
        let mut body = body;
        // Workers that list models: learn the body's `model` from its first frames (a model no
        // worker serves is refused before any byte goes out), and keep checking past them.
        let (ahead, late) = if view.models.is_empty() {
            (Lookahead::default(), None)
        } else {
            let mut ahead = read_ahead(&mut body, max, deadline).await?;
            let late = ahead.scan.found().is_none().then(|| LateCheck {
                scan: std::mem::take(&mut ahead.scan),
                known: view.models.clone(),
            });
            (ahead, late)
        };
        let inspected = Inspected {
            model: ahead.model().map(str::to_owned),
            ..Inspected::default()
        };
        (
            Held::Stream(Replayable::new(body, ahead, late, capture, max, deadline)),
            inspected,
            None,
        )
    };
    // Reading the body (or its first frames) can take a while: route on the workers as they are
    // now, not as they were when the head arrived (a worker removed or opened meanwhile must not be chosen).
    let view = state.registry.view();
    let body_model = inspected.model.as_deref();
    if let Some(m) =
        body_model.filter(|m| !view.models.is_empty() && !view.snapshot.serves_model(m))
    {
        return Err(GatewayError::ModelNotFound(m.to_owned()));
    }
    let model = body_model.or(view.snapshot.only_model().map(|m| &**m));
    state
        .metrics
        .requests
        .get_or_create(&RequestLabels {
            model: model_label(&view.models, model),
            endpoint: endpoint.as_str(),
            streaming: match stream {
                None => "unknown",
                Some(true) => "true",
                Some(false) => "false",
            },
        })
        .inc();

    let header_source = HeaderMapSource(&parts.headers);
    let mut tried: Vec<WorkerId> = Vec::new();
    // Each attempt routes on the current view: a retry must see workers added, removed, opened or
    // recovered while the failed attempt was waiting.
    let route = |view: &View, exclude: &[WorkerId]| {
        let req = RouteRequest {
            rid: inspected.rid.as_deref().filter(|_| endpoint.reads_rid()),
            headers: &header_source,
            model,
            leg: Leg::Regular,
            text: inspected.text.as_deref(),
            tokens: tokens.as_deref(),
            exclude,
            stream: inspect_body.then_some(inspected.stream),
        };
        let now = state.clock.now();
        with_rng(|rng| state.router.route(&req, &view.snapshot, now, rng))
            .inspect(|d| store::observe(state, d, model))
    };
    let mut current = Arc::clone(&view);
    let mut decision = route(&current, &tried).map_err(|e| route_error(state, e))?;
    // a new key consults the shared pin store (no-op without one, and on a sticky hit)
    decision = store::settle(state, decision, model, || route(&current, &tried)).await;
    loop {
        let Some(worker) = current.worker(decision.worker).cloned() else {
            return Err(GatewayError::NoAvailableWorkers);
        };
        let worker_arc = worker;
        let worker = &*worker_arc;
        record_decision(state, &decision, worker, model);
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

fn route_error(state: &AppState, e: RouteError) -> GatewayError {
    match e {
        RouteError::MissingRoutingKey => GatewayError::MissingRoutingKey {
            policy: state.config.router.policy.as_str(),
        },
        RouteError::NoAvailableWorkers => {
            // A pin-keeping router reports every decision's branch, refusals included.
            if state.router.keeps_pins() {
                state
                    .metrics
                    .branch
                    .get_or_create(&BranchLabels {
                        branch: Branch::NoHealthyWorkers.as_str(),
                    })
                    .inc();
            }
            GatewayError::NoAvailableWorkers
        }
        RouteError::Config { .. } => GatewayError::Config(e.to_string()),
    }
}

fn record_decision(state: &AppState, d: &Decision, worker: &Worker, model: Option<&str>) {
    // Every decision of a pin-keeping router has a branch, keyless ones (`no_routing_id`)
    // included.
    let branch = d.branch.map(|b| b.as_str());
    if let Some(branch) = branch {
        state
            .metrics
            .branch
            .get_or_create(&BranchLabels { branch })
            .inc();
    }
    if let Some(key) = &d.key {
        state
            .metrics
            .key_source
            .get_or_create(&SourceLabels {
                source: key.source.as_str(),
            })
            .inc();
        tracing::debug!(
            source = key.source.as_str(),
            key = %key.key,
            branch = branch.unwrap_or("policy"),
            worker = %worker.url,
            model = model.unwrap_or(""),
            "Sticky routing decision"
        );
    }
}

fn respond(
    state: &Arc<AppState>,
    resp: Response<Incoming>,
    conn: Conn,
    worker: &Arc<Worker>,
    decision: Decision,
    start: Instant,
) -> Response<ResBody> {
    let (mut parts, incoming) = resp.into_parts();
    headers::strip_response_headers(&mut parts.headers);
    parts
        .headers
        .insert(ROUTED_WORKER, worker.url_header.clone());
    let event_stream = parts
        .headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let sse = event_stream.then(|| SseEnd::new(worker.url.clone()));
    let guard = RequestGuard {
        lease: Some(decision.lease),
        conn: Some(conn),
        start,
        metrics: state.metrics.clone(),
        clock: state.clock.clone(),
        event_stream,
        first_byte_seen: false,
        registry: state.registry.clone(),
        worker: worker.clone(),
    };
    Response::from_parts(
        parts,
        ResBody::Proxied(Box::new(ProxiedBody {
            inner: incoming,
            guard: Some(guard),
            sse,
            permit: None,
        })),
    )
}

/// The model as a metric label: one of the workers' models (sharing the registry's `Arc`), else
/// `unknown`, so client-chosen strings never become label values.
fn model_label(known: &[Arc<str>], model: Option<&str>) -> Arc<str> {
    model
        .and_then(|model| known.iter().find(|m| ***m == *model))
        .cloned()
        .unwrap_or_else(|| Arc::from("unknown"))
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

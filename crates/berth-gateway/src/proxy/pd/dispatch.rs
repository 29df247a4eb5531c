//! The PD attempts: route both legs, send both at once, drain the prefill, return the decode.
//!
//! Like SMG, the decode worker's response goes back to the client only once the prefill
//! response has ended well: a prefill failure can then still be retried, since no byte has
//! reached the client. A failed leg's worker is excluded from *its* leg on the next attempt
//! (the other leg routes as usual, so its pin stays where it is); `--retry-max-retries` counts
//! pair attempts. Each leg reports its outcome to its own pool's breaker. The prefill lease ends
//! with the prefill response; the decode lease goes with the decode response to the client.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::bootstrap::{Bootstrap, fresh_room, with_bootstrap};
use crate::body::ResBody;
use crate::error::GatewayError;
use crate::metrics::StatusLabels;
use crate::pd::PdLegs;
use crate::pool::{Conn, Fresh, Pool, Reuse};
use crate::proxy::Endpoint;
use crate::proxy::headers;
use crate::proxy::held::Held;
use crate::proxy::prepare::Prepared;
use crate::proxy::rank::with_rank;
use crate::proxy::respond::respond;
use crate::proxy::route::{RouteFacts, record_decision, route_error};
use crate::proxy::wait::response_within;
use crate::registry::Worker;
use crate::routing::{Leg, Outcome, WorkerId, is_retryable_status};
use crate::state::{AppState, with_rng};

/// Longest prefill error body kept for the gateway's error message.
const ERROR_BODY_LIMIT: usize = 2048;

/// How one pair attempt ended.
enum Pair {
    /// The prefill ended well and the decode worker answered (any non-retryable status).
    Done(Response<Incoming>, Conn),
    /// The prefill leg failed; `retryable` unless the prefill worker refused the request.
    PrefillFailed {
        error: GatewayError,
        retryable: bool,
    },
    /// The decode worker could not be reached or timed out.
    DecodeFailed(GatewayError),
    /// The decode worker answered 502/503/504.
    DecodeRetryable(Response<Incoming>, Conn),
}

/// Serves one request on a prefill and a decode worker.
pub(crate) async fn dispatch(
    state: &Arc<AppState>,
    legs: &PdLegs,
    pool: &Arc<Pool>,
    endpoint: Endpoint,
    prep: Prepared,
    start: Instant,
) -> Result<Response<ResBody>, GatewayError> {
    let Prepared {
        parts,
        held,
        inspected,
        tokens,
        inspect_body,
        view,
    } = prep;
    // `prepare` always reads the body in PD mode.
    let Held::Buffered(body) = held else {
        return Err(GatewayError::BadRequest(
            "PD mode needs the whole request body".to_owned(),
        ));
    };
    let facts = RouteFacts::new(
        endpoint,
        &parts,
        &inspected,
        tokens.as_deref(),
        inspect_body,
        &view,
    );
    let model = facts.model;
    let mut tried_prefill: Vec<WorkerId> = Vec::new();
    let mut tried_decode: Vec<WorkerId> = Vec::new();
    let mut attempts = 0u32;
    // The last attempt's failure: what the client gets when no other pair is left to try.
    let mut failed: Option<GatewayError> = None;
    loop {
        let (prefill_view, decode_view) = (legs.registry.view(), state.registry.view());
        let routed = facts
            .route(
                state,
                &legs.router,
                Leg::Prefill,
                &prefill_view,
                &tried_prefill,
            )
            .map_err(|e| route_error(state, &legs.router, e))
            .and_then(|p| {
                facts
                    .route(
                        state,
                        &state.router,
                        Leg::Decode,
                        &decode_view,
                        &tried_decode,
                    )
                    .map_err(|e| route_error(state, &state.router, e))
                    .map(|d| (p, d))
            });
        let (prefill, decode) = match (routed, failed.take()) {
            (Ok(pair), _) => pair,
            (Err(_), Some(last)) => return Err(last),
            (Err(e), None) => return Err(e),
        };
        let (Some(pw), Some(dw)) = (
            prefill_view.worker(prefill.worker).cloned(),
            decode_view.worker(decode.worker).cloned(),
        ) else {
            return Err(GatewayError::NoAvailableWorkers);
        };
        record_decision(state, &prefill, &pw, Leg::Prefill, model);
        record_decision(state, &decode, &dw, Leg::Decode, model);
        let (host, port) = legs.bootstrap(&pw);
        let room = fresh_room(with_rng(|r| r.next_u64()));
        let sent = with_bootstrap(
            &body,
            &Bootstrap {
                host: &host,
                port,
                room,
            },
        )
        .ok_or_else(|| {
            GatewayError::JsonParse(
                "prefill/decode disaggregation needs a JSON object request body".to_owned(),
            )
        })?;
        tracing::debug!(prefill = %pw.url, decode = %dw.url, room, "PD pair");
        let outcome = attempt(state, legs, pool, &parts, &pw, &dw, sent).await;
        // The prefill's work is over whatever happened: its lease ends here.
        drop(prefill);
        let retry_left = attempts < state.config.retry_max_retries;
        match outcome {
            Pair::Done(resp, conn) => {
                return Ok(respond(state, resp, conn, &dw, decode, start));
            }
            Pair::PrefillFailed { error, retryable } => {
                tracing::warn!(prefill = %pw.url, %error, "prefill leg failed");
                if !(retryable && retry_left) {
                    return Err(error);
                }
                tried_prefill.push(pw.id);
                failed = Some(error);
            }
            Pair::DecodeFailed(error) => {
                tracing::warn!(decode = %dw.url, %error, "decode leg failed");
                if !retry_left {
                    return Err(error);
                }
                tried_decode.push(dw.id);
                failed = Some(error);
            }
            Pair::DecodeRetryable(resp, conn) => {
                // Passed through when no other decode worker is left (as in regular mode).
                let others = decode_view.snapshot.candidates(model).len() > tried_decode.len() + 1;
                if !(retry_left && others) {
                    return Ok(respond(state, resp, conn, &dw, decode, start));
                }
                tried_decode.push(dw.id);
            }
        }
        attempts += 1;
        state.metrics.retries.inc();
    }
}

/// One pair attempt: both legs sent at once; the decode answer is taken once the prefill ended
/// well (a prefill failure drops the decode request, which cancels it on the worker).
#[allow(clippy::too_many_arguments)]
async fn attempt(
    state: &AppState,
    legs: &PdLegs,
    pool: &Arc<Pool>,
    parts: &http::request::Parts,
    pw: &Worker,
    dw: &Worker,
    body: Bytes,
) -> Pair {
    let timeout = state.config.request_timeout;
    let prefill = run_prefill(state, pool, parts, pw, body.clone(), timeout);
    let decode = send(pool, parts, dw, body, timeout);
    tokio::pin!(prefill, decode);
    let mut decoded = None;
    let prefilled = loop {
        tokio::select! {
            p = &mut prefill => break p,
            d = &mut decode, if decoded.is_none() => decoded = Some(d),
        }
    };
    if let Err((error, retryable)) = prefilled {
        if retryable {
            legs.registry.report(pw, Outcome::Failure);
        }
        return Pair::PrefillFailed { error, retryable };
    }
    legs.registry.report(pw, Outcome::Success);
    let decoded = match decoded {
        Some(d) => d,
        None => decode.await,
    };
    match decoded {
        Ok((resp, conn)) => {
            let status = resp.status().as_u16();
            count_status(state, status);
            if is_retryable_status(status) {
                state.registry.report(dw, Outcome::Failure);
                return Pair::DecodeRetryable(resp, conn);
            }
            let outcome = if status >= 500 {
                Outcome::Failure
            } else {
                Outcome::Success
            };
            state.registry.report(dw, outcome);
            Pair::Done(resp, conn)
        }
        Err(error) => {
            state.registry.report(dw, Outcome::Failure);
            Pair::DecodeFailed(error)
        }
    }
}

/// Sends the prefill leg and reads its response to the end. `Err((error, retryable))`: the
/// prefill did not end well; not retryable when the worker refused the request (4xx) or
/// answered a server error other than 502/503/504.
async fn run_prefill(
    state: &AppState,
    pool: &Arc<Pool>,
    parts: &http::request::Parts,
    pw: &Worker,
    body: Bytes,
    timeout: Duration,
) -> Result<(), (GatewayError, bool)> {
    let failed = |reason: String| GatewayError::PrefillFailed {
        worker: pw.url.to_string(),
        reason,
    };
    let (resp, conn) = send(pool, parts, pw, body, timeout).await.map_err(|e| {
        let reason = match e {
            GatewayError::UpstreamTimeout(_) => {
                "no answer within --request-timeout-secs".to_owned()
            }
            other => other.to_string(),
        };
        (failed(reason), true)
    })?;
    let status = resp.status().as_u16();
    count_status(state, status);
    let read = tokio::time::timeout(timeout, resp.into_body().collect()).await;
    let bytes = match read {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(e)) => return Err((failed(format!("its response broke off: {e}")), true)),
        Err(_) => {
            return Err((
                failed("its response did not end within --request-timeout-secs".to_owned()),
                true,
            ));
        }
    };
    conn.release();
    if (200..300).contains(&status) {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(ERROR_BODY_LIMIT)]).into_owned();
    if (400..500).contains(&status) {
        return Err((
            GatewayError::PrefillRejected {
                worker: pw.url.to_string(),
                status,
                reason: text,
            },
            false,
        ));
    }
    Err((
        failed(format!("it answered {status}: {text}")),
        is_retryable_status(status),
    ))
}

/// Sends one leg's request; a stale pooled connection is retried once on a fresh one (the
/// worker closed it after its previous reply: no failure of the worker).
async fn send(
    pool: &Arc<Pool>,
    parts: &http::request::Parts,
    worker: &Worker,
    body: Bytes,
    timeout: Duration,
) -> Result<(Response<Incoming>, Conn), GatewayError> {
    let up = leg_request(parts, worker, body.clone())?;
    let mut sent = response_within(pool.send(worker, up, Reuse::Pooled), timeout, None).await;
    if matches!(&sent, Some(Err(e)) if e.reused) {
        let up = leg_request(parts, worker, body)?;
        sent = response_within(pool.send(worker, up, Fresh), timeout, None).await;
    }
    match sent {
        Some(Ok(ok)) => Ok(ok),
        Some(Err(e)) => Err(GatewayError::UpstreamConnection {
            worker: worker.url.to_string(),
            reason: e.reason,
        }),
        None => Err(GatewayError::UpstreamTimeout(worker.url.to_string())),
    }
}

/// The request to one leg's worker: the client's method, path and end-to-end headers, the
/// worker's `Host`, and the body with the bootstrap fields (and a data-parallel rank).
fn leg_request(
    parts: &http::request::Parts,
    worker: &Worker,
    body: Bytes,
) -> Result<Request<crate::upstream::UpBody>, GatewayError> {
    let body = worker
        .addr
        .rank()
        .and_then(|r| with_rank(&body, r))
        .unwrap_or(body);
    let len = body.len();
    let mut up = Request::new(crate::upstream::UpBody::Full(Some(body)));
    *up.method_mut() = parts.method.clone();
    *up.uri_mut() = worker
        .addr
        .origin_uri(parts.uri.path_and_query().map_or("/", |pq| pq.as_str()))
        .map_err(|e| GatewayError::BadRequest(e.to_string()))?;
    let mut headers = headers::forward_request_headers(&parts.headers);
    headers.insert(header::HOST, worker.host_header.clone());
    headers.insert(header::CONTENT_LENGTH, http::HeaderValue::from(len));
    *up.headers_mut() = headers;
    Ok(up)
}

fn count_status(state: &AppState, status: u16) {
    state
        .metrics
        .upstream_status
        .get_or_create(&StatusLabels {
            status_code: status,
        })
        .inc();
}

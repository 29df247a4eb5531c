//! The PD attempts: route both legs, send both at once, drain the prefill, return the decode.
//!
//! Like SMG, the decode worker's response goes back to the client only once the prefill
//! response has ended well: a prefill failure can then still be retried, since no byte has
//! reached the client. A failed leg's worker is excluded from *its* leg on the next attempt
//! (the other leg routes as usual, so its pin stays where it is); `--retry-max-retries` counts
//! pair attempts. Each leg reports its outcome to its own pool's breaker. The prefill lease ends
//! with the prefill response; the decode lease goes with the decode response to the client. A
//! Responses answer's id is recorded for its chain (`chain.rs`) as in regular mode.

use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use http::Response;
use http_body_util::BodyExt;

use super::bootstrap::{Bootstrap, fresh_room, with_bootstrap};
use crate::error::GatewayError;
use crate::pd::PdLegs;
use crate::proxy::Endpoint;
use crate::proxy::chain::ChainWatch;
use crate::proxy::held::{ClientHead, Held, worker_head};
use crate::proxy::prepare::Prepared;
use crate::proxy::rank::with_rank;
use crate::proxy::respond::{Body, respond};
use crate::proxy::route::{RouteFacts, record_decision, route_error};
use crate::registry::{Registry, Worker};
use crate::rng::with_rng;
use crate::routing::{Leg, Outcome, WorkerId, is_retryable_status};
use crate::state::AppState;
use crate::upstream::{AttemptError, Pool, Target, UpBody, UpRequest, UpResponse, Upstream};

/// Longest prefill error body kept for the gateway's error message.
const ERROR_BODY_LIMIT: usize = 2048;

/// How one pair attempt ended.
enum Pair {
    /// The prefill ended well and the decode worker answered (any non-retryable status).
    Done(Response<UpResponse>),
    /// The prefill leg failed; `retryable` unless the prefill worker refused the request.
    PrefillFailed {
        error: GatewayError,
        retryable: bool,
    },
    /// The decode worker could not be reached or timed out.
    DecodeFailed(GatewayError),
    /// The decode worker answered 502/503/504.
    DecodeRetryable(Response<UpResponse>),
    /// The request could not be built for a worker: nothing to retry.
    Refused(GatewayError),
}

/// Serves one request on a prefill and a decode worker.
pub(crate) async fn dispatch(
    state: &Arc<AppState>,
    legs: &PdLegs,
    pool: &Arc<Pool>,
    endpoint: Endpoint,
    prep: Prepared,
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
        (inspect_body, feedback_read),
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
        let upstream = Upstream {
            pool,
            timeout: state.config.request_timeout,
            metrics: &state.metrics.upstream,
        };
        let outcome = attempt(&upstream, legs, &state.registry, &parts, &pw, &dw, sent).await;
        // The prefill's work is over whatever happened: its lease ends here.
        drop(prefill);
        let retry_left = attempts < state.config.retry_max_retries;
        match outcome {
            Pair::Done(resp) => {
                let chain = (endpoint == Endpoint::Responses)
                    .then(|| {
                        let key = decode.key.as_ref().map(|k| k.key.as_str());
                        ChainWatch::new(state, key, dw.id, Some(pw.id), model)
                    })
                    .flatten();
                return Ok(respond(state, resp, &dw, decode, start, chain));
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
            Pair::Refused(error) => return Err(error),
            Pair::DecodeRetryable(resp) => {
                // Passed through when no other decode worker is left (as in regular mode).
                let others = decode_view.snapshot.candidates(model).len() > tried_decode.len() + 1;
                if !(retry_left && others) {
                    return Ok(respond(state, resp, &dw, decode, start, None));
                }
                tried_decode.push(dw.id);
            }
        }
        attempts += 1;
        state.metrics.retries.inc();
    }
}

/// One pair attempt: both legs sent at once; the decode answer is taken once the prefill ended
/// well (a prefill failure drops the decode request, which cancels it on the worker). Each leg
/// is one [`Upstream::attempt`], which reports its outcome to the leg's own breaker.
async fn attempt(
    upstream: &Upstream<'_>,
    legs: &PdLegs,
    decode_registry: &Arc<Registry>,
    parts: &ClientHead,
    pw: &Worker,
    dw: &Worker,
    body: Bytes,
) -> Pair {
    let prefill = run_prefill(upstream, &legs.registry, parts, pw, body.clone());
    let decode = send(upstream, parts, dw, body, |o| {
        decode_registry.report(dw, o);
    });
    tokio::pin!(prefill, decode);
    let mut decoded = None;
    let prefilled = loop {
        tokio::select! {
            p = &mut prefill => break p,
            d = &mut decode, if decoded.is_none() => decoded = Some(d),
        }
    };
    if let Err((error, retryable)) = prefilled {
        return Pair::PrefillFailed { error, retryable };
    }
    let decoded = match decoded {
        Some(d) => d,
        None => decode.await,
    };
    match decoded {
        Ok(resp) if is_retryable_status(resp.status().as_u16()) => Pair::DecodeRetryable(resp),
        Ok(resp) => Pair::Done(resp),
        Err(AttemptError::Worker(error)) => Pair::DecodeFailed(error),
        Err(AttemptError::Request(error)) => Pair::Refused(error),
    }
}

/// Sends the prefill leg and reads its response to the end, keeping at most
/// [`ERROR_BODY_LIMIT`] bytes (for the error message; a 2xx body is discarded as it arrives).
/// `Err((error, retryable))`: the prefill did not end well; not retryable when the worker
/// refused the request (4xx) or answered a server error other than 502/503/504.
async fn run_prefill(
    upstream: &Upstream<'_>,
    registry: &Arc<Registry>,
    parts: &ClientHead,
    pw: &Worker,
    body: Bytes,
) -> Result<(), (GatewayError, bool)> {
    let failed = |reason: String| GatewayError::PrefillFailed {
        worker: pw.url.to_string(),
        reason,
    };
    let report = |o| {
        registry.report(pw, o);
    };
    let resp = match send(upstream, parts, pw, body, report).await {
        Ok(sent) => sent,
        Err(AttemptError::Worker(GatewayError::UpstreamTimeout(_))) => {
            return Err((
                failed("no answer within --request-timeout-secs".to_owned()),
                true,
            ));
        }
        Err(AttemptError::Worker(e)) => return Err((failed(e.to_string()), true)),
        Err(AttemptError::Request(e)) => return Err((e, false)),
    };
    let status = resp.status().as_u16();
    let keep = if (200..300).contains(&status) {
        0
    } else {
        ERROR_BODY_LIMIT
    };
    let read = tokio::time::timeout(upstream.timeout, read_capped(resp.into_body(), keep)).await;
    let kept = match read {
        Ok(Ok(kept)) => kept,
        Ok(Err(e)) => {
            report(Outcome::Failure);
            return Err((failed(format!("its response broke off: {e}")), true));
        }
        Err(_) => {
            report(Outcome::Failure);
            return Err((
                failed("its response did not end within --request-timeout-secs".to_owned()),
                true,
            ));
        }
    };
    if (200..300).contains(&status) {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&kept).into_owned();
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

/// Reads `body` to its end, keeping its first `keep` bytes.
async fn read_capped<B>(mut body: B, keep: usize) -> Result<Bytes, B::Error>
where
    B: http_body::Body<Data = Bytes> + Unpin,
{
    let mut kept = BytesMut::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            let room = keep.saturating_sub(kept.len());
            kept.extend_from_slice(&data[..data.len().min(room)]);
        }
    }
    Ok(kept.freeze())
}

/// Sends one leg's request as one attempt (stale-connection re-send, timeout, status count and
/// breaker report are the attempt's).
async fn send(
    upstream: &Upstream<'_>,
    parts: &ClientHead,
    worker: &Worker,
    body: Bytes,
    report: impl Fn(Outcome),
) -> Result<Response<UpResponse>, AttemptError> {
    let target = Target {
        id: worker.id,
        addr: &worker.addr,
        url: &worker.url,
    };
    upstream
        .attempt(
            target,
            None,
            || Ok(Some(leg_request(parts, worker, body.clone()))),
            report,
        )
        .await
}

/// The request to one leg's worker: the client's method, path and end-to-end headers, the
/// worker's `Host`, and the body with the bootstrap fields (and a data-parallel rank).
fn leg_request<'a>(parts: &'a ClientHead, worker: &'a Worker, body: Bytes) -> UpRequest<'a> {
    let body = worker
        .addr
        .rank()
        .and_then(|r| with_rank(&body, r))
        .unwrap_or(body);
    let head = worker_head(parts, worker, Some(body.len() as u64));
    UpRequest {
        head,
        body: UpBody::Full(Some(body)),
    }
}

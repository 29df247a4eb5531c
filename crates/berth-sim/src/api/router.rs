//! Request dispatch: which endpoint answers, and the steps every inference request takes before
//! the engine sees it (count, record, faults, model check).

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde_json::Value;

use super::generation::{self, Call};
use super::request::{self, GenApi};
use super::respond::{self, SimResponse};
use super::{control, discovery, metrics, pooling};
use crate::pd::{Bootstrap, PdMode, Role, wait_for_room};
use crate::record::RequestRecord;
use crate::state::Shared;
use crate::stats::Counters;

/// Largest request body read (bytes).
const MAX_BODY: usize = 64 << 20;

/// Inference endpoints.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Inference {
    Generation(GenApi),
    Embeddings,
    Rerank,
    Classify,
}

fn inference_route(path: &str) -> Option<Inference> {
    Some(match path {
        "/v1/chat/completions" => Inference::Generation(GenApi::Chat),
        "/v1/completions" => Inference::Generation(GenApi::Completion),
        "/generate" => Inference::Generation(GenApi::Generate),
        "/v1/messages" => Inference::Generation(GenApi::Messages),
        "/v1/responses" => Inference::Generation(GenApi::Responses),
        "/v1/embeddings" => Inference::Embeddings,
        "/v1/rerank" => Inference::Rerank,
        "/v1/classify" => Inference::Classify,
        _ => return None,
    })
}

/// Answers one request; every response carries `x-sim-worker-id`.
pub(crate) async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> SimResponse {
    let mut resp = route(&shared, req).await;
    if let Ok(id) = HeaderValue::from_str(&shared.worker_id) {
        resp.headers_mut().insert("x-sim-worker-id", id);
    }
    resp
}

async fn route(shared: &Arc<Shared>, req: Request<Incoming>) -> SimResponse {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path();
    if parts.method == Method::POST
        && let Some(kind) = inference_route(path)
    {
        let body = match read_body(body).await {
            Ok(b) => b,
            Err(resp) => return resp,
        };
        return inference(shared, kind, parts, body).await;
    }
    match (&parts.method, path) {
        (&Method::GET, "/health" | "/health_generate") => discovery::health(shared),
        (&Method::GET, "/v1/models") => discovery::models(shared),
        (&Method::GET, "/server_info" | "/get_server_info") => discovery::server_info(shared),
        (&Method::GET, "/model_info" | "/get_model_info") => discovery::model_info(shared),
        (&Method::GET, "/v1/loads" | "/get_load") => discovery::loads(shared),
        (&Method::GET, "/metrics") => metrics::render(shared),
        (&Method::GET | &Method::POST, "/flush_cache") => control::flush_cache(shared),
        (&Method::GET, "/sim/faults") => control::get_faults(shared),
        (&Method::POST, "/sim/faults") => match read_body(body).await {
            Ok(b) => control::set_faults(shared, &b),
            Err(resp) => resp,
        },
        (&Method::GET, "/sim/requests") => control::requests(shared),
        (&Method::DELETE, "/sim/requests") => control::clear_requests(shared),
        (&Method::GET, "/sim/stats") => control::stats(shared),
        // Lets the crate's own tests check that `SimHandle::join` re-raises handler panics.
        #[cfg(test)]
        (&Method::GET, "/sim/test-panic") => panic!("test-only panic route"),
        _ => respond::error(
            StatusCode::NOT_FOUND,
            "NotFoundError",
            &format!("no route for {path}"),
            None,
        ),
    }
}

async fn read_body(body: Incoming) -> Result<Bytes, SimResponse> {
    match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(err) => Err(respond::bad_request(&format!(
            "cannot read request body: {err}"
        ))),
    }
}

async fn inference(
    shared: &Arc<Shared>,
    kind: Inference,
    parts: http::request::Parts,
    raw: Bytes,
) -> SimResponse {
    let seq = Counters::bump(&shared.counters.requests, 1);
    let body: Result<Value, _> = serde_json::from_slice(&raw);
    let rid = body.as_ref().ok().and_then(request::rid_of);
    let model = body
        .as_ref()
        .ok()
        .and_then(request::model_of)
        .map(str::to_owned);
    if shared.recorder.enabled() {
        shared.recorder.push(RequestRecord {
            seq,
            method: parts.method.to_string(),
            path: parts.uri.path().to_owned(),
            headers: parts.headers,
            rid: rid.clone(),
            model: model.clone(),
            body: raw,
        });
    }

    let faults = shared.faults.get();
    if faults.exit_after_requests.is_some_and(|n| seq >= n) {
        shared.exit();
        return respond::injected(StatusCode::SERVICE_UNAVAILABLE.as_u16());
    }
    if faults.hang {
        shared.faults.wait_while_hanging().await;
    }
    if faults.first_byte_delay_ms > 0 {
        tokio::time::sleep(faults.first_byte_delay()).await;
    }
    if let Some(status) = shared.faults.injected_error(&faults) {
        Counters::bump(&shared.counters.errors_injected, 1);
        return respond::injected(status);
    }

    let Ok(body) = body else {
        return respond::bad_request("request body is not valid JSON");
    };
    let model = match model {
        // SGLang's native `/generate` has no model field and ignores one (SMG sends
        // `"model": "unknown"`), so only the OpenAI and Anthropic APIs are model-scoped.
        _ if matches!(kind, Inference::Generation(GenApi::Generate)) => {
            shared.default_model().to_owned()
        }
        Some(m) if !shared.serves(&m) => {
            Counters::bump(&shared.counters.unknown_model, 1);
            return respond::unknown_model(&m);
        }
        Some(m) => m,
        None => shared.default_model().to_owned(),
    };

    match kind {
        Inference::Generation(api) => {
            let req = match request::parse(api, &body) {
                Ok(r) => r,
                Err(msg) => return respond::bad_request(&msg),
            };
            let wanted = req.prompt.len() as u64
                + u64::from(req.max_tokens.unwrap_or(shared.config.default_max_tokens));
            if wanted > shared.config.context_length {
                return respond::bad_request(&format!(
                    "This model's maximum context length is {} tokens. However, you requested \
                     {wanted} tokens ({} in the messages, {} in the completion).",
                    shared.config.context_length,
                    req.prompt.len(),
                    wanted - req.prompt.len() as u64,
                ));
            }
            let role = match pd_role(shared, &body).await {
                Ok(role) => role,
                Err(resp) => return resp,
            };
            let stream = req.stream;
            let call = Call {
                role,
                shared: Arc::clone(shared),
                req,
                model,
                rid,
                seq,
                faults,
            };
            if stream {
                generation::streamed(call)
            } else {
                generation::whole(call).await
            }
        }
        Inference::Embeddings => pooling::embeddings(shared, &model, &body),
        Inference::Rerank => pooling::rerank(shared, &model, &body),
        Inference::Classify => pooling::classify(shared, &model, &body),
    }
}

/// The request's part in a prefill/decode pair. A PD-mode worker refuses a request without the
/// bootstrap fields (400); a decode worker waits here, before answering anything, for the room's
/// KV cache (500 when it never comes).
async fn pd_role(shared: &Shared, body: &Value) -> Result<Role, SimResponse> {
    match shared.config.mode {
        PdMode::Regular => Ok(Role::Regular),
        PdMode::Prefill => Bootstrap::of(body, false)
            .map(|b| Role::Prefill { room: b.room })
            .map_err(|m| respond::bad_request(&m)),
        PdMode::Decode => {
            let b = Bootstrap::of(body, true).map_err(|m| respond::bad_request(&m))?;
            wait_for_room(&b, shared.config.bootstrap_timeout)
                .await
                .map(Role::Decode)
                .map_err(|m| {
                    tracing::warn!(room = b.room, error = %m, "KV transfer failed");
                    respond::error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "InternalServerError",
                        &m,
                        None,
                    )
                })
        }
    }
}

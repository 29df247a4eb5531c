//! Request dispatch: which handler serves a method and path, and who may call it.
//!
//! Generation routes need `--api-key` when set; `/workers` and `/sticky/{key}` need
//! `--admin-api-key` (or, without it, `--api-key`) when set; `/v1/models` and the health routes stay open.

use std::convert::Infallible;
use std::sync::Arc;

use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;

use crate::admin;
use crate::body::ResBody;
use crate::config::Secret;
use crate::error::GatewayError;
use crate::proxy::{Endpoint, proxy};
use crate::state::{AppState, IoCtx};
use crate::store;

/// Serves one request. Never fails: every error is a response.
pub(crate) async fn handle(
    io: Arc<IoCtx>,
    req: Request<Incoming>,
) -> Result<Response<ResBody>, Infallible> {
    let state = &io.state;
    if let Some(endpoint) = Endpoint::from_path(req.uri().path()) {
        if req.method() != Method::POST {
            return Ok(GatewayError::MethodNotAllowed(req.method().to_string()).to_response());
        }
        if !authorized(req.headers(), state.config.api_key.as_ref()) {
            return Ok(GatewayError::Unauthorized.to_response());
        }
        return Ok(proxy(state, &io.pool, endpoint, req).await);
    }
    Ok(other(state, req).await.unwrap_or_else(|e| e.to_response()))
}

async fn other(
    state: &Arc<AppState>,
    req: Request<Incoming>,
) -> Result<Response<ResBody>, GatewayError> {
    let path = req.uri().path();
    let method = req.method().clone();
    let wrong_method = || GatewayError::MethodNotAllowed(method.to_string());
    match path {
        "/health" | "/liveness" | "/readiness" | "/v1/models" if method != Method::GET => {
            Err(wrong_method())
        }
        "/health" | "/liveness" => Ok(admin::json(
            StatusCode::OK,
            &serde_json::json!({"status": "ok"}),
        )),
        "/readiness" => {
            // PD mode: a pair needs a prefill worker too.
            let prefill_ready = state
                .pd
                .as_ref()
                .is_none_or(|pd| pd.registry.view().any_available);
            if state.registry.view().any_available && prefill_ready {
                Ok(admin::json(
                    StatusCode::OK,
                    &serde_json::json!({"status": "ready"}),
                ))
            } else {
                Err(GatewayError::NoAvailableWorkers)
            }
        }
        "/v1/models" => Ok(models(state)),
        "/workers" | "/workers/" => {
            if !authorized(req.headers(), admin_key(state)) {
                return Err(GatewayError::Unauthorized);
            }
            match method {
                Method::GET => Ok(admin::list(state)),
                Method::POST => admin::add(state, req.into_body()).await,
                _ => Err(wrong_method()),
            }
        }
        p if p.starts_with("/workers/") => {
            if !authorized(req.headers(), admin_key(state)) {
                return Err(GatewayError::Unauthorized);
            }
            if method != Method::DELETE {
                return Err(wrong_method());
            }
            admin::remove(state, &p["/workers/".len()..])
        }
        p if p.starts_with("/sticky/") => {
            if !authorized(req.headers(), admin_key(state)) {
                return Err(GatewayError::Unauthorized);
            }
            let (key, query) = (&p["/sticky/".len()..], req.uri().query());
            match method {
                Method::GET => store::show(state, key, query).await,
                Method::DELETE => store::delete(state, key, query).await,
                _ => Err(wrong_method()),
            }
        }
        _ => Err(GatewayError::NotFound(path.to_owned())),
    }
}

/// `GET /v1/models`: the union of the workers' models.
fn models(state: &AppState) -> Response<ResBody> {
    let view = state.registry.view();
    let data: Vec<_> = view
        .models
        .iter()
        .map(|m| serde_json::json!({"id": &**m, "object": "model", "owned_by": "berth"}))
        .collect();
    admin::json(
        StatusCode::OK,
        &serde_json::json!({"object": "list", "data": data}),
    )
}

/// The key `/workers` needs: `--admin-api-key`, else `--api-key` (the admin API is never open
/// while generation is guarded).
fn admin_key(state: &AppState) -> Option<&Secret> {
    state
        .config
        .admin_api_key
        .as_ref()
        .or(state.config.api_key.as_ref())
}

/// `Authorization: Bearer <key>` matches `key` (or no key is configured).
fn authorized(headers: &HeaderMap, key: Option<&Secret>) -> bool {
    let Some(key) = key else { return true };
    let Some(given) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
    else {
        return false;
    };
    constant_time_eq(given, key.0.as_bytes())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

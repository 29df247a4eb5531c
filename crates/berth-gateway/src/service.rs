//! Request dispatch: which handler serves a method and path, and who may call it.
//!
//! Generation routes need `--api-key` when set; the admin routes (`admin/routes.rs`) need
//! `--admin-api-key` (or, without it, `--api-key`) when set; `/v1/models`, the health routes
//! and the info routes stay open. Every response gets its `x-request-id` here.

use std::convert::Infallible;
use std::sync::Arc;

use http::{HeaderMap, Method, Request, Response, header};
use hyper::body::Incoming;

use crate::admin;
use crate::body::ResBody;
use crate::config::Secret;
use crate::error::GatewayError;
use crate::proxy::{Endpoint, proxy};
use crate::request_id;
use crate::state::{AppState, IoCtx};

/// Serves one request. Never fails: every error is a response. Every response carries an
/// `x-request-id` (the client's own, or a fresh one).
pub(crate) async fn handle(
    io: Arc<IoCtx>,
    req: Request<Incoming>,
) -> Result<Response<ResBody>, Infallible> {
    let id = request_id::for_request(req.headers(), req.uri().path());
    let mut resp = dispatch(io, req).await;
    request_id::stamp(&mut resp, id);
    Ok(resp)
}

async fn dispatch(io: Arc<IoCtx>, req: Request<Incoming>) -> Response<ResBody> {
    let state = &io.state;
    if let Some(endpoint) = Endpoint::from_path(req.uri().path()) {
        if req.method() != Method::POST {
            return GatewayError::MethodNotAllowed(req.method().to_string()).to_response();
        }
        if !authorized(req.headers(), state.config.api_key.as_ref()) {
            return GatewayError::Unauthorized.to_response();
        }
        return proxy(state, &io.pool, endpoint, req).await;
    }
    admin::serve(state, req)
        .await
        .unwrap_or_else(|e| e.to_response())
}

/// The key the admin routes need: `--admin-api-key`, else `--api-key` (the admin API is never open
/// while generation is guarded).
pub(crate) fn admin_key(state: &AppState) -> Option<&Secret> {
    state
        .config
        .admin_api_key
        .as_ref()
        .or(state.config.api_key.as_ref())
}

/// `Authorization: Bearer <key>` matches `key` (or no key is configured).
pub(crate) fn authorized(headers: &HeaderMap, key: Option<&Secret>) -> bool {
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

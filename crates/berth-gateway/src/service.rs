//! Request dispatch: which handler serves a method and path, and who may call it.
//!
//! Generation routes need `--api-key` when set; the admin routes (`admin/routes.rs`) need
//! `--admin-api-key` (or, without it, `--api-key`) when set; `/v1/models`, the health routes
//! and the info routes stay open. Generation routes then pass admission control (`admission/`)
//! when a limit is configured. Every response gets its `x-request-id` here and is counted in
//! `smg_http_responses_total`.

use std::convert::Infallible;
use std::sync::Arc;

use crate::request_body::ConnBody;
use http::{Method, Request, Response};

use crate::admin::{self, authorized};
use crate::admission;
use crate::error::{GatewayError, SseStyle};
use crate::fields::Fields;
use crate::proxy::{self, Body, ClientHead, Endpoint};
use crate::request_body::ClientBody;
use crate::request_id;
use crate::state::IoCtx;

/// Serves one request (its header map empty: its header fields are `fields`). Never fails:
/// every error is a response. Every response carries an `x-request-id` (the client's own, or a
/// fresh one).
pub(crate) async fn handle(
    io: Arc<IoCtx>,
    req: Request<ConnBody>,
    fields: Fields,
) -> Result<Response<Body>, Infallible> {
    let id = request_id::for_request(&fields, req.uri().path());
    let state = io.state.clone();
    let mut resp = dispatch(io, req, fields).await;
    request_id::stamp(&mut resp, id);
    state
        .metrics
        .response(resp.status(), resp.headers(), resp.body().is_proxied());
    Ok(resp)
}

async fn dispatch(io: Arc<IoCtx>, mut req: Request<ConnBody>, fields: Fields) -> Response<Body> {
    let state = &io.state;
    if let Some(endpoint) = Endpoint::from_path(req.uri().path()) {
        if req.method() != Method::POST {
            return GatewayError::MethodNotAllowed(req.method().to_string()).to_response();
        }
        // (the header is looked for only when a key is set)
        if let Some(key) = state.config.api_key.as_ref()
            && !authorized(fields.first("authorization"), Some(key))
        {
            return GatewayError::Unauthorized.to_response();
        }
        let (parts, body) = req.into_parts();
        let head = ClientHead {
            method: parts.method,
            uri: parts.uri,
            fields,
        };
        let mut body = ClientBody::new(body);
        let permit = match &state.admission {
            None => None,
            Some(adm) => match admission::admit(adm, &mut body).await {
                Ok(permit) => Some(permit),
                Err(err) => {
                    tracing::debug!(code = err.code().as_str(), error = %err, "request not admitted");
                    return err.to_response();
                }
            },
        };
        let mut resp = proxy::proxy(state, &io.pool, endpoint, head, body).await;
        if let Some(permit) = permit {
            proxy::hold_permit(&mut resp, permit);
        }
        if endpoint == Endpoint::Messages {
            proxy::set_sse_style(&mut resp, SseStyle::Anthropic);
        }
        return resp;
    }
    // the admin routes read the request through a header map: built here, only for them
    *req.headers_mut() = fields.to_map();
    // boxed: the admin routes' future is larger than the proxy path's and would otherwise
    // size every request's future (hyper moves it once per request)
    Box::pin(admin::serve(state, req))
        .await
        .unwrap_or_else(|e| e.to_response())
}

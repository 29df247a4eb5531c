//! Request dispatch: which handler serves a method and path, and who may call it.
//!
//! Generation routes need `--api-key` when set; the admin routes (`admin/routes.rs`) need
//! `--admin-api-key` (or, without it, `--api-key`) when set; `/v1/models`, the health routes
//! and the info routes stay open. Generation routes then pass admission control (`admission/`)
//! when a limit is configured. Every response gets its `x-request-id` here and is counted in
//! `smg_http_responses_total`.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use crate::request_body::ConnBody;
use http::{Method, Request, Response, Version};

use crate::admin::{self, authorized};
use crate::admission;
use crate::error::{GatewayError, SseStyle};
use crate::fields::{Fields, Target};
use crate::proxy::{self, Body, ClientHead, Endpoint};
use crate::request_body::ClientBody;
use crate::request_id;
use crate::state::{AppState, IoCtx};

/// A request as the connection read it: its target and header fields as the head's bytes (no
/// `Uri`, no header map), its body read from the connection.
pub(crate) struct Req {
    pub(crate) method: Method,
    pub(crate) target: Target,
    pub(crate) version: Version,
    pub(crate) fields: Fields,
    pub(crate) body: ConnBody,
}

/// Serves one request. Never fails:
/// every error is a response. Every response carries an `x-request-id` (the client's own, or a
/// fresh one).
///
/// What can be decided at once (the route, the method, the key) is decided before the future
/// is made, so the future keeps only what its awaits need: one future for the service, with
/// the proxy's future in it (not a future per step, each a copy of the one below it).
pub(crate) fn handle(
    io: Arc<IoCtx>,
    req: Req,
) -> impl Future<Output = Result<Response<Body>, Infallible>> {
    // (the path is matched once: for the route and for a fresh id's prefix)
    let endpoint = Endpoint::from_path(req.target.path(&req.fields));
    let id = request_id::with_prefix(&req.fields, endpoint.map_or("req-", Endpoint::id_prefix));
    let route = route(&io, req, endpoint);
    async move {
        let state = &io.state;
        let mut resp = match route {
            Route::Answered(resp) => resp,
            Route::Generate(endpoint, head, mut body) => {
                let permit = match &state.admission {
                    None => None,
                    Some(adm) => match admission::admit(adm, &mut body).await {
                        Ok(permit) => Some(permit),
                        Err(err) => {
                            tracing::debug!(code = err.code().as_str(), error = %err, "request not admitted");
                            let mut resp = err.to_response();
                            finish(state, &mut resp, id);
                            return Ok(resp);
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
                resp
            }
            // boxed: the admin routes' future is larger than the proxy path's and would
            // otherwise size every request's future
            Route::Admin(req) => Box::pin(admin::serve(state, req))
                .await
                .unwrap_or_else(|e| e.to_response()),
        };
        // (in place: the response is not moved in and out again)
        finish(state, &mut resp, id);
        Ok(resp)
    }
}

/// Where a request goes, as far as its head decides.
enum Route {
    /// Answered at once (a refusal).
    Answered(Response<Body>),
    /// A generation route, past its method and key checks.
    Generate(Endpoint, ClientHead, ClientBody),
    /// Everything else: the admin routes (the request with its header map built).
    Admin(Request<ConnBody>),
}

fn route(io: &IoCtx, req: Req, endpoint: Option<Endpoint>) -> Route {
    let state = &io.state;
    let Req {
        method,
        target,
        version,
        fields,
        body,
    } = req;
    let Some(endpoint) = endpoint else {
        // the admin routes read the request through a `Uri` and a header map: built here,
        // only for them
        let mut req = Request::new(body);
        *req.method_mut() = method;
        *req.uri_mut() = target.to_uri(&fields);
        *req.version_mut() = version;
        *req.headers_mut() = fields.to_map();
        return Route::Admin(req);
    };
    if method != Method::POST {
        let err = GatewayError::MethodNotAllowed(method.to_string());
        return Route::Answered(err.to_response());
    }
    // (the header is looked for only when a key is set)
    if let Some(key) = state.config.api_key.as_ref()
        && !authorized(fields.first("authorization"), Some(key))
    {
        return Route::Answered(GatewayError::Unauthorized.to_response());
    }
    let head = ClientHead { target, fields };
    Route::Generate(endpoint, head, ClientBody::new(body))
}

/// Stamps the response's `x-request-id` and counts it.
fn finish(state: &AppState, resp: &mut Response<Body>, id: request_id::RequestId) {
    // a worker's response keeps it beside its fields; a response the gateway made, in its map
    if let Some(id) = proxy::set_request_id(resp, id) {
        request_id::stamp(resp, &id);
    }
    state
        .metrics
        .response(resp.status(), resp.headers(), resp.body().is_proxied());
}

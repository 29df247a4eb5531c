//! One proxied request, start to finish, as named stages:
//!
//! 1. inspect (`prepare.rs`): body path, reading or holding the body, model check, counting;
//! 2. route (`route.rs`): the core's decision on the current worker view;
//! 3. dispatch: the attempts, by the regular dispatcher (`dispatch.rs`) or, in PD mode, the
//!    prefill/decode dispatcher (`pd/`), which routes and sends both legs;
//! 4. respond (`respond.rs`): the worker's response streamed back with
//!    `x-smg-routed-worker-id` and the lease attached.

use std::sync::Arc;
use std::time::Instant;

use http::Response;

use super::held::ClientHead;
use super::prepare::prepare;
use super::respond::Body;
use super::{Endpoint, dispatch, pd, scan_keys, session};
use crate::error::GatewayError;
use crate::request_body::ClientBody;
use crate::state::AppState;
use crate::upstream::Pool;

/// Proxies one generation request; every failure becomes its gateway error response.
///
/// One future for the stages (not one per stage nested in another, each a copy of the one
/// below it); what a stage takes is moved into the next stage's future, and a value moved
/// out keeps no place in this future beside it.
pub(crate) async fn proxy(
    state: &Arc<AppState>,
    pool: &Arc<Pool>,
    endpoint: Endpoint,
    head: ClientHead,
    body: ClientBody,
) -> Response<Body> {
    let start = Instant::now();
    let mut prepared = match prepare(state, endpoint, head, body, start).await {
        Ok(prepared) => prepared,
        Err(err) => return refused(err),
    };
    // A session control applies once the request has been answered (or refused), before
    // its response goes back. A streamed body's is seen by the scan as the body passes (a
    // worker has read the whole body before it answers).
    let known = prepared.inspected.session.clone();
    let late = prepared.nvext.clone();
    let model = (known.is_some() || late.is_some())
        .then(|| prepared.model().map(str::to_owned))
        .flatten();
    // Each dispatcher's future awaited where it is made: not wrapped in an `Either` and
    // moved again to be awaited, each move a copy of the whole dispatch future. The regular
    // dispatcher borrows `prepared` where it lies (its future a few references, not a copy
    // of the request's parts); PD's boxed future takes it.
    let resp = match &state.pd {
        None => dispatch::regular(state, pool, endpoint, &mut prepared, start).await,
        // boxed: PD's future (two legs at once) would otherwise size every request's future
        Some(legs) => Box::pin(pd::dispatch(state, legs, pool, endpoint, prepared, start)).await,
    };
    let seen = known
        .map(|s| *s)
        .or_else(|| late?.get().and_then(scan_keys::session_of));
    if let Some((action, id)) = seen {
        // boxed: rare, and its future would otherwise size every request's future
        Box::pin(session::control(state, action, &id, model.as_deref())).await;
    }
    resp.unwrap_or_else(refused)
}

/// A refused request's error response.
fn refused(err: GatewayError) -> Response<Body> {
    tracing::debug!(code = err.code().as_str(), error = %err, "request refused");
    err.to_response()
}

//! The admin API's view of the two pools (`GET/POST/DELETE /workers`).
//!
//! SMG's request shape: `POST /workers` takes `"worker_type"` (`prefill`, `decode`, or
//! `regular`) and, for a prefill worker, `"bootstrap_port"`. In PD mode a worker without a type
//! is a decode worker; outside PD mode only `regular` (or no type) is accepted. `GET /workers`
//! lists both pools with each worker's type; `DELETE /workers/{id-or-url}` finds the worker in
//! either.

use std::sync::Arc;

use crate::error::GatewayError;
use crate::registry::{Registry, Worker};
use crate::state::AppState;

/// The pool a `POST /workers` goes to.
pub(crate) fn registry_for<'a>(
    state: &'a AppState,
    worker_type: Option<&str>,
    bootstrap_port: Option<u16>,
) -> Result<&'a Arc<Registry>, GatewayError> {
    let bad = |m: &str| Err(GatewayError::BadRequest(m.to_owned()));
    match (worker_type, &state.pd) {
        (Some("prefill"), Some(pd)) => Ok(&pd.registry),
        (None | Some("decode"), Some(_)) if bootstrap_port.is_none() => Ok(&state.registry),
        (None | Some("regular"), None) if bootstrap_port.is_none() => Ok(&state.registry),
        (_, _) if bootstrap_port.is_some() && worker_type != Some("prefill") => {
            bad("bootstrap_port is for a prefill worker (\"worker_type\": \"prefill\")")
        }
        (Some("prefill" | "decode"), None) => {
            bad("prefill and decode workers need the gateway in --pd-disaggregation mode")
        }
        (Some("regular"), Some(_)) => bad(
            "this gateway runs --pd-disaggregation: \"worker_type\" is \"prefill\" or \"decode\"",
        ),
        (Some(other), _) => bad(&format!(
            "unknown worker_type `{other}` (regular, prefill or decode)"
        )),
        (None, _) => bad("unsupported worker"),
    }
}

/// The prefill workers (none outside PD mode).
pub(crate) fn prefill_workers(state: &AppState) -> Vec<Arc<Worker>> {
    state
        .pd
        .as_ref()
        .map(|pd| pd.registry.workers())
        .unwrap_or_default()
}

/// Removes a prefill worker by id or URL.
pub(crate) fn remove_prefill(state: &AppState, id_or_url: &str) -> Option<Arc<Worker>> {
    let pd = state.pd.as_ref()?;
    let worker = pd.registry.remove(id_or_url)?;
    pd.forget_port(&worker.url);
    Some(worker)
}

fn is_prefill(state: &AppState, w: &Worker) -> bool {
    state.pd.as_ref().is_some_and(|pd| {
        pd.registry
            .view()
            .worker(w.id)
            .is_some_and(|p| std::ptr::eq(&**p, w))
    })
}

/// `regular`, or in PD mode `prefill` / `decode`.
pub(crate) fn worker_type(state: &AppState, w: &Worker) -> &'static str {
    match &state.pd {
        None => "regular",
        Some(_) if is_prefill(state, w) => "prefill",
        Some(_) => "decode",
    }
}

/// A prefill worker's bootstrap port (`null` otherwise, and for `none`).
pub(crate) fn bootstrap_port(state: &AppState, w: &Worker) -> Option<u16> {
    let pd = state.pd.as_ref()?;
    is_prefill(state, w).then(|| pd.bootstrap(w).1).flatten()
}

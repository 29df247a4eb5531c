//! The worker's own control endpoints under `/sim/`: faults, received requests, counters.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use serde_json::{Value, json};

use super::respond::{self, SimResponse};
use crate::faults::Faults;
use crate::state::Shared;

pub(crate) fn get_faults(shared: &Arc<Shared>) -> SimResponse {
    respond::json(StatusCode::OK, &json!(shared.faults.get()))
}

/// `POST /sim/faults`: replaces the fault set; `"exit": true` makes the worker die right after
/// answering.
pub(crate) fn set_faults(shared: &Arc<Shared>, body: &Bytes) -> SimResponse {
    let mut value: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(err) => return respond::bad_request(&format!("faults must be JSON: {err}")),
    };
    let exit = value
        .as_object_mut()
        .and_then(|o| o.remove("exit"))
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    let faults: Faults = match serde_json::from_value(value) {
        Ok(f) => f,
        Err(err) => return respond::bad_request(&format!("invalid faults: {err}")),
    };
    if let Err(err) = faults.validate() {
        return respond::bad_request(&err.to_string());
    }
    shared.faults.set(faults.clone());
    if exit {
        let shared = Arc::clone(shared);
        // Let this answer reach the client before every connection is cut.
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            shared.exit();
        });
    }
    respond::json(StatusCode::OK, &json!({"faults": faults, "exit": exit}))
}

pub(crate) fn requests(shared: &Arc<Shared>) -> SimResponse {
    let records: Vec<Value> = shared
        .recorder
        .snapshot()
        .iter()
        .map(|r| r.to_json())
        .collect();
    respond::json(
        StatusCode::OK,
        &json!({"worker_id": shared.worker_id, "requests": records}),
    )
}

pub(crate) fn clear_requests(shared: &Arc<Shared>) -> SimResponse {
    shared.recorder.clear();
    respond::json(StatusCode::OK, &json!({"cleared": true}))
}

pub(crate) fn stats(shared: &Arc<Shared>) -> SimResponse {
    respond::json(
        StatusCode::OK,
        &json!({"worker_id": shared.worker_id, "stats": shared.stats()}),
    )
}

/// `/flush_cache` (SGLang's, which SMG fans out): drops every KV block not in use.
pub(crate) fn flush_cache(shared: &Arc<Shared>) -> SimResponse {
    let blocks = shared.engine.flush_cache();
    respond::json(
        StatusCode::OK,
        &json!({"message": "Cache flushed.", "flushed_blocks": blocks}),
    )
}

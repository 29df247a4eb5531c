//! `GET /sticky/{key}` (where a key is pinned, here and in the store) and
//! `DELETE /sticky/{key}` (drop it everywhere: a session close for operators and clients).
//!
//! `{key}` is the routing key (percent-encoded), as derived from a request (a rid's lineage
//! suffixes already stripped). Under the override pins are per model: `?model=NAME` picks it,
//! defaulting to the fleet's only model. Guarded like `/workers`.

use http::{Response, StatusCode};

use super::respond::json;
use super::workers::percent_decode;
use crate::error::GatewayError;
use crate::proxy::Body;
use crate::registry::View;
use crate::routing::Leg;
use crate::state::AppState;
use crate::store::{Store, decode_urls};

/// The key, model and pin hash a `/sticky/{key}` request names.
struct Target {
    key: String,
    model: Option<String>,
    hash: u128,
}

fn target(
    state: &AppState,
    view: &View,
    raw_key: &str,
    query: Option<&str>,
) -> Result<Target, GatewayError> {
    let key = percent_decode(raw_key);
    if key.is_empty() || key.len() > 128 {
        return Err(GatewayError::BadRequest(
            "the routing key must be 1 to 128 bytes".to_owned(),
        ));
    }
    let model = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|kv| kv.strip_prefix("model="))
        .map(percent_decode)
        .or_else(|| view.snapshot.only_model().map(|m| m.to_string()));
    let hash = state
        .router
        .pin_hash(&key, model.as_deref(), Leg::Regular)
        .ok_or_else(|| {
            GatewayError::BadRequest(
                "this gateway keeps no pins (policy consistent_hashing, or no --routing-key-override)"
                    .to_owned(),
            )
        })?;
    Ok(Target { key, model, hash })
}

fn urls(value: &str) -> serde_json::Value {
    serde_json::json!(decode_urls(value))
}

/// `GET /sticky/{key}`.
pub(crate) async fn show(
    state: &AppState,
    raw_key: &str,
    query: Option<&str>,
) -> Result<Response<Body>, GatewayError> {
    let view = state.registry.view();
    let t = target(state, &view, raw_key, query)?;
    let local = Store::local_value(state, &view, t.hash);
    let mut body = serde_json::json!({
        "key": t.key,
        "model": t.model,
        "pin": format!("{:032x}", t.hash),
        "local": local.as_deref().map(urls),
    });
    if let Some(store) = &state.store {
        match store.read_pin(t.hash).await {
            Some(stored) => {
                body["store"] = stored.urls.into();
                body["store_ttl_secs"] = stored.ttl_secs.into();
            }
            None => body["store_error"] = "sticky store unavailable".into(),
        }
    }
    Ok(json(StatusCode::OK, &body))
}

/// `DELETE /sticky/{key}`: drops the local pin, deletes the store's and tells every replica.
pub(crate) async fn delete(
    state: &AppState,
    raw_key: &str,
    query: Option<&str>,
) -> Result<Response<Body>, GatewayError> {
    let view = state.registry.view();
    let t = target(state, &view, raw_key, query)?;
    let local = state.router.drop_pin(t.hash, &view.snapshot);
    let mut body = serde_json::json!({
        "key": t.key,
        "model": t.model,
        "pin": format!("{:032x}", t.hash),
        "local": local,
    });
    if let Some(store) = &state.store {
        match store.delete_pin(t.hash).await {
            Some(stored) => body["store"] = stored.into(),
            None => return Err(GatewayError::StoreUnavailable),
        }
    }
    Ok(json(StatusCode::OK, &body))
}

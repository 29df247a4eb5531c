//! `GET /sticky/{key}` (where a key is pinned, here and in the store) and
//! `DELETE /sticky/{key}` (drop it everywhere: a session close for operators and clients).
//!
//! `{key}` is the routing key (percent-encoded), as derived from a request (a rid's lineage
//! suffixes already stripped). Under the override pins are per model: `?model=NAME` picks it,
//! defaulting to the fleet's only model. Guarded like `/workers`.

use http::{Response, StatusCode};

use super::metrics::op;
use super::names;
use super::sync::Store;
use crate::admin::{json, percent_decode};
use crate::body::ResBody;
use crate::error::GatewayError;
use crate::registry::View;
use crate::routing::Leg;
use crate::state::AppState;

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
    serde_json::json!(names::decode(value))
}

/// `GET /sticky/{key}`.
pub(crate) async fn show(
    state: &AppState,
    raw_key: &str,
    query: Option<&str>,
) -> Result<Response<ResBody>, GatewayError> {
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
        let key = store.names.key(t.hash);
        let got = store
            .link
            .call(op::ADMIN, |mut c| async move {
                redis::pipe()
                    .get(&key)
                    .pttl(&key)
                    .query_async::<(Option<String>, i64)>(&mut c)
                    .await
            })
            .await;
        match got {
            Some((value, pttl)) => {
                body["store"] = value.as_deref().map(urls).into();
                body["store_ttl_secs"] = (pttl >= 0 && value.is_some())
                    .then_some(pttl as f64 / 1000.0)
                    .into();
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
) -> Result<Response<ResBody>, GatewayError> {
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
        let key = store.names.key(t.hash);
        let msg = names::message(&store.replica, t.hash);
        let deleted = store
            .link
            .call(op::ADMIN, |mut c| async move {
                store
                    .delete
                    .key(key)
                    .arg(&store.names.channel)
                    .arg(msg)
                    .invoke_async::<i64>(&mut c)
                    .await
            })
            .await;
        match deleted {
            Some(n) => body["store"] = (n > 0).into(),
            None => return Err(GatewayError::StoreUnavailable),
        }
    }
    Ok(json(StatusCode::OK, &body))
}

//! `nvext.session_control` (Dynamo's session protocol): `bind` is counted (its `session_id` is
//! the key, pinned as any key is; with a `timeout`, that becomes the pin's idle period in place
//! of `--max-idle-secs`, through the router's bounded side map); `close` drops the session's pin, here and in the sticky
//! store, before the close request's response goes back, so by the time the client has read
//! it the next request with that `session_id` is placed afresh.

use super::inspect::SessionAction;
use crate::metrics::SessionLabels;
use crate::registry::View;
use crate::routing::{IdleTimeoutOutcome, Leg};
use crate::state::AppState;

/// Applies a request's session action; `model` scopes the pin as routing did.
pub(crate) async fn control(
    state: &AppState,
    view: &View,
    action: SessionAction,
    session_id: &str,
    model: Option<&str>,
) {
    let outcome = match action {
        SessionAction::Bind(None) => "seen",
        SessionAction::Bind(Some(secs)) => bind(state, session_id, secs, model),
        SessionAction::Close => close(state, view, session_id, model).await,
    };
    state
        .metrics
        .session_control
        .get_or_create(&SessionLabels {
            action: action.as_str(),
            outcome,
        })
        .inc();
}

/// Gives the session's pin its own idle period; the metric outcome.
fn bind(state: &AppState, session_id: &str, secs: u64, model: Option<&str>) -> &'static str {
    if session_id.is_empty() || session_id.len() > crate::routing::MAX_KEY_BYTES {
        return "invalid";
    }
    let Some(hash) = state.router.pin_hash(session_id, model, Leg::Regular) else {
        return "no_pins";
    };
    let secs = u32::try_from(secs).unwrap_or(u32::MAX);
    match state.router.set_idle_timeout(hash, secs) {
        IdleTimeoutOutcome::Set => "timeout_set",
        IdleTimeoutOutcome::NotPinned => "not_pinned",
        IdleTimeoutOutcome::Full => "timeouts_full",
    }
}

/// Drops the session's pin; the metric outcome.
async fn close(
    state: &AppState,
    view: &View,
    session_id: &str,
    model: Option<&str>,
) -> &'static str {
    if session_id.is_empty() || session_id.len() > crate::routing::MAX_KEY_BYTES {
        return "invalid";
    }
    let Some(hash) = state.router.pin_hash(session_id, model, Leg::Regular) else {
        return "no_pins";
    };
    let local = state.router.drop_pin(hash, &view.snapshot);
    let stored = match &state.store {
        Some(store) => match store.delete_pin(hash).await {
            Some(deleted) => deleted,
            None => return "store_unavailable",
        },
        None => false,
    };
    if local || stored {
        "dropped"
    } else {
        "not_pinned"
    }
}

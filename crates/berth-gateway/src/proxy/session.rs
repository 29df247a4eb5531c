//! `nvext.session_control` (Dynamo's session protocol): `bind` is counted (its `session_id` is
//! the key, pinned as any key is; with a `timeout`, that becomes the pin's idle period in place
//! of `--max-idle-secs`, through the router's bounded side map); `close` drops the session's
//! pin, here and in the sticky store, before the close request's response goes back, so by the
//! time the client has read it the next request with that `session_id` is placed afresh.
//!
//! In PD mode a session has a pin on each leg (the decode router's, scoped `Leg::Decode`, and
//! the prefill router's, scoped `Leg::Prefill`): `bind` gives both its timeout and `close`
//! drops both.

use std::sync::Arc;

use super::inspect::SessionAction;
use crate::metrics::SessionLabels;
use crate::registry::View;
use crate::routing::{IdleTimeoutOutcome, Leg, Router};
use crate::state::AppState;

/// One leg's pins: its router, its pin scope and its workers now.
struct Pins<'a> {
    router: &'a Router,
    leg: Leg,
    view: Arc<View>,
}

/// The pins a session has: the regular router's, or in PD mode the decode and prefill legs'.
fn pins(state: &AppState) -> Vec<Pins<'_>> {
    match &state.pd {
        None => vec![Pins {
            router: &state.router,
            leg: Leg::Regular,
            view: state.registry.view(),
        }],
        Some(legs) => vec![
            Pins {
                router: &state.router,
                leg: Leg::Decode,
                view: state.registry.view(),
            },
            Pins {
                router: &legs.router,
                leg: Leg::Prefill,
                view: legs.registry.view(),
            },
        ],
    }
}

/// Applies a request's session action; `model` scopes the pin as routing did.
pub(crate) async fn control(
    state: &AppState,
    action: SessionAction,
    session_id: &str,
    model: Option<&str>,
) {
    let outcome = if session_id.is_empty() || session_id.len() > crate::routing::MAX_KEY_BYTES {
        "invalid"
    } else {
        match action {
            SessionAction::Bind(None) => "seen",
            SessionAction::Bind(Some(secs)) => bind(state, session_id, secs, model),
            SessionAction::Close => close(state, session_id, model).await,
        }
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

/// Gives the session's pins their own idle period; the metric outcome (`timeout_set` when any
/// leg's pin took it).
fn bind(state: &AppState, session_id: &str, secs: u64, model: Option<&str>) -> &'static str {
    let secs = u32::try_from(secs).unwrap_or(u32::MAX);
    let mut outcome = "no_pins";
    for p in pins(state) {
        let Some(hash) = p.router.pin_hash(session_id, model, p.leg) else {
            continue;
        };
        let this = match p.router.set_idle_timeout(hash, secs) {
            IdleTimeoutOutcome::Set => "timeout_set",
            IdleTimeoutOutcome::NotPinned => "not_pinned",
            IdleTimeoutOutcome::Full => "timeouts_full",
        };
        if outcome != "timeout_set" {
            outcome = this;
        }
    }
    outcome
}

/// Drops the session's pins; the metric outcome.
async fn close(state: &AppState, session_id: &str, model: Option<&str>) -> &'static str {
    let mut any_pins = false;
    let mut dropped = false;
    let mut unavailable = false;
    for p in pins(state) {
        let Some(hash) = p.router.pin_hash(session_id, model, p.leg) else {
            continue;
        };
        any_pins = true;
        dropped |= p.router.drop_pin(hash, &p.view.snapshot);
        if let Some(store) = &state.store {
            match store.delete_pin(hash).await {
                Some(deleted) => dropped |= deleted,
                None => unavailable = true,
            }
        }
    }
    if !any_pins {
        "no_pins"
    } else if unavailable {
        "store_unavailable"
    } else if dropped {
        "dropped"
    } else {
        "not_pinned"
    }
}

//! The body key sources of a streamed body (`BodyPath::Scanned`): what the streaming scan
//! (`model_scan.rs`) keeps of the top-level members, turned into the fields `inspect.rs` reads
//! from a buffered body, and the test that the members seen so far settle the routing key.

use super::body_keys::KeyFields;
use super::inspect::{Inspected, ModelName, SessionAction};
use crate::fields::Fields;
use crate::model_scan::{Field, Kept, ModelScan};
use crate::routing::{BodyKeys, Source};
use crate::state::AppState;

/// The members a scan keeps: every key member when it settles the key (`scanned`), else only
/// `nvext` when the session control is watched.
pub(super) fn fields(scanned: bool, watch: bool) -> &'static [Field] {
    match (scanned, watch) {
        (true, _) => &Field::ALL,
        (false, true) => &[Field::Nvext],
        (false, false) => &[],
    }
}

/// The scan's member for a body source (`None`: not a body source).
fn field_of(source: &Source) -> Option<Field> {
    Some(match source {
        Source::NvextSessionId => Field::Nvext,
        Source::PreviousResponseId => Field::PreviousResponseId,
        Source::PromptCacheKey => Field::PromptCacheKey,
        Source::Conversation => Field::Conversation,
        Source::MetadataUserId => Field::Metadata,
        Source::Rid | Source::RoutingKeyHeaders | Source::Header(_) => return None,
    })
}

/// Whether the members `scan` has seen settle the key: no later member can change it. A
/// `previous_response_id` counts as a key when this replica's chain map knows it (one the
/// store would resolve is looked up once the body is in, and wins then anyway: it ranks above
/// whatever settled the key after it).
pub(super) fn settled(state: &AppState, headers: &Fields, scan: &ModelScan) -> bool {
    if scan.ended() {
        return true;
    }
    let fields = KeyFields::from_scan(scan);
    let chain = fields
        .previous_response_id()
        .filter(|_| state.router.follows_chains())
        .and_then(|id| state.chains.lookup(id, state.clock.now()));
    let mut keys = fields.into_keys();
    if let Some(key) = chain {
        keys.get_or_insert_with(BodyKeys::default)
            .previous_response_key = Some(key);
    }
    state.router.body_key_settled(keys.as_ref(), headers, &|s| {
        field_of(s).is_none_or(|f| scan.seen(f))
    })
}

/// What routing reads of a streamed body's first frames: its model, its session control and
/// (when they settle the key, `scanned`) its key fields.
pub(super) fn inspected(scan: &ModelScan, model: Option<ModelName>, scanned: bool) -> Inspected {
    if !scanned {
        // the scan kept at most `nvext` (`fields`): only it is read
        let session = scan.kept(Field::Nvext).and_then(session_of).map(Box::new);
        return Inspected {
            model,
            session,
            ..Inspected::default()
        };
    }
    let mut fields = KeyFields::from_scan(scan);
    let session = fields.session_control().map(Box::new);
    Inspected {
        model,
        session,
        previous_response_id: fields
            .take_previous_response_id()
            .map(String::into_boxed_str),
        keys: fields.into_keys().map(Box::new),
        ..Inspected::default()
    }
}

/// The session control of a streamed body's `nvext`, seen after routing.
pub(super) fn session_of(nvext: &Kept) -> Option<(SessionAction, String)> {
    KeyFields::from_nvext(nvext).session_control()
}

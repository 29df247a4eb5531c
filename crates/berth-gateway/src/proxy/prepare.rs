//! Stage 1 of a proxied request: inspect it.
//!
//! Decide whether the body must be read (the core's `body_path`; `data_parallel_rank` when the
//! worker view holds `<url>@<rank>` workers; always in PD mode, where the bootstrap fields are
//! written into it), count it, and read it with the `--max-payload-size` limit, scan its
//! first frames for a key member (`scanned`, `scan_keys.rs`), or leave it to stream. Then check
//! its model against the workers (as they are once the body is in) and count the request.

use std::sync::Arc;

use super::Endpoint;
use super::headers::ROUTING_TOKENS;
use super::held::{ClientHead, Held};
use super::inspect::{Inspected, ModelName, inspect};
use super::scan_keys;
use crate::error::GatewayError;
use crate::fields::Fields;
use crate::metrics::{BodyPathLabels, RequestLabels};
use crate::model_scan::ModelScan;
use crate::registry::View;
use crate::request_body::{
    BodyDeadline, CAPTURE_LIMIT, ClientBody, KeyHold, LOOKAHEAD_LIMIT, LateCheck, Lookahead,
    NvextSlot, read_ahead, read_body,
};
use crate::routing::{BodyPath, PolicyKind, parse_routing_tokens};
use crate::state::AppState;
use crate::upstream::Replayable;
use crate::upstream::h1::parse_length;

/// The body-path reason when PD mode reads the body to add the bootstrap fields.
const PD_BOOTSTRAP: &str = "pd_bootstrap";

/// What the later stages know about the request.
pub(crate) struct Prepared {
    pub(crate) parts: ClientHead,
    pub(crate) held: Held,
    pub(crate) inspected: Inspected,
    /// A valid `x-smg-routing-tokens` hint.
    pub(crate) tokens: Option<Vec<u32>>,
    /// Whether routing read the body (so `inspected.stream` is known).
    pub(crate) inspect_body: bool,
    /// Whether it was read only for cached-token feedback (`BodyPath::FEEDBACK_REREAD`).
    pub(crate) feedback_read: bool,
    /// The workers as they were when the body was in.
    pub(crate) view: Arc<View>,
    /// A streamed body's `nvext`, once the scan has seen it (session control applied after
    /// the response).
    pub(crate) nvext: Option<NvextSlot>,
}

impl Prepared {
    /// The model the request names, or the fleet's only model.
    pub(crate) fn model(&self) -> Option<&str> {
        self.inspected
            .model
            .as_deref()
            .or(self.view.snapshot.only_model().map(|m| &**m))
    }
}

/// Whether a policy routes on the prompt text.
fn wants_text(policy: PolicyKind) -> bool {
    policy.reads_prompt()
}

/// Reads (or holds for streaming) the body, checks its model and counts the request (`start`:
/// when the request started).
pub(crate) async fn prepare(
    state: &Arc<AppState>,
    endpoint: Endpoint,
    parts: ClientHead,
    body: ClientBody,
    start: std::time::Instant,
) -> Result<Prepared, GatewayError> {
    // (the request's start, taken once the request was admitted: its clock read serves the
    // body's deadline too)
    let deadline = BodyDeadline::new(
        state.config.body_timeouts,
        tokio::time::Instant::from_std(start),
    );
    let view = state.registry.view();
    let tokens = parts
        .fields
        .first(ROUTING_TOKENS)
        .and_then(parse_routing_tokens);
    let pd = state.pd.as_ref();
    let core_path = match pd {
        // Both legs' routers may want the body; it is read anyway.
        Some(_) => BodyPath::Buffered(PD_BOOTSTRAP),
        None => state.router.request_body_path(
            &parts.fields,
            tokens.is_some(),
            view.multi_model,
            &view.snapshot,
            // (the request's start: its clock read serves here too)
            state.clock.at(start),
        ),
    };
    // Rank workers need the body held to add the rank: a body scanned for its key is then read.
    let core_path = match core_path {
        BodyPath::Scanned(reason) if view.data_parallel => BodyPath::Buffered(reason),
        path => path,
    };
    // Routing reads the body only when the core asks; rank workers need it held to add the rank.
    let inspect_body = matches!(core_path, BodyPath::Buffered(_));
    let feedback_read = core_path == BodyPath::FEEDBACK_REREAD;
    let body_path = match core_path {
        BodyPath::Streamed(_) if view.data_parallel => BodyPath::Buffered("data_parallel_rank"),
        path => path,
    };
    let scanned = matches!(body_path, BodyPath::Scanned(_));
    let buffered = matches!(body_path, BodyPath::Buffered(_));
    state.metrics.body_path.inc(BodyPathLabels {
        path: body_path.path(),
        reason: body_path.reason(),
    });
    let max = state.config.max_payload_size;
    let length = content_length(&parts.fields);
    if length.is_some_and(|n| n > max as u64) {
        return Err(GatewayError::PayloadTooLarge(max));
    }
    // Where a streamed body's session control lands once the late scan sees it.
    let mut nvext = None;
    // `stream` for the requests metric: `None` when the body was not read as a JSON object.
    let (held, inspected, stream) = if inspect_body {
        let bytes = read_body(body, max, deadline, &state.body_budget, length).await?;
        let text_policy = wants_text(state.config.router.policy)
            || pd.is_some_and(|pd| wants_text(pd.router.policy()));
        let want_text = text_policy && tokens.is_none();
        let inspected = inspect(&bytes, want_text)?;
        let stream = Some(inspected.stream);
        (Held::Buffered(bytes), inspected, stream)
    } else if buffered {
        // Held only for the rank: routing sees what a streamed body gives it (nothing), and a
        // body that is not JSON is no error here.
        let bytes = read_body(body, max, deadline, &state.body_budget, length).await?;
        let read = inspect(&bytes, false).ok();
        let stream = read.as_ref().map(|i| i.stream);
        // Routing sees nothing of the body, but its model is still checked (and its session
        // control applied, as a streamed body's is).
        let read = read.unwrap_or_default();
        let inspected = Inspected {
            model: read.model,
            session: read
                .session
                .filter(|_| state.router.watches_session_control()),
            ..Inspected::default()
        };
        (Held::Buffered(bytes), inspected, stream)
    } else {
        let capture = if state.config.retry_max_retries > 0 {
            CAPTURE_LIMIT
        } else {
            0
        };
        let mut body = body;
        // Workers that list models: learn the body's `model` from its first frames (a model no
        // worker serves is refused before any byte goes out), and keep checking past them. A
        // key a body member may name: hold the frames until the members seen settle it.
        let want_model = !view.models.is_empty();
        let watch = state.router.watches_session_control();
        let settled = |scan: &ModelScan| scan_keys::settled(state, &parts.fields, scan);
        let hold = scanned.then(|| KeyHold {
            settled: &settled,
            budget: &state.body_budget,
        });
        let mut ahead = if want_model || scanned {
            let fields = scan_keys::fields(scanned, watch);
            read_ahead(&mut body, max, deadline, want_model, fields, hold).await?
        } else {
            Lookahead::default()
        };
        // (the model found is taken out of the scan, not copied, and matched with the workers'
        // models as bytes: a model they serve is theirs, no `String` made)
        let model = ahead
            .scan
            .take_model()
            .map(|m| ModelName::of_scan(m, &view.models));
        let inspected = scan_keys::inspected(&ahead.scan, model, scanned);
        // A session control the scan has not seen yet is watched for as the body streams on.
        if inspected.session.is_none() && watch && !ahead.scan.ended() {
            nvext = Some(NvextSlot::default());
        }
        // The workers' models are copied only when the check goes on past the lookahead (asked
        // before the scan is moved out of `ahead`: a scan taken leaves a fresh one behind).
        let model_pending = want_model && ahead.scan.found().is_none();
        // (nothing to watch past the lookahead: the scan is left in place, not moved out and
        // a fresh one made in its stead, for a check that would find nothing to do)
        let late = if model_pending || nvext.is_some() {
            LateCheck::new(
                std::mem::take(&mut ahead.scan),
                model_pending.then(|| view.models.clone()),
                nvext.clone(),
            )
        } else {
            None
        };
        let ended = late.is_none() && http_body::Body::is_end_stream(&body);
        // The lookahead may already hold the whole body (a small one arrives in one frame):
        // then it is sent as bytes held, with nothing left to stream or watch. A body held
        // whole past the lookahead stays in its frames (each owns its budget bytes) and can
        // still be re-sent on a retry.
        let held = if ended && ahead.len <= LOOKAHEAD_LIMIT {
            Held::Buffered(ahead.prefix.concat())
        } else {
            let capture = if ended && capture > 0 {
                capture.max(ahead.len)
            } else {
                capture
            };
            Held::Stream(Replayable::new(body, ahead, late, capture, max, deadline))
        };
        (held, inspected, None)
    };
    // A Responses chain: `previous_response_id` keys the request as the response it continues.
    let mut inspected = inspected;
    if let Some(id) = inspected
        .previous_response_id
        .as_deref()
        .filter(|_| state.router.follows_chains())
        && let Some(key) = super::chain::key_for(state, id).await
    {
        inspected
            .keys
            .get_or_insert_with(Default::default)
            .previous_response_key = Some(key);
    }
    // Reading the body (or its first frames) can take a while: route on the workers as they are
    // now, not as they were when the head arrived (a worker removed or opened meanwhile must not be chosen).
    let view = state.registry.view();
    let prepared = Prepared {
        parts,
        held,
        inspected,
        tokens,
        inspect_body,
        feedback_read,
        view,
        nvext,
    };
    let view = &prepared.view;
    if let Some(m) = prepared
        .inspected
        .model
        .as_deref()
        .filter(|m| !view.models.is_empty() && known_model(&view.models, m).is_none())
    {
        return Err(GatewayError::ModelNotFound(m.to_owned()));
    }
    state.metrics.requests.inc(RequestLabels {
        model: model_label(&view.models, prepared.model()),
        endpoint: endpoint.as_str(),
        streaming: match stream {
            None => "unknown",
            Some(true) => "true",
            Some(false) => "false",
        },
    });
    Ok(prepared)
}

/// The model as a metric label: one of the workers' models (sharing the registry's `Arc`), else
/// `unknown`, so client-chosen strings never become label values.
fn model_label(known: &[Arc<str>], model: Option<&str>) -> Arc<str> {
    model
        .and_then(|model| known_model(known, model))
        .cloned()
        .unwrap_or_else(|| Arc::from("unknown"))
}

/// The workers' model named `model`, if a worker serves it: `known` is the view's sorted list of
/// every worker's models (the snapshot's model table has the same names; a search of the short
/// list costs a few comparisons where the table's lookup hashed the name).
fn known_model<'k>(known: &'k [Arc<str>], model: &str) -> Option<&'k Arc<str>> {
    known
        .binary_search_by(|k| (**k).cmp(model))
        .ok()
        .and_then(|i| known.get(i))
}

/// The request's `Content-Length` (the head's reader refused an invalid one).
fn content_length(fields: &Fields) -> Option<u64> {
    parse_length(fields.first("content-length")?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_model_is_found_in_the_sorted_list_and_labels_by_it() {
        let mut known: Vec<Arc<str>> = ["m-b", "m-a", "llama", "z", "m-a"]
            .into_iter()
            .map(Arc::from)
            .collect();
        // as the registry publishes it
        known.sort();
        known.dedup();
        for m in ["m-a", "m-b", "llama", "z"] {
            assert_eq!(known_model(&known, m).map(|k| &**k), Some(m));
            assert_eq!(&*model_label(&known, Some(m)), m);
        }
        for m in ["m", "m-c", "", "Z", "llama "] {
            assert!(known_model(&known, m).is_none(), "{m}");
            assert_eq!(&*model_label(&known, Some(m)), "unknown");
        }
        assert!(known_model(&[], "m").is_none());
    }
}

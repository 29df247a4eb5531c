//! What each session-routing mode puts on one request.
//!
//! The body is still a JSON object here (not bytes), and headers are plain name/value pairs, so
//! tests can check the wire output of each mode without a network.

use serde_json::{Map, Value, json};

use crate::routing::mode::{NvextScope, SessionRouting};

/// Who sends this request: the session, its place in the agent tree, and the turn.
#[derive(Debug, Clone, Copy)]
pub struct RequestIdentity<'a> {
    /// This session's id (a UUID minted when the session started).
    pub session_id: &'a str,
    /// The parent session's id, `None` on roots.
    pub parent_id: Option<&'a str>,
    /// The tree root's id (the session's own id on roots).
    pub root_id: &'a str,
    /// Zero-based turn index within the session.
    pub turn_index: u32,
    /// Zero on the first attempt, `k` on the `k`-th retry.
    pub retry: u32,
    /// Whether this is the session's last planned turn.
    pub is_session_final: bool,
    /// Whether this is provably the last request of the whole agent tree.
    pub is_tree_final: bool,
    /// The id of this session's previous answer (Responses API), `None` on its first turn.
    pub previous_response_id: Option<&'a str>,
}

/// A request about to be serialized: headers and the JSON body.
#[derive(Debug, Clone, Default)]
pub struct WireRequest {
    /// Extra headers (besides content type and host).
    pub headers: Vec<(String, String)>,
    /// The JSON body.
    pub body: Map<String, Value>,
}

impl SessionRouting {
    /// Adds this mode's identity to `req`.
    pub fn apply(&self, id: &RequestIdentity<'_>, req: &mut WireRequest) {
        let mut header = |name: &str, value: &str| {
            req.headers.push((name.to_owned(), value.to_owned()));
        };
        match self {
            Self::None => {}
            Self::Rid => {
                // The session id is a UUID, always a valid rid base.
                let mut rid = format!("{}_t{}", id.session_id, id.turn_index);
                if id.retry > 0 {
                    rid.push_str(&format!("_r{}", id.retry));
                }
                req.body.insert("rid".to_owned(), Value::String(rid));
            }
            Self::DynamoHeaders => {
                header("X-Dynamo-Session-ID", id.session_id);
                if let Some(parent) = id.parent_id {
                    header("X-Dynamo-Parent-Session-ID", parent);
                }
            }
            Self::SmgRoutingKey => header(berth_client::ROUTING_KEY_HEADER, id.session_id),
            Self::SessionIdHeader => header("X-Session-ID", id.session_id),
            Self::CodexSessionHeader => header("session_id", id.session_id),
            Self::ClaudeCodeHeader => header("X-Claude-Code-Session-Id", id.session_id),
            Self::PromptCacheKey => {
                let v = Value::String(id.session_id.to_owned());
                req.body.insert("prompt_cache_key".to_owned(), v);
            }
            Self::Conversation => {
                let v = Value::String(id.session_id.to_owned());
                req.body.insert("conversation".to_owned(), v);
            }
            Self::PreviousResponseId => {
                if let Some(prev) = id.previous_response_id {
                    let v = Value::String(prev.to_owned());
                    req.body.insert("previous_response_id".to_owned(), v);
                }
            }
            Self::ClaudeCodeMetadata => {
                // Claude Code's form: `user_<64 hex>_account_<account>_session_<session>`.
                let user = format!("user_{}_account__session_{}", "0".repeat(64), id.session_id);
                let meta = req.body.entry("metadata").or_insert_with(|| json!({}));
                if !meta.is_object() {
                    *meta = json!({});
                }
                if let Value::Object(meta) = meta {
                    meta.insert("user_id".to_owned(), Value::String(user));
                }
            }
            Self::IdentityHeaders {
                session,
                parent,
                root,
            } => {
                for name in session {
                    header(name, id.session_id);
                }
                if let Some(parent_id) = id.parent_id {
                    for name in parent {
                        header(name, parent_id);
                    }
                }
                for name in root {
                    header(name, id.root_id);
                }
            }
            Self::DynamoNvext {
                timeout_seconds,
                scope,
            } => {
                let (key, close) = match scope {
                    NvextScope::Conversation => (id.session_id, id.is_session_final),
                    NvextScope::Lineage => (id.root_id, id.is_tree_final),
                };
                apply_nvext(&mut req.body, key, close, *timeout_seconds);
            }
        }
    }
}

/// Sets `nvext.session_control`, keeping every other `nvext` key and any session_control keys
/// the workload shipped (ours win on `session_id`, `action` and `timeout`).
fn apply_nvext(body: &mut Map<String, Value>, key: &str, close: bool, timeout: u64) {
    let nvext = body.entry("nvext").or_insert_with(|| json!({}));
    if !nvext.is_object() {
        *nvext = json!({});
    }
    let Value::Object(nvext) = nvext else { return };
    let control = nvext.entry("session_control").or_insert_with(|| json!({}));
    if !control.is_object() {
        *control = json!({});
    }
    let Value::Object(control) = control else {
        return;
    };
    control.insert("session_id".to_owned(), Value::String(key.to_owned()));
    if close {
        control.insert("action".to_owned(), Value::String("close".to_owned()));
        control.remove("timeout");
    } else {
        control.insert("action".to_owned(), Value::String("bind".to_owned()));
        control.insert("timeout".to_owned(), Value::from(timeout));
    }
}

#[cfg(test)]
mod tests;

//! The ordered list of places a routing key may come from (`--routing-key-sources`).
//!
//! SMG's own sources come first and keep their meaning: the body `rid` (override only) and the
//! `--routing-key-headers` names. berth adds the names clients already give their sessions:
//! agent session headers (Codex CLI's `session_id` / `conversation_id`, Claude Code's
//! `x-claude-code-session-id`), Dynamo's `nvext.session_control.session_id`, the OpenAI API's
//! `prompt_cache_key`, the Responses API's `conversation`, and the session part of Anthropic's
//! `metadata.user_id` as Claude Code writes it. The first source with a valid value wins.

use crate::Error;

/// The default `--routing-key-sources` list, in precedence order.
pub const DEFAULT_KEY_SOURCES: &[&str] = &[
    "rid",
    "routing_key_headers",
    "header:session_id",
    "header:conversation_id",
    "header:x-claude-code-session-id",
    "nvext_session_id",
    "previous_response_id",
    "prompt_cache_key",
    "conversation",
    "metadata_user_id",
];

/// One place a key may come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The body `rid` (read only with `--routing-key-override`), lineage-stripped.
    Rid,
    /// The `--routing-key-headers` names, in their order (SMG's header source).
    RoutingKeyHeaders,
    /// One more header (lowercased name), its value taken as is.
    Header(String),
    /// The body's top-level `nvext.session_control.session_id` (Dynamo).
    NvextSessionId,
    /// The body's top-level `previous_response_id` (Responses API): the key the gateway
    /// remembered for that response id (the caller resolves it into [`BodyKeys`]).
    PreviousResponseId,
    /// The body's top-level `prompt_cache_key` (OpenAI Chat Completions and Responses).
    PromptCacheKey,
    /// The body's top-level `conversation` (Responses API: a string id, or an object's `id`).
    Conversation,
    /// The session part of the body's `metadata.user_id` (Anthropic Messages, Claude Code).
    MetadataUserId,
}

impl Source {
    /// Parses one list item (`rid`, `routing_key_headers`, `header:<name>`, ...).
    pub fn parse(item: &str) -> Result<Self, Error> {
        let bad = |why: String| Error::config("--routing-key-sources", why);
        Ok(match item.trim() {
            "rid" => Self::Rid,
            "routing_key_headers" => Self::RoutingKeyHeaders,
            "nvext_session_id" => Self::NvextSessionId,
            "previous_response_id" => Self::PreviousResponseId,
            "prompt_cache_key" => Self::PromptCacheKey,
            "conversation" => Self::Conversation,
            "metadata_user_id" => Self::MetadataUserId,
            other => match other.strip_prefix("header:") {
                Some(name) if super::is_token(name) => Self::Header(name.to_ascii_lowercase()),
                Some(name) => return Err(bad(format!("{name:?} is not a valid HTTP header name"))),
                None => {
                    return Err(bad(format!(
                        "unknown source {other:?} (expected rid, routing_key_headers, \
                         header:<name>, nvext_session_id, previous_response_id, prompt_cache_key, \
                         conversation or \
                         metadata_user_id)"
                    )));
                }
            },
        })
    }

    /// Whether the source is read from the body.
    pub fn in_body(&self) -> bool {
        matches!(
            self,
            Self::NvextSessionId
                | Self::PreviousResponseId
                | Self::PromptCacheKey
                | Self::Conversation
                | Self::MetadataUserId
        )
    }
}

/// Parses a whole list, dropping repeats (the first occurrence keeps its place).
pub fn parse_sources(items: &[String]) -> Result<Vec<Source>, Error> {
    let mut out: Vec<Source> = Vec::with_capacity(items.len());
    for item in items {
        let s = Source::parse(item)?;
        if !out.contains(&s) {
            out.push(s);
        }
    }
    Ok(out)
}

/// The body fields a key may come from, as the caller found them (raw, unvalidated strings;
/// a field of the wrong JSON type is `None`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BodyKeys {
    /// `nvext.session_control.session_id`.
    pub nvext_session_id: Option<String>,
    /// The session key the gateway remembered for the body's `previous_response_id` (resolved
    /// by the caller; `None` when the id is unknown).
    pub previous_response_key: Option<String>,
    /// `prompt_cache_key`.
    pub prompt_cache_key: Option<String>,
    /// `conversation` (its `id` when it is an object).
    pub conversation: Option<String>,
    /// `metadata.user_id`, whole.
    pub metadata_user_id: Option<String>,
}

/// The session id inside Claude Code's `metadata.user_id`: the part after the last `_session_`
/// (`user_<hash>_account_<uuid>_session_<uuid>`), or the `session_id` member when the value is
/// itself a JSON object (newer versions). `None` when there is no session part: a bare user id
/// names a user, not a conversation, and is never a key.
pub fn session_from_user_id(user_id: &str) -> Option<&str> {
    if let Some(at) = user_id.rfind("_session_") {
        let s = &user_id[at + "_session_".len()..];
        return (!s.is_empty()).then_some(s);
    }
    if !user_id.trim_start().starts_with('{') {
        return None;
    }
    // Find `"session_id":"<value>"` without allocating: the value must be a plain string with
    // no escapes (a UUID).
    let at = user_id.find("\"session_id\"")?;
    let rest = user_id[at + "\"session_id\"".len()..].trim_start();
    let rest = rest.strip_prefix(':')?.trim_start().strip_prefix('"')?;
    let end = rest.find(['"', '\\'])?;
    (rest.as_bytes()[end] == b'"' && end > 0).then(|| &rest[..end])
}

#[cfg(test)]
mod tests;

//! The session-routing modes and the validation of their options.

use crate::error::BenchError;
use crate::routing::token::is_token;

/// Which identity `dynamo_nvext` binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NvextScope {
    /// Each session binds its own id and closes on its own final turn.
    Conversation,
    /// Every session of an agent tree binds the root's id; only the tree's last request closes.
    Lineage,
}

/// One session-routing mode with its validated options.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum SessionRouting {
    /// Nothing: the router sees anonymous requests.
    None,
    /// berth's own: the body `rid` is `<session>_t<turn>` (plus `_r<k>` on a retry), which a
    /// gateway with the routing-key override strips back to the session id.
    Rid,
    /// `X-Dynamo-Session-ID`, plus `X-Dynamo-Parent-Session-ID` on sub-agent children.
    DynamoHeaders,
    /// `nvext.session_control` in the body: `bind` with a timeout on non-final turns, `close` on
    /// the final one.
    DynamoNvext {
        /// The bind timeout in seconds (`timeout_seconds`, default 300).
        timeout_seconds: u64,
        /// Conversation or lineage scope (`scope`, default conversation).
        scope: NvextScope,
    },
    /// `X-SMG-Routing-Key` (the SMG manual and consistent-hashing policies).
    SmgRoutingKey,
    /// `X-Session-ID`.
    SessionIdHeader,
    /// Body `prompt_cache_key` (OpenAI Chat Completions and Responses).
    PromptCacheKey,
    /// Body `conversation` (OpenAI Responses).
    Conversation,
    /// Body `previous_response_id` (OpenAI Responses, `--endpoint-type responses`): each turn
    /// after the first names the id of the answer to the turn before; the first turn names
    /// nothing (a gateway that follows chains keys the chain by that first answer's id).
    PreviousResponseId,
    /// `session_id` header, as Codex CLI sends it.
    CodexSessionHeader,
    /// `X-Claude-Code-Session-Id` header, as Claude Code sends it.
    ClaudeCodeHeader,
    /// Body `metadata.user_id` in Claude Code's form, with the session id as its session part.
    ClaudeCodeMetadata,
    /// Exactly the configured headers, per identity tier.
    IdentityHeaders {
        /// Names that carry this session's id.
        session: Vec<String>,
        /// Names that carry the parent's id (omitted on roots).
        parent: Vec<String>,
        /// Names that carry the tree root's id.
        root: Vec<String>,
    },
}

const MODES: &str = "dynamo_headers, dynamo_nvext, smg_routing_key, session_id_header, \
                     identity_headers, prompt_cache_key, conversation, previous_response_id, \
                     codex_session_header, claude_code_header, claude_code_metadata, rid, none";

/// The modes that take no options, with their values.
const PRESETS: &[(&str, SessionRouting)] = &[
    ("none", SessionRouting::None),
    ("rid", SessionRouting::Rid),
    ("dynamo_headers", SessionRouting::DynamoHeaders),
    ("smg_routing_key", SessionRouting::SmgRoutingKey),
    ("session_id_header", SessionRouting::SessionIdHeader),
    ("prompt_cache_key", SessionRouting::PromptCacheKey),
    ("conversation", SessionRouting::Conversation),
    ("previous_response_id", SessionRouting::PreviousResponseId),
    ("codex_session_header", SessionRouting::CodexSessionHeader),
    ("claude_code_header", SessionRouting::ClaudeCodeHeader),
    ("claude_code_metadata", SessionRouting::ClaudeCodeMetadata),
];

impl SessionRouting {
    /// Parses `--session-routing <mode>` with its `--session-routing-opt key=value` list.
    /// Unknown modes, options a mode does not take, repeated options, malformed values and
    /// invalid or duplicate header names are refused, naming what is wrong.
    pub fn parse(mode: &str, opts: &[String]) -> Result<Self, BenchError> {
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        for opt in opts {
            let (k, v) = opt.split_once('=').ok_or_else(|| {
                BenchError::config("--session-routing-opt", format!("`{opt}` is not key=value"))
            })?;
            let k = k.trim();
            if pairs.iter().any(|(seen, _)| *seen == k) {
                return Err(BenchError::config(
                    "--session-routing-opt",
                    format!("option `{k}` given more than once"),
                ));
            }
            pairs.push((k, v.trim()));
        }
        let preset = PRESETS
            .iter()
            .find(|(name, _)| *name == mode)
            .map(|(_, m)| m);
        let allowed: &[&str] = match mode {
            _ if preset.is_some() => &[],
            "dynamo_nvext" => &["timeout_seconds", "scope"],
            "identity_headers" => &["session", "parent", "root"],
            other => {
                return Err(BenchError::config(
                    "--session-routing",
                    format!("unknown mode `{other}` (expected one of: {MODES})"),
                ));
            }
        };
        if let Some((k, _)) = pairs.iter().find(|(k, _)| !allowed.contains(k)) {
            let takes = if allowed.is_empty() {
                "it takes no options".to_owned()
            } else {
                format!("it takes: {}", allowed.join(", "))
            };
            return Err(BenchError::config(
                "--session-routing-opt",
                format!("unknown option `{k}` for mode `{mode}`; {takes}"),
            ));
        }
        let get = |key: &str| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
        if let Some(preset) = preset {
            return Ok(preset.clone());
        }
        Ok(match mode {
            "dynamo_nvext" => {
                let timeout_seconds = match get("timeout_seconds") {
                    None => 300,
                    Some(v) => v.parse::<u64>().ok().filter(|t| *t > 0).ok_or_else(|| {
                        BenchError::config(
                            "--session-routing-opt timeout_seconds",
                            format!("`{v}` is not a positive whole number of seconds"),
                        )
                    })?,
                };
                let scope = match get("scope") {
                    None | Some("conversation") => NvextScope::Conversation,
                    Some("lineage") => NvextScope::Lineage,
                    Some(other) => {
                        return Err(BenchError::config(
                            "--session-routing-opt scope",
                            format!("`{other}` (expected conversation or lineage)"),
                        ));
                    }
                };
                Self::DynamoNvext {
                    timeout_seconds,
                    scope,
                }
            }
            _ => identity_headers(get("session"), get("parent"), get("root"))?,
        })
    }

    /// The mode's name as given on the command line.
    pub fn name(&self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Rid => "rid",
            Self::DynamoHeaders => "dynamo_headers",
            Self::DynamoNvext { .. } => "dynamo_nvext",
            Self::SmgRoutingKey => "smg_routing_key",
            Self::SessionIdHeader => "session_id_header",
            Self::PromptCacheKey => "prompt_cache_key",
            Self::Conversation => "conversation",
            Self::PreviousResponseId => "previous_response_id",
            Self::CodexSessionHeader => "codex_session_header",
            Self::ClaudeCodeHeader => "claude_code_header",
            Self::ClaudeCodeMetadata => "claude_code_metadata",
            Self::IdentityHeaders { .. } => "identity_headers",
        }
    }
}

fn identity_headers(
    session: Option<&str>,
    parent: Option<&str>,
    root: Option<&str>,
) -> Result<SessionRouting, BenchError> {
    let mut seen: Vec<String> = Vec::new();
    let mut tier = |name: &str, list: Option<&str>| -> Result<Vec<String>, BenchError> {
        let flag = format!("--session-routing-opt {name}");
        let Some(list) = list else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for raw in list.split(',') {
            let header = raw.trim();
            if header.is_empty() {
                return Err(BenchError::config(
                    &flag,
                    format!("empty header name in `{list}`"),
                ));
            }
            if !is_token(header) {
                return Err(BenchError::config(
                    &flag,
                    format!("`{header}` is not a valid header name (RFC 9110 token)"),
                ));
            }
            let lower = header.to_ascii_lowercase();
            if seen.contains(&lower) {
                return Err(BenchError::config(
                    &flag,
                    format!("header `{header}` is named twice (names are case-insensitive)"),
                ));
            }
            seen.push(lower);
            out.push(header.to_owned());
        }
        Ok(out)
    };
    let session = tier("session", session)?;
    let parent = tier("parent", parent)?;
    let root = tier("root", root)?;
    if session.is_empty() && parent.is_empty() && root.is_empty() {
        return Err(BenchError::config(
            "--session-routing-opt",
            "identity_headers needs at least one header name in session=, parent= or root=",
        ));
    }
    Ok(SessionRouting::IdentityHeaders {
        session,
        parent,
        root,
    })
}

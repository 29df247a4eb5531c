//! The session-key fields of a request body (`--routing-key-sources`): `prompt_cache_key`,
//! `conversation`, `metadata.user_id` and `nvext.session_control`, as `inspect.rs`'s parser
//! reads them. Each is typed loosely: a member of the wrong JSON type is skipped (like an
//! invalid header value), never a parse error.

use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::model_scan::{Field, Kept, ModelScan};
use crate::routing::BodyKeys;

/// A string field that may hold anything else (then skipped, never a parse error).
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Str {
    One(String),
    Other(IgnoredAny),
}

impl Str {
    fn get(v: Option<Self>) -> Option<String> {
        match v? {
            Self::One(s) => Some(s),
            Self::Other(_) => None,
        }
    }
}

/// A whole number of seconds that may be anything else (then no timeout, never an error).
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Secs {
    Whole(u64),
    Other(IgnoredAny),
}

/// `conversation`: a string id, or an object with a string `id` (Responses API).
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Conversation {
    Id(String),
    Obj {
        #[serde(default)]
        id: Option<Str>,
    },
    Other(IgnoredAny),
}

/// `metadata`: only `user_id` is read.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Metadata {
    Obj {
        #[serde(default)]
        user_id: Option<Str>,
    },
    Other(IgnoredAny),
}

/// `nvext`: only `session_control.session_id` is read.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Nvext {
    Obj {
        #[serde(default)]
        session_control: Option<SessionControl>,
    },
    Other(IgnoredAny),
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum SessionControl {
    Obj {
        #[serde(default)]
        session_id: Option<Str>,
        #[serde(default)]
        action: Option<Str>,
        #[serde(default)]
        timeout: Option<Secs>,
    },
    Other(IgnoredAny),
}

/// The key fields of a body, as read.
#[derive(Default)]
pub(super) struct KeyFields {
    pub(super) prompt_cache_key: Option<Str>,
    pub(super) conversation: Option<Conversation>,
    pub(super) metadata: Option<Metadata>,
    pub(super) nvext: Option<Nvext>,
    /// `previous_response_id` (Responses API): resolved to a key through the chain map.
    pub(super) previous_response_id: Option<Str>,
}

/// What `nvext.session_control.action` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SessionAction {
    /// `bind`: the session starts (its key pins as any key does); with a `timeout` (whole
    /// seconds > 0), that is the pin's idle period.
    Bind(Option<u64>),
    /// `close`: the session ends; its pin is dropped here and in the store.
    Close,
}

impl SessionAction {
    /// The metric label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Bind(_) => "bind",
            Self::Close => "close",
        }
    }
}

impl KeyFields {
    /// The members a streaming scan kept, each parsed as the buffered parser reads it (a value
    /// that does not parse, or was too long to keep, is skipped like one of the wrong type).
    pub(super) fn from_scan(scan: &ModelScan) -> Self {
        fn parse<T: serde::de::DeserializeOwned>(scan: &ModelScan, f: Field) -> Option<T> {
            match scan.kept(f)? {
                Kept::Raw(raw) => serde_json::from_slice(raw).ok(),
                Kept::TooLong => None,
            }
        }
        Self {
            prompt_cache_key: parse(scan, Field::PromptCacheKey),
            conversation: parse(scan, Field::Conversation),
            metadata: parse(scan, Field::Metadata),
            nvext: parse(scan, Field::Nvext),
            previous_response_id: parse(scan, Field::PreviousResponseId),
        }
    }

    /// Only `nvext`, from its raw value.
    pub(super) fn from_nvext(raw: &Kept) -> Self {
        Self {
            nvext: match raw {
                Kept::Raw(raw) => serde_json::from_slice(raw).ok(),
                Kept::TooLong => None,
            },
            ..Self::default()
        }
    }

    /// The session control's action and its (raw) `session_id`, when both are strings and the
    /// action is `bind` or `close`.
    pub(super) fn session_control(&self) -> Option<(SessionAction, String)> {
        let Some(Nvext::Obj {
            session_control:
                Some(SessionControl::Obj {
                    session_id: Some(Str::One(id)),
                    action: Some(Str::One(action)),
                    timeout,
                }),
        }) = &self.nvext
        else {
            return None;
        };
        let action = match action.as_str() {
            "bind" => SessionAction::Bind(match timeout {
                Some(Secs::Whole(s)) if *s > 0 => Some(*s),
                _ => None,
            }),
            "close" => SessionAction::Close,
            _ => return None,
        };
        Some((action, id.clone()))
    }

    /// The raw `previous_response_id`, when it is a string (left in place).
    pub(super) fn previous_response_id(&self) -> Option<&str> {
        match &self.previous_response_id {
            Some(Str::One(s)) => Some(s),
            _ => None,
        }
    }

    /// The raw `previous_response_id`, when it is a string.
    pub(super) fn take_previous_response_id(&mut self) -> Option<String> {
        Str::get(self.previous_response_id.take())
    }

    /// `None` when the body names no key field (the common case: no allocation).
    pub(super) fn into_keys(self) -> Option<BodyKeys> {
        let keys = BodyKeys {
            prompt_cache_key: Str::get(self.prompt_cache_key),
            conversation: match self.conversation {
                Some(Conversation::Id(s)) => Some(s),
                Some(Conversation::Obj { id }) => Str::get(id),
                _ => None,
            },
            metadata_user_id: match self.metadata {
                Some(Metadata::Obj { user_id }) => Str::get(user_id),
                _ => None,
            },
            nvext_session_id: match self.nvext {
                Some(Nvext::Obj {
                    session_control: Some(SessionControl::Obj { session_id, .. }),
                }) => Str::get(session_id),
                _ => None,
            },
            previous_response_key: None,
        };
        (keys != BodyKeys::default()).then_some(keys)
    }
}

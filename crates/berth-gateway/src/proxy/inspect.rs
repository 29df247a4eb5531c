//! What the gateway reads out of a buffered request body.
//!
//! Only the fields routing needs are kept (`rid`, `model`, `stream`, the key fields of
//! `--routing-key-sources`, and the prompt text when the policy matches prefixes); everything
//! else is skipped by the parser and forwarded as the original bytes. A body that is not a JSON
//! object is a `json_parse_error`; a key field of the wrong JSON type is only skipped.

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

use crate::error::GatewayError;
use crate::routing::BodyKeys;

/// A string field that may hold anything else (then skipped, never a parse error).
#[derive(Deserialize)]
#[serde(untagged)]
enum Str {
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

/// `conversation`: a string id, or an object with a string `id` (Responses API).
#[derive(Deserialize)]
#[serde(untagged)]
enum Conversation {
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
enum Metadata {
    Obj {
        #[serde(default)]
        user_id: Option<Str>,
    },
    Other(IgnoredAny),
}

/// `nvext`: only `session_control.session_id` is read.
#[derive(Deserialize)]
#[serde(untagged)]
enum Nvext {
    Obj {
        #[serde(default)]
        session_control: Option<SessionControl>,
    },
    Other(IgnoredAny),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum SessionControl {
    Obj {
        #[serde(default)]
        session_id: Option<Str>,
        #[serde(default)]
        action: Option<Str>,
    },
    Other(IgnoredAny),
}

/// The key fields of a body, as read.
struct KeyFields {
    prompt_cache_key: Option<Str>,
    conversation: Option<Conversation>,
    metadata: Option<Metadata>,
    nvext: Option<Nvext>,
}

/// What `nvext.session_control.action` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SessionAction {
    /// `bind`: the session starts (counted; its key pins as any key does).
    Bind,
    /// `close`: the session ends; its pin is dropped here and in the store.
    Close,
}

impl SessionAction {
    /// The metric label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Bind => "bind",
            Self::Close => "close",
        }
    }
}

impl KeyFields {
    /// The session control's action and its (raw) `session_id`, when both are strings and the
    /// action is `bind` or `close`.
    fn session_control(&self) -> Option<(SessionAction, String)> {
        let Some(Nvext::Obj {
            session_control:
                Some(SessionControl::Obj {
                    session_id: Some(Str::One(id)),
                    action: Some(Str::One(action)),
                }),
        }) = &self.nvext
        else {
            return None;
        };
        let action = match action.as_str() {
            "bind" => SessionAction::Bind,
            "close" => SessionAction::Close,
            _ => return None,
        };
        Some((action, id.clone()))
    }

    /// `None` when the body names no key field (the common case: no allocation).
    fn into_keys(self) -> Option<BodyKeys> {
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
        };
        (keys != BodyKeys::default()).then_some(keys)
    }
}

/// `rid` as SGLang accepts it: a string, or a list (rerank and batches: the first id counts).
#[derive(Deserialize)]
#[serde(untagged)]
enum Rid {
    One(String),
    Many(Vec<String>),
    Other(IgnoredAny),
}

#[derive(Deserialize)]
struct Head {
    #[serde(default)]
    rid: Option<Rid>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    stream: Option<Value>,
    #[serde(default)]
    prompt_cache_key: Option<Str>,
    #[serde(default)]
    conversation: Option<Conversation>,
    #[serde(default)]
    metadata: Option<Metadata>,
    #[serde(default)]
    nvext: Option<Nvext>,
}

#[derive(Deserialize)]
struct WithText {
    #[serde(default)]
    rid: Option<Rid>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    stream: Option<Value>,
    #[serde(default)]
    messages: Option<Value>,
    #[serde(default)]
    prompt: Option<Value>,
    #[serde(default)]
    text: Option<Value>,
    #[serde(default)]
    input: Option<Value>,
    #[serde(default)]
    system: Option<Value>,
    #[serde(default)]
    prompt_cache_key: Option<Str>,
    #[serde(default)]
    conversation: Option<Conversation>,
    #[serde(default)]
    metadata: Option<Metadata>,
    #[serde(default)]
    nvext: Option<Nvext>,
}

/// The routing-relevant fields of a body.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Inspected {
    pub(crate) rid: Option<String>,
    pub(crate) model: Option<String>,
    pub(crate) stream: bool,
    pub(crate) text: Option<String>,
    /// The key fields (`prompt_cache_key`, ...), when the body names any.
    pub(crate) keys: Option<BodyKeys>,
    /// `nvext.session_control`'s action and session id.
    pub(crate) session: Option<(SessionAction, String)>,
}

fn first_rid(rid: Option<Rid>) -> Option<String> {
    match rid? {
        Rid::One(s) => Some(s),
        Rid::Many(v) => v.into_iter().next(),
        Rid::Other(_) => None,
    }
}

fn is_true(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Bool(true)))
}

/// Parses `body`; `want_text` also collects the prompt text for prefix matching.
pub(crate) fn inspect(body: &[u8], want_text: bool) -> Result<Inspected, GatewayError> {
    let parse_err = |e: serde_json::Error| GatewayError::JsonParse(e.to_string());
    // serde would also accept a JSON array as a struct; request bodies are objects.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(GatewayError::JsonParse("expected a JSON object".to_owned()));
    }
    if !want_text {
        let h: Head = serde_json::from_slice(body).map_err(parse_err)?;
        let keys = KeyFields {
            prompt_cache_key: h.prompt_cache_key,
            conversation: h.conversation,
            metadata: h.metadata,
            nvext: h.nvext,
        };
        return Ok(Inspected {
            session: keys.session_control(),
            rid: first_rid(h.rid),
            model: h.model,
            stream: is_true(h.stream.as_ref()),
            text: None,
            keys: keys.into_keys(),
        });
    }
    let w: WithText = serde_json::from_slice(body).map_err(parse_err)?;
    let mut text = String::new();
    for v in [&w.system, &w.messages, &w.prompt, &w.text, &w.input]
        .into_iter()
        .flatten()
    {
        collect_strings(v, &mut text);
    }
    let keys = KeyFields {
        prompt_cache_key: w.prompt_cache_key,
        conversation: w.conversation,
        metadata: w.metadata,
        nvext: w.nvext,
    };
    Ok(Inspected {
        session: keys.session_control(),
        rid: first_rid(w.rid),
        model: w.model,
        stream: is_true(w.stream.as_ref()),
        text: Some(text),
        keys: keys.into_keys(),
    })
}

/// Appends every string leaf of `v`: arrays in order, an object's members in key order (serde_json
/// without `preserve_order` sorts them, so not document order). A conversation grows at the end
/// of its `messages` array from turn to turn, which is what prefix matching needs.
fn collect_strings(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Array(items) => items.iter().for_each(|i| collect_strings(i, out)),
        Value::Object(map) => map.values().for_each(|i| collect_strings(i, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rid_forms() {
        let i = inspect(br#"{"rid":"c_t2","model":"m","stream":true}"#, false).unwrap();
        assert_eq!(i.rid.as_deref(), Some("c_t2"));
        assert_eq!(i.model.as_deref(), Some("m"));
        assert!(i.stream);
        let i = inspect(br#"{"rid":["a","b"]}"#, false).unwrap();
        assert_eq!(i.rid.as_deref(), Some("a"));
        let i = inspect(br#"{"rid":7}"#, false).unwrap();
        assert_eq!(i.rid, None);
    }

    #[test]
    fn text_grows_at_the_end_across_turns() {
        let t1 = inspect(br#"{"messages":[{"role":"user","content":"hi"}]}"#, true).unwrap();
        let t2 = inspect(
            br#"{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}"#,
            true,
        )
        .unwrap();
        assert!(t2.text.unwrap().starts_with(&t1.text.unwrap()));
    }

    #[test]
    fn key_fields_and_wrong_types() {
        let i = inspect(
            br#"{"prompt_cache_key":"p","conversation":{"id":"c"},"metadata":{"user_id":"u"},
                "nvext":{"session_control":{"session_id":"s","action":"bind","timeout":60}}}"#,
            false,
        )
        .unwrap();
        let k = i.keys.unwrap();
        assert_eq!(k.prompt_cache_key.as_deref(), Some("p"));
        assert_eq!(k.conversation.as_deref(), Some("c"));
        assert_eq!(k.metadata_user_id.as_deref(), Some("u"));
        assert_eq!(k.nvext_session_id.as_deref(), Some("s"));
        assert_eq!(i.session, Some((SessionAction::Bind, "s".to_owned())));
        for (nvext, want) in [
            (
                r#"{"session_id":"s","action":"close"}"#,
                Some(SessionAction::Close),
            ),
            (r#"{"session_id":"s","action":"open"}"#, None),
            (r#"{"session_id":"s","action":1}"#, None),
            (r#"{"action":"close"}"#, None),
        ] {
            let body = format!(r#"{{"nvext":{{"session_control":{nvext}}}}}"#);
            let i = inspect(body.as_bytes(), false).unwrap();
            assert_eq!(i.session.map(|s| s.0), want, "{nvext}");
        }
        let i = inspect(
            br#"{"conversation":"c2","messages":[{"content":"x"}]}"#,
            true,
        )
        .unwrap();
        assert_eq!(i.keys.unwrap().conversation.as_deref(), Some("c2"));
        // Wrong JSON types are skipped, never a parse error.
        let i = inspect(
            br#"{"prompt_cache_key":7,"conversation":[1],"metadata":"m",
                "nvext":{"session_control":{"session_id":{"a":1}}}}"#,
            false,
        )
        .unwrap();
        assert_eq!(i.keys, None);
        assert_eq!(inspect(br#"{"model":"m"}"#, true).unwrap().keys, None);
    }

    #[test]
    fn not_json_is_a_parse_error() {
        for bad in [&b"{"[..], b"", b"[1]", b"nul"] {
            assert!(matches!(
                inspect(bad, false),
                Err(GatewayError::JsonParse(_))
            ));
        }
    }
}

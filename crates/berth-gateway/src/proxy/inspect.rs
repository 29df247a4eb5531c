//! What the gateway reads out of a buffered request body.
//!
//! Only the fields routing needs are kept (`rid`, `model`, `stream`, the key fields of
//! `--routing-key-sources` (`body_keys.rs`), and the prompt text when the policy matches
//! prefixes); everything else is skipped by the parser and forwarded as the original bytes. A
//! body that is not a JSON object is a `json_parse_error`; a key field of the wrong JSON type is
//! only skipped.

use std::sync::Arc;

use serde::Deserialize;
use serde::de::{self, IgnoredAny, MapAccess, Visitor};

use super::body_keys::KeyFields;
pub(crate) use super::body_keys::SessionAction;
use super::prompt::{IsTrue, Leaves, TEXT_FIELDS};
use crate::error::GatewayError;
use crate::model_scan::ModelText;
use crate::routing::BodyKeys;
use crate::routing::policy::{PrefixHasher, PrefixHashes};

/// `rid` as SGLang accepts it: a string, or a list (rerank and batches: the first id counts).
#[derive(Deserialize)]
#[serde(untagged)]
enum Rid {
    One(String),
    Many(Vec<String>),
    Other(IgnoredAny),
}

/// A body's session control: its action and session id.
pub(crate) type Session = (SessionAction, String);

/// A body's `model`: one of the workers' models (sharing the registry's `Arc`), or the name as
/// the body gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ModelName {
    /// A model of the workers' list the body's model was found in (no copy made of it).
    Known(Arc<str>),
    /// Any other name.
    Named(String),
}

impl ModelName {
    /// A streamed body's model, as the scan found it: the workers' own model when `known` (the
    /// view's sorted list) has one with the same bytes, else its text.
    pub(crate) fn of_scan(text: ModelText, known: &[Arc<str>]) -> Self {
        match known.binary_search_by(|k| k.as_bytes().cmp(text.as_bytes())) {
            Ok(i) => Self::Known(Arc::clone(&known[i])),
            Err(_) => Self::Named(text.into_string()),
        }
    }
}

impl std::ops::Deref for ModelName {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            Self::Known(m) => m,
            Self::Named(m) => m,
        }
    }
}

impl From<String> for ModelName {
    fn from(m: String) -> Self {
        Self::Named(m)
    }
}

/// The routing-relevant fields of a body.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Inspected {
    pub(crate) rid: Option<String>,
    pub(crate) model: Option<ModelName>,
    pub(crate) stream: bool,
    /// The prompt's chunk hashes, when asked for (boxed, as the three members below: the
    /// inspection is moved with the stages' state, and most requests have none of them).
    pub(crate) prefix: Option<Box<PrefixHashes>>,
    /// The key fields (`prompt_cache_key`, ...), when the body names any (boxed: most bodies
    /// name none, and the inspection is moved with the stages' state).
    pub(crate) keys: Option<Box<BodyKeys>>,
    /// `nvext.session_control`'s action and session id.
    pub(crate) session: Option<Box<Session>>,
    /// The raw `previous_response_id` (a Responses chain), when it is a string.
    pub(crate) previous_response_id: Option<Box<str>>,
}

fn first_rid(rid: Option<Rid>) -> Option<String> {
    match rid? {
        Rid::One(s) => Some(s),
        Rid::Many(v) => v.into_iter().next(),
        Rid::Other(_) => None,
    }
}

/// The top-level object, read member by member.
struct Top {
    want_text: bool,
}

/// What [`Top`] keeps.
#[derive(Default)]
struct Fields {
    rid: Option<Rid>,
    model: Option<String>,
    stream: bool,
    prompt: PrefixHasher,
    keys: KeyFields,
}

impl<'de> Visitor<'de> for Top {
    type Value = Fields;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields, A::Error> {
        let mut out = Fields::default();
        // as a derived struct would: each known member at most once
        let mut seen = [false; 8 + TEXT_FIELDS.len()];
        let mut once = |i: usize, name: &'static str| {
            if std::mem::replace(&mut seen[i], true) {
                Err(de::Error::duplicate_field(name))
            } else {
                Ok(())
            }
        };
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match &*key {
                "rid" => {
                    once(0, "rid")?;
                    out.rid = map.next_value()?;
                }
                "model" => {
                    once(1, "model")?;
                    out.model = map.next_value()?;
                }
                "stream" => {
                    once(2, "stream")?;
                    out.stream = map.next_value::<IsTrue>()?.0;
                }
                "prompt_cache_key" => {
                    once(3, "prompt_cache_key")?;
                    out.keys.prompt_cache_key = map.next_value()?;
                }
                "conversation" => {
                    once(4, "conversation")?;
                    out.keys.conversation = map.next_value()?;
                }
                "metadata" => {
                    once(5, "metadata")?;
                    out.keys.metadata = map.next_value()?;
                }
                "nvext" => {
                    once(6, "nvext")?;
                    out.keys.nvext = map.next_value()?;
                }
                "previous_response_id" => {
                    once(7, "previous_response_id")?;
                    out.keys.previous_response_id = map.next_value()?;
                }
                k => match TEXT_FIELDS.iter().position(|f| *f == k) {
                    Some(i) if self.want_text => {
                        once(8 + i, TEXT_FIELDS[i])?;
                        map.next_value_seed(&mut Leaves(&mut out.prompt))?;
                    }
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                    }
                },
            }
        }
        Ok(out)
    }
}

/// Parses `body`; `want_text` also hashes the prompt text for prefix matching (hashed as the
/// parser finds it, without building a DOM: see `prompt.rs`).
pub(crate) fn inspect(body: &[u8], want_text: bool) -> Result<Inspected, GatewayError> {
    let parse_err = |e: serde_json::Error| GatewayError::JsonParse(e.to_string());
    // serde would also accept a JSON array as a struct; request bodies are objects.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(GatewayError::JsonParse("expected a JSON object".to_owned()));
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let mut fields =
        serde::Deserializer::deserialize_map(&mut de, Top { want_text }).map_err(parse_err)?;
    de.end().map_err(parse_err)?;
    Ok(Inspected {
        rid: first_rid(fields.rid),
        model: fields.model.map(ModelName::from),
        stream: fields.stream,
        prefix: want_text.then(|| Box::new(fields.prompt.finish())),
        session: fields.keys.session_control().map(Box::new),
        previous_response_id: fields
            .keys
            .take_previous_response_id()
            .map(String::into_boxed_str),
        keys: fields.keys.into_keys().map(Box::new),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scanned_model_the_workers_serve_is_their_own() {
        let known: Vec<Arc<str>> = ["llama", "m\u{e9}", "sim-model"]
            .into_iter()
            .map(Arc::from)
            .collect();
        for (i, m) in known.iter().enumerate() {
            let name = ModelName::of_scan(ModelText::from(&**m), &known);
            assert_eq!(&*name, &**m);
            assert!(
                matches!(&name, ModelName::Known(k) if Arc::ptr_eq(k, &known[i])),
                "{m}"
            );
        }
        for m in ["sim", "sim-model2", "", "LLAMA", "m\u{e8}"] {
            let name = ModelName::of_scan(ModelText::from(m), &known);
            assert_eq!(name, ModelName::Named(m.to_owned()));
            assert_eq!(&*name, m);
        }
        assert_eq!(
            ModelName::of_scan(ModelText::from("m"), &[]),
            ModelName::Named("m".to_owned())
        );
    }

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

    fn prompt(body: &str) -> PrefixHashes {
        *inspect(body.as_bytes(), true).unwrap().prefix.unwrap()
    }

    #[test]
    fn text_grows_at_the_end_across_turns() {
        let long = "a long first message, ".repeat(40);
        let t1 = prompt(&format!(
            r#"{{"system":"be brief","messages":[{{"role":"user","content":"{long}"}}]}}"#
        ));
        let t2 = prompt(&format!(
            r#"{{"system":"be brief","messages":[{{"role":"user","content":"{long}"}},
               {{"role":"assistant","content":[{{"type":"text","text":"yo"}}]}}]}}"#
        ));
        assert!(t1.chunks().len() > 20);
        assert_eq!(t1.chunks(), &t2.chunks()[..t1.chunks().len()]);
        assert!(t2.text_len() > t1.text_len());
    }

    #[test]
    fn the_prompt_is_the_string_leaves_in_order_escapes_decoded() {
        let p = prompt(
            r#"{"model":"m","messages":[{"role":"user","content":"caf\u00e9 \"x\"","n":5}],
                "temperature":0.5,"prompt":["a",["b",{"k":"c"}]]}"#,
        );
        assert_eq!(
            p,
            PrefixHashes::of("user\ncafé \"x\"\na\nb\nc\n".as_bytes())
        );
        // not asked for, not computed
        assert_eq!(inspect(br#"{"prompt":"x"}"#, false).unwrap().prefix, None);
    }

    #[test]
    fn members_as_a_derived_struct_reads_them() {
        let i = inspect(br#"{"stream":{"big":[1,2,3]},"model":null}"#, true).unwrap();
        assert!(!i.stream);
        assert_eq!(i.model, None);
        for bad in [
            &br#"{"model":"a","model":"b"}"#[..],
            br#"{"messages":[],"messages":[]}"#,
            br#"{"model":5}"#,
            br#"{"a":1} x"#,
        ] {
            assert!(matches!(
                inspect(bad, true),
                Err(GatewayError::JsonParse(_))
            ));
        }
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
        assert_eq!(
            i.session.map(|s| *s),
            Some((SessionAction::Bind(Some(60)), "s".to_owned()))
        );
        for (timeout, want) in [
            ("0", None),
            ("-5", None),
            ("1.5", None),
            ("\"60\"", None),
            ("7", Some(7)),
        ] {
            let body = format!(
                r#"{{"nvext":{{"session_control":{{"session_id":"s","action":"bind","timeout":{timeout}}}}}}}"#
            );
            let i = inspect(body.as_bytes(), false).unwrap();
            assert_eq!(
                i.session.map(|s| s.0),
                Some(SessionAction::Bind(want)),
                "{timeout}"
            );
        }
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
        let i = inspect(br#"{"previous_response_id":"resp_1","input":"x"}"#, false).unwrap();
        assert_eq!(i.previous_response_id.as_deref(), Some("resp_1"));
        let i = inspect(br#"{"previous_response_id":5}"#, false).unwrap();
        assert_eq!(i.previous_response_id, None);
    }
}

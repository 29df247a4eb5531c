//! What the gateway reads out of a buffered request body.
//!
//! Only the fields routing needs are kept (`rid`, `model`, `stream`, and the prompt text when the
//! policy matches prefixes); everything else is skipped by the parser and forwarded as the
//! original bytes. A body that is not a JSON object is a `json_parse_error`.

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

use crate::error::GatewayError;

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
}

/// The routing-relevant fields of a body.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Inspected {
    pub(crate) rid: Option<String>,
    pub(crate) model: Option<String>,
    pub(crate) stream: bool,
    pub(crate) text: Option<String>,
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
        return Ok(Inspected {
            rid: first_rid(h.rid),
            model: h.model,
            stream: is_true(h.stream.as_ref()),
            text: None,
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
    Ok(Inspected {
        rid: first_rid(w.rid),
        model: w.model,
        stream: is_true(w.stream.as_ref()),
        text: Some(text),
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
    fn not_json_is_a_parse_error() {
        for bad in [&b"{"[..], b"", b"[1]", b"nul"] {
            assert!(matches!(
                inspect(bad, false),
                Err(GatewayError::JsonParse(_))
            ));
        }
    }
}

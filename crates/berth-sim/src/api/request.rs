//! Reading a generation request of any API into one engine request.
//!
//! Each API spells the same things differently (prompt, token limit, streaming, model); this is
//! the one place that knows the spellings. The prompt becomes tokens: chat-like APIs render their
//! messages ChatML-style and append the generation prompt, so the next turn, which repeats this
//! turn's answer verbatim, extends this turn's tokens.

use serde_json::Value;

use crate::tokenize::{GENERATION_PROMPT, Token, id_token, render_message, tokenize_into};

/// Which generation API a request came through; decides framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GenApi {
    /// `POST /v1/chat/completions`.
    Chat,
    /// `POST /v1/completions`.
    Completion,
    /// `POST /generate` (SGLang native).
    Generate,
    /// `POST /v1/messages` (Anthropic).
    Messages,
    /// `POST /v1/responses` (OpenAI Responses; streamed as `response.created` then completion
    /// chunks).
    Responses,
}

/// A generation request, API-independent.
#[derive(Debug)]
pub(crate) struct GenRequest {
    pub(crate) api: GenApi,
    pub(crate) prompt: Vec<Token>,
    /// Tokens to generate; `None` means the worker's default, finishing with "stop".
    pub(crate) max_tokens: Option<u32>,
    pub(crate) stream: bool,
}

/// The body's `rid`: a string, or the first of a list.
pub(crate) fn rid_of(body: &Value) -> Option<String> {
    match body.get("rid")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => items.first().and_then(Value::as_str).map(str::to_owned),
        _ => None,
    }
}

/// The body's `model`, if a string.
pub(crate) fn model_of(body: &Value) -> Option<&str> {
    body.get("model").and_then(Value::as_str)
}

fn first_u64(body: &Value, names: &[&str]) -> Option<u32> {
    names
        .iter()
        .find_map(|n| body.get(*n).and_then(Value::as_u64))
        .map(|v| u32::try_from(v).unwrap_or(u32::MAX))
}

fn stream_of(body: &Value) -> bool {
    body.get("stream").and_then(Value::as_bool).unwrap_or(false)
}

/// Text of a message `content`: a string, or the text parts of a list.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.as_str().or_else(|| p.get("text").and_then(Value::as_str)))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

fn render_chat(system: Option<String>, messages: &[Value]) -> Vec<Token> {
    let mut text = String::new();
    if let Some(system) = system {
        render_message("system", &system, &mut text);
    }
    for m in messages {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
        render_message(role, &content_text(m.get("content")), &mut text);
    }
    text.push_str(GENERATION_PROMPT);
    let mut tokens = Vec::with_capacity(text.len() / 4 + 8);
    tokenize_into(&text, &mut tokens);
    tokens
}

fn ids(values: &[Value]) -> Option<Vec<Token>> {
    values.iter().map(|v| v.as_u64().map(id_token)).collect()
}

fn text_or_ids(value: Option<&Value>) -> Result<Vec<Token>, String> {
    match value {
        Some(Value::String(s)) => {
            let mut t = Vec::new();
            tokenize_into(s, &mut t);
            Ok(t)
        }
        Some(Value::Array(items)) => match items.first() {
            Some(Value::String(_)) | Some(Value::Array(_)) if items.len() == 1 => {
                text_or_ids(items.first())
            }
            Some(Value::Number(_)) => ids(items).ok_or_else(|| "token ids must be integers".into()),
            None => Ok(Vec::new()),
            _ => Err("batched prompts are not supported by the simulated worker".into()),
        },
        _ => Err("missing prompt".into()),
    }
}

/// Parses a generation request body for `api`.
pub(crate) fn parse(api: GenApi, body: &Value) -> Result<GenRequest, String> {
    let (prompt, max_tokens, stream) = match api {
        GenApi::Chat => {
            let messages = body
                .get("messages")
                .and_then(Value::as_array)
                .ok_or("missing `messages`")?;
            let max = first_u64(
                body,
                &["max_completion_tokens", "max_tokens", "max_new_tokens"],
            );
            (render_chat(None, messages), max, stream_of(body))
        }
        GenApi::Completion => {
            let prompt = text_or_ids(body.get("prompt"))?;
            (
                prompt,
                first_u64(body, &["max_tokens", "max_new_tokens"]),
                stream_of(body),
            )
        }
        GenApi::Generate => {
            let prompt = match body.get("input_ids") {
                Some(v) => text_or_ids(Some(v))?,
                None => {
                    text_or_ids(body.get("text")).map_err(|_| "missing `text` or `input_ids`")?
                }
            };
            let params = body.get("sampling_params").cloned().unwrap_or(Value::Null);
            let max = first_u64(&params, &["max_new_tokens", "max_tokens"]);
            (prompt, max, stream_of(body))
        }
        GenApi::Messages => {
            let messages = body
                .get("messages")
                .and_then(Value::as_array)
                .ok_or("missing `messages`")?;
            let system = body.get("system").map(|s| content_text(Some(s)));
            (
                render_chat(system, messages),
                first_u64(body, &["max_tokens"]),
                stream_of(body),
            )
        }
        GenApi::Responses => {
            let system = body
                .get("instructions")
                .and_then(Value::as_str)
                .map(str::to_owned);
            let prompt = match body.get("input") {
                Some(Value::String(s)) => {
                    render_chat(system, &[serde_json::json!({"role": "user", "content": s})])
                }
                Some(Value::Array(items)) => render_chat(system, items),
                _ => return Err("missing `input`".into()),
            };
            (
                prompt,
                first_u64(body, &["max_output_tokens", "max_tokens"]),
                stream_of(body),
            )
        }
    };
    Ok(GenRequest {
        api,
        prompt,
        max_tokens,
        stream,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn token_limits_and_their_aliases() {
        let chat = |b: Value| parse(GenApi::Chat, &b).unwrap().max_tokens;
        let msgs = json!([{"role": "user", "content": "hi"}]);
        assert_eq!(chat(json!({"messages": msgs, "max_tokens": 5})), Some(5));
        assert_eq!(
            chat(json!({"messages": msgs, "max_completion_tokens": 6})),
            Some(6)
        );
        assert_eq!(chat(json!({"messages": msgs})), None);
        let generate = parse(
            GenApi::Generate,
            &json!({"text": "x", "sampling_params": {"max_new_tokens": 7}}),
        );
        assert_eq!(generate.unwrap().max_tokens, Some(7));
    }

    #[test]
    fn prompts_in_every_spelling() {
        assert_eq!(
            parse(GenApi::Completion, &json!({"prompt": [1, 2, 3]}))
                .unwrap()
                .prompt
                .len(),
            3
        );
        assert_eq!(
            parse(GenApi::Completion, &json!({"prompt": ["abcdefgh"]}))
                .unwrap()
                .prompt
                .len(),
            2
        );
        assert!(parse(GenApi::Completion, &json!({"prompt": ["a", "b"]})).is_err());
        assert_eq!(
            parse(GenApi::Generate, &json!({"input_ids": [1, 2]}))
                .unwrap()
                .prompt
                .len(),
            2
        );
        assert!(parse(GenApi::Chat, &json!({})).is_err());
        let parts =
            json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]});
        let plain = json!({"messages": [{"role": "user", "content": "hi"}]});
        assert_eq!(
            parse(GenApi::Chat, &parts).unwrap().prompt,
            parse(GenApi::Chat, &plain).unwrap().prompt
        );
    }

    #[test]
    fn rid_may_be_a_list() {
        assert_eq!(rid_of(&json!({"rid": "a_t1"})).as_deref(), Some("a_t1"));
        assert_eq!(rid_of(&json!({"rid": ["b", "c"]})).as_deref(), Some("b"));
        assert_eq!(rid_of(&json!({})), None);
    }
}

//! The conversation history and how each endpoint type serializes it.
//!
//! Chat requests carry the messages as they are; completions and `/generate` carry the same
//! history flattened into one prompt (`System: ...\nUser: ...\nAssistant: ...\nAssistant:`), so
//! every endpoint type sees a prompt whose prefix grows turn by turn.

use serde_json::{Map, Value, json};

/// The API a run targets (`--endpoint-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndpointType {
    /// OpenAI chat completions, `POST /v1/chat/completions`.
    Chat,
    /// OpenAI completions, `POST /v1/completions`.
    Completions,
    /// SGLang native generation, `POST /generate`.
    Generate,
    /// OpenAI Responses, `POST /v1/responses` (the history as `input` items).
    Responses,
}

impl EndpointType {
    /// The request path.
    pub fn path(self) -> &'static str {
        match self {
            Self::Chat => "/v1/chat/completions",
            Self::Completions => "/v1/completions",
            Self::Generate => "/generate",
            Self::Responses => "/v1/responses",
        }
    }
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The shared system prompt.
    System,
    /// The benchmark, as the user.
    User,
    /// The server's answer.
    Assistant,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::User => "user",
            Self::Assistant => "assistant",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::System => "System",
            Self::User => "User",
            Self::Assistant => "Assistant",
        }
    }
}

/// One message of the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Its author.
    pub role: Role,
    /// Its text.
    pub content: String,
}

/// The JSON body for one turn: the full history, `max_tokens`, streaming options.
pub fn request_body(
    endpoint: EndpointType,
    model: &str,
    history: &[Message],
    max_tokens: u64,
    streaming: bool,
) -> Map<String, Value> {
    let mut body = Map::new();
    match endpoint {
        EndpointType::Chat => {
            let messages: Vec<Value> = history
                .iter()
                .map(|m| json!({"role": m.role.as_str(), "content": m.content}))
                .collect();
            body.insert("model".into(), json!(model));
            body.insert("messages".into(), Value::Array(messages));
            body.insert("max_tokens".into(), json!(max_tokens));
        }
        EndpointType::Completions => {
            body.insert("model".into(), json!(model));
            body.insert("prompt".into(), json!(flatten(history)));
            body.insert("max_tokens".into(), json!(max_tokens));
        }
        EndpointType::Responses => {
            let input: Vec<Value> = history
                .iter()
                .map(|m| json!({"role": m.role.as_str(), "content": m.content}))
                .collect();
            body.insert("model".into(), json!(model));
            body.insert("input".into(), Value::Array(input));
            body.insert("max_output_tokens".into(), json!(max_tokens));
        }
        EndpointType::Generate => {
            body.insert("text".into(), json!(flatten(history)));
            body.insert(
                "sampling_params".into(),
                json!({"max_new_tokens": max_tokens}),
            );
        }
    }
    body.insert("stream".into(), json!(streaming));
    if streaming && matches!(endpoint, EndpointType::Chat | EndpointType::Completions) {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    body
}

fn flatten(history: &[Message]) -> String {
    let mut out = String::new();
    for m in history {
        out.push_str(m.role.label());
        out.push_str(": ");
        out.push_str(&m.content);
        out.push('\n');
    }
    out.push_str("Assistant:");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history() -> Vec<Message> {
        vec![
            Message {
                role: Role::System,
                content: "sys".into(),
            },
            Message {
                role: Role::User,
                content: "hi".into(),
            },
            Message {
                role: Role::Assistant,
                content: "yo".into(),
            },
            Message {
                role: Role::User,
                content: "again".into(),
            },
        ]
    }

    #[test]
    fn chat_body() {
        let b = request_body(EndpointType::Chat, "m", &history(), 7, true);
        assert_eq!(
            b["messages"][2],
            json!({"role": "assistant", "content": "yo"})
        );
        assert_eq!(b["max_tokens"], json!(7));
        assert_eq!(b["stream_options"], json!({"include_usage": true}));
    }

    #[test]
    fn flattened_bodies() {
        let c = request_body(EndpointType::Completions, "m", &history(), 7, false);
        assert_eq!(
            c["prompt"],
            json!("System: sys\nUser: hi\nAssistant: yo\nUser: again\nAssistant:")
        );
        assert!(c.get("stream_options").is_none());
        let g = request_body(EndpointType::Generate, "m", &history(), 7, true);
        assert_eq!(g["sampling_params"], json!({"max_new_tokens": 7}));
        assert!(g.get("model").is_none());
        assert!(g.get("stream_options").is_none());
    }
}

//! Reading the answer, the usage and any error out of a response body.
//!
//! Non-streamed bodies are one JSON document. Streamed bodies are server-sent events whose
//! `data:` lines hold JSON chunks and end with `data: [DONE]`; chat and completions streams end
//! with a usage chunk, `/generate` chunks carry `meta_info` (and cumulative `text`).

use serde_json::Value;

use crate::workload::EndpointType;

/// Token counts reported by the server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    /// Prompt tokens (`usage.prompt_tokens` or `meta_info.prompt_tokens`).
    pub prompt_tokens: Option<u64>,
    /// Prompt tokens served from the KV cache (`usage.prompt_tokens_details.cached_tokens` or
    /// `meta_info.cached_tokens`).
    pub cached_tokens: Option<u64>,
    /// Generated tokens (`usage.completion_tokens` or `meta_info.completion_tokens`).
    pub completion_tokens: Option<u64>,
}

impl Usage {
    /// Reads whichever usage the chunk carries, keeping what it already has otherwise.
    fn merge_from(&mut self, v: &Value) {
        // Responses: `usage` (whole body) or `response.usage` (`response.completed`), named
        // `input_tokens` / `output_tokens`.
        let usage = v
            .get("usage")
            .or_else(|| v.pointer("/response/usage"))
            .filter(|u| u.is_object());
        if let Some(u) = usage {
            let first = |names: &[&str]| names.iter().find_map(|n| u.pointer(n)?.as_u64());
            self.prompt_tokens = first(&["/prompt_tokens", "/input_tokens"]).or(self.prompt_tokens);
            self.completion_tokens =
                first(&["/completion_tokens", "/output_tokens"]).or(self.completion_tokens);
            self.cached_tokens = first(&[
                "/prompt_tokens_details/cached_tokens",
                "/input_tokens_details/cached_tokens",
            ])
            .or(self.cached_tokens);
        }
        if let Some(m) = v.get("meta_info").filter(|m| m.is_object()) {
            self.prompt_tokens = m
                .get("prompt_tokens")
                .and_then(Value::as_u64)
                .or(self.prompt_tokens);
            self.completion_tokens = m
                .get("completion_tokens")
                .and_then(Value::as_u64)
                .or(self.completion_tokens);
            self.cached_tokens = m
                .get("cached_tokens")
                .and_then(Value::as_u64)
                .or(self.cached_tokens);
        }
    }
}

/// Accumulates one response body, chunk by chunk.
#[derive(Debug)]
pub struct ResponseReader {
    endpoint: EndpointType,
    streaming: bool,
    buf: Vec<u8>,
    /// The answer text so far.
    pub text: String,
    /// Usage seen so far.
    pub usage: Usage,
    /// Events that carried new text.
    pub content_events: u64,
    /// An error object found in the body (`error.code` or `error.type`, and `error.message`).
    pub error: Option<(Option<String>, String)>,
    /// Whether the body could not be parsed.
    pub malformed: bool,
    /// The Responses API answer's id (`id` of a whole body, `response.id` of a stream's
    /// `response.created`), the next turn's `previous_response_id`.
    pub response_id: Option<String>,
}

impl ResponseReader {
    /// A reader for one response of `endpoint`.
    pub fn new(endpoint: EndpointType, streaming: bool) -> Self {
        Self {
            endpoint,
            streaming,
            buf: Vec::new(),
            text: String::new(),
            usage: Usage::default(),
            content_events: 0,
            error: None,
            malformed: false,
            response_id: None,
        }
    }

    /// Feeds body bytes; returns whether they completed at least one event carrying new text.
    pub fn feed(&mut self, bytes: &[u8]) -> bool {
        self.buf.extend_from_slice(bytes);
        if !self.streaming {
            return false;
        }
        let before = self.content_events;
        while let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=pos).collect();
            self.stream_line(&line);
        }
        self.content_events > before
    }

    /// Finishes the body (parses it whole when not streaming).
    pub fn finish(&mut self) {
        let rest = std::mem::take(&mut self.buf);
        if self.streaming {
            self.stream_line(&rest);
        } else if !rest.is_empty() {
            match serde_json::from_slice::<Value>(&rest) {
                Ok(v) => self.document(&v),
                Err(_) => self.malformed = true,
            }
        }
    }

    fn stream_line(&mut self, line: &[u8]) {
        let Ok(line) = std::str::from_utf8(line) else {
            self.malformed = true;
            return;
        };
        let Some(data) = line.trim_end_matches(['\r', '\n']).strip_prefix("data:") else {
            return;
        };
        let data = data.trim_start();
        if data.is_empty() || data == "[DONE]" {
            return;
        }
        match serde_json::from_str::<Value>(data) {
            Ok(v) => self.document(&v),
            Err(_) => self.malformed = true,
        }
    }

    fn document(&mut self, v: &Value) {
        self.usage.merge_from(v);
        if let Some(err) = v.get("error") {
            let code = err
                .get("code")
                .and_then(|c| {
                    c.as_str()
                        .map(str::to_owned)
                        .or_else(|| c.as_i64().map(|n| n.to_string()))
                })
                .or_else(|| err.get("type").and_then(Value::as_str).map(str::to_owned));
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            self.error = Some((code, message));
            return;
        }
        if self.endpoint == EndpointType::Responses && self.response_id.is_none() {
            self.response_id = v
                .get("id")
                .or_else(|| v.pointer("/response/id"))
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        let piece = match self.endpoint {
            EndpointType::Chat => v
                .pointer("/choices/0/delta/content")
                .or_else(|| v.pointer("/choices/0/message/content"))
                .and_then(Value::as_str),
            EndpointType::Completions => v.pointer("/choices/0/text").and_then(Value::as_str),
            EndpointType::Generate => v.get("text").and_then(Value::as_str),
            // A whole answer's output text, a stream's text deltas (the sim streams
            // completion chunks after `response.created`).
            EndpointType::Responses => v
                .pointer("/output/0/content/0/text")
                .or_else(|| {
                    (v.get("type").and_then(Value::as_str) == Some("response.output_text.delta"))
                        .then(|| v.get("delta"))
                        .flatten()
                })
                .or_else(|| v.pointer("/choices/0/text"))
                .and_then(Value::as_str),
        };
        let Some(piece) = piece else { return };
        if piece.is_empty() {
            return;
        }
        if self.endpoint == EndpointType::Generate
            && self.streaming
            && piece.starts_with(&self.text)
        {
            // SGLang streams cumulative text on /generate.
            if piece.len() == self.text.len() {
                return;
            }
            self.text = piece.to_owned();
        } else {
            self.text.push_str(piece);
        }
        self.content_events += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_stream_with_usage_chunk() {
        let mut r = ResponseReader::new(EndpointType::Chat, true);
        assert!(!r.feed(b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n"));
        assert!(r.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"he\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"con"));
        assert!(r.feed(b"tent\":\"llo\"}}]}\n\n"));
        r.feed(b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":6}}}\n\ndata: [DONE]\n\n");
        r.finish();
        assert_eq!(r.text, "hello");
        assert_eq!(r.content_events, 2);
        assert_eq!(
            r.usage,
            Usage {
                prompt_tokens: Some(10),
                cached_tokens: Some(6),
                completion_tokens: Some(2)
            }
        );
        assert!(!r.malformed);
    }

    #[test]
    fn generate_stream_is_cumulative() {
        let mut r = ResponseReader::new(EndpointType::Generate, true);
        r.feed(
            b"data: {\"text\":\"a\",\"meta_info\":{\"prompt_tokens\":5,\"cached_tokens\":0}}\n\n",
        );
        r.feed(b"data: {\"text\":\"a b\",\"meta_info\":{\"prompt_tokens\":5,\"cached_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n");
        r.finish();
        assert_eq!(r.text, "a b");
        assert_eq!(r.usage.cached_tokens, Some(3));
        assert_eq!(r.content_events, 2);
    }

    #[test]
    fn responses_ids_text_and_usage() {
        let mut r = ResponseReader::new(EndpointType::Responses, false);
        r.feed(br#"{"id":"resp_1","object":"response","output":[{"type":"message","id":"msg_1","content":[{"type":"output_text","text":"hi"}]}],"usage":{"input_tokens":9,"input_tokens_details":{"cached_tokens":4},"output_tokens":1}}"#);
        r.finish();
        assert_eq!(r.response_id.as_deref(), Some("resp_1"));
        assert_eq!(r.text, "hi");
        assert_eq!(
            r.usage,
            Usage {
                prompt_tokens: Some(9),
                cached_tokens: Some(4),
                completion_tokens: Some(1)
            }
        );
        // A stream: the id from `response.created`, text from the deltas (OpenAI's events or
        // the sim's completion chunks), never an item's id.
        let mut s = ResponseReader::new(EndpointType::Responses, true);
        for event in [
            r#"event: response.created"#,
            r#"data: {"type":"response.created","response":{"id":"resp_2","output":[]}}"#,
            r#"data: {"type":"response.output_item.added","item":{"id":"msg_2"}}"#,
            r#"data: {"type":"response.output_text.delta","delta":"a"}"#,
            r#"data: {"choices":[{"text":"b"}]}"#,
            r#"data: {"type":"response.completed","response":{"id":"resp_2","usage":{"input_tokens":3,"output_tokens":2}}}"#,
        ] {
            s.feed(format!("{event}\n\n").as_bytes());
        }
        s.finish();
        assert_eq!(s.response_id.as_deref(), Some("resp_2"));
        assert_eq!(s.text, "ab");
        assert_eq!(s.usage.prompt_tokens, Some(3));
        // Other endpoints never read an id.
        let mut c = ResponseReader::new(EndpointType::Chat, false);
        c.feed(br#"{"id":"chatcmpl-1","choices":[{"message":{"content":"x"}}]}"#);
        c.finish();
        assert_eq!(c.response_id, None);
    }

    #[test]
    fn non_streamed_documents_and_errors() {
        let mut r = ResponseReader::new(EndpointType::Completions, false);
        r.feed(
            br#"{"choices":[{"text":"xyz"}],"usage":{"prompt_tokens":4,"completion_tokens":1}}"#,
        );
        r.finish();
        assert_eq!(r.text, "xyz");
        assert_eq!(r.usage.cached_tokens, None);
        let mut e = ResponseReader::new(EndpointType::Chat, false);
        e.feed(br#"{"error":{"message":"no key","type":"invalid_request_error","code":"missing_routing_key"}}"#);
        e.finish();
        assert_eq!(
            e.error,
            Some((Some("missing_routing_key".into()), "no key".into()))
        );
        let mut m = ResponseReader::new(EndpointType::Chat, false);
        m.feed(b"not json");
        m.finish();
        assert!(m.malformed);
    }
}

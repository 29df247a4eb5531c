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
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.prompt_tokens = u
                .get("prompt_tokens")
                .and_then(Value::as_u64)
                .or(self.prompt_tokens);
            self.completion_tokens = u
                .get("completion_tokens")
                .and_then(Value::as_u64)
                .or(self.completion_tokens);
            self.cached_tokens = u
                .pointer("/prompt_tokens_details/cached_tokens")
                .and_then(Value::as_u64)
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
        let piece = match self.endpoint {
            EndpointType::Chat => v
                .pointer("/choices/0/delta/content")
                .or_else(|| v.pointer("/choices/0/message/content"))
                .and_then(Value::as_str),
            EndpointType::Completions => v.pointer("/choices/0/text").and_then(Value::as_str),
            EndpointType::Generate => v.get("text").and_then(Value::as_str),
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

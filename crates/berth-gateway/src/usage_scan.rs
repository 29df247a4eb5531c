//! The cached tokens an engine reports, found in the last bytes of its answer as they pass.
//!
//! Engines put usage at the end: the `usage` object closing a JSON body, the last chunk of an
//! OpenAI stream before `data: [DONE]` (with `stream_options.include_usage`, which llama.cpp's
//! server and berth's sim send unasked), SGLang's `meta_info`, llama.cpp's `timings`. So the
//! scan keeps the body's last [`TAIL`] bytes as the frames it was given (reference-counted
//! handles, no copy, nothing delayed: each frame goes on to the client as it came) and reads
//! them once, when the body has ended cleanly:
//!
//! - cached tokens: the last `"cached_tokens": <n>` (OpenAI `usage.prompt_tokens_details`,
//!   Responses `usage.input_tokens_details`, SGLang `meta_info`), else the last `"cache_n"`
//!   (llama.cpp `timings`);
//! - prompt tokens: the last `"prompt_tokens"`, else `"input_tokens"`, else llama.cpp's
//!   `"prompt_n"` plus `"cache_n"`.
//!
//! A member name is matched only as a key (a quote, the name, a quote, then `:`), so text
//! that merely mentions it inside a JSON string (where its quotes are escaped) does not count.
//! An answer without cached tokens, or with a value that is not a whole number (`null`), is
//! unknown, never 0.

use std::collections::VecDeque;

use bytes::Bytes;

/// Bytes of the end of an answer kept for the scan.
pub(crate) const TAIL: usize = 8 * 1024;

/// What an answer reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Usage {
    pub(crate) cached_tokens: u64,
    pub(crate) prompt_tokens: Option<u64>,
}

/// The last [`TAIL`] bytes of a body, as frames.
#[derive(Debug, Default)]
pub(crate) struct UsageScan {
    frames: VecDeque<Bytes>,
    held: usize,
}

impl UsageScan {
    /// Keeps `data` (a handle to it) while it is within the body's last [`TAIL`] bytes.
    pub(crate) fn feed(&mut self, data: &Bytes) {
        if data.is_empty() {
            return;
        }
        self.frames.push_back(data.clone());
        self.held += data.len();
        while let Some(front) = self.frames.front() {
            if self.held - front.len() < TAIL {
                break;
            }
            self.held -= front.len();
            self.frames.pop_front();
        }
    }

    /// The reported usage, read from the kept bytes.
    pub(crate) fn finish(self) -> Option<Usage> {
        let skip = self.held.saturating_sub(TAIL);
        let mut tail = Vec::with_capacity(self.held - skip);
        let mut at = 0;
        for f in &self.frames {
            let from = skip.saturating_sub(at).min(f.len());
            tail.extend_from_slice(&f[from..]);
            at += f.len();
        }
        parse(&tail)
    }
}

/// The usage in `tail` (see the module docs).
pub(crate) fn parse(tail: &[u8]) -> Option<Usage> {
    let cache_n = last_number(tail, b"cache_n");
    let cached = last_number(tail, b"cached_tokens").or(cache_n)?;
    let prompt = last_number(tail, b"prompt_tokens")
        .or_else(|| last_number(tail, b"input_tokens"))
        .or_else(|| Some(last_number(tail, b"prompt_n")? + cache_n?));
    Some(Usage {
        cached_tokens: cached,
        prompt_tokens: prompt,
    })
}

/// The value of the last `"name": <digits>` member in `buf`; `None` when there is none or
/// its value is not a whole number.
fn last_number(buf: &[u8], name: &[u8]) -> Option<u64> {
    let mut end = buf.len();
    while let Some(at) = rfind_key(&buf[..end], name) {
        let mut rest = &buf[at + name.len() + 2..];
        skip_ws(&mut rest);
        if let [b':', tail @ ..] = rest {
            rest = tail;
            skip_ws(&mut rest);
            let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
            return match digits {
                1..=19 => std::str::from_utf8(&rest[..digits]).ok()?.parse().ok(),
                _ => None,
            };
        }
        end = at;
    }
    None
}

/// Where the last `"name"` starts in `buf`.
fn rfind_key(buf: &[u8], name: &[u8]) -> Option<usize> {
    let n = name.len() + 2;
    if buf.len() < n {
        return None;
    }
    (0..=buf.len() - n)
        .rev()
        .find(|&i| buf[i] == b'"' && buf[i + n - 1] == b'"' && &buf[i + 1..i + n - 1] == name)
}

fn skip_ws(r: &mut &[u8]) {
    while let [b' ' | b'\t' | b'\r' | b'\n', tail @ ..] = *r {
        *r = tail;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(frames: &[&str]) -> Option<Usage> {
        let mut s = UsageScan::default();
        for f in frames {
            s.feed(&Bytes::copy_from_slice(f.as_bytes()));
        }
        s.finish()
    }

    fn usage(cached: u64, prompt: Option<u64>) -> Option<Usage> {
        Some(Usage {
            cached_tokens: cached,
            prompt_tokens: prompt,
        })
    }

    #[test]
    fn reads_each_engines_shape() {
        // OpenAI chat completion (vLLM, SGLang, llama.cpp's OpenAI API, the sim)
        let openai = r#"{"id":"x","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":120,"completion_tokens":3,"total_tokens":123,"prompt_tokens_details":{"cached_tokens":96}}}"#;
        assert_eq!(scan(&[openai]), usage(96, Some(120)));
        // Responses
        let responses = r#"{"usage":{"input_tokens":50,"input_tokens_details":{"cached_tokens":32},"output_tokens":2}}"#;
        assert_eq!(scan(&[responses]), usage(32, Some(50)));
        // SGLang native
        let sglang = r#"{"text":"hi","meta_info":{"prompt_tokens":77,"completion_tokens":2,"cached_tokens":64}}"#;
        assert_eq!(scan(&[sglang]), usage(64, Some(77)));
        // llama.cpp native /completion
        let llama = r#"{"content":"hi","timings":{"cache_n":236,"prompt_n":1,"predicted_n":5}}"#;
        assert_eq!(scan(&[llama]), usage(236, Some(237)));
        // a stream: the usage chunk before [DONE], split anywhere
        let stream = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"prompt_tokens_details\":{\"cach";
        assert_eq!(
            scan(&[stream, "ed_tokens\" : 16}}}\n\n", "data: [DONE]\n\n"]),
            usage(16, Some(40))
        );
    }

    #[test]
    fn missing_or_odd_values_are_unknown_never_zero() {
        assert_eq!(scan(&[r#"{"usage":{"prompt_tokens":10}}"#]), None);
        assert_eq!(
            scan(&[r#"{"usage":{"prompt_tokens_details":{"cached_tokens":null}}}"#]),
            None
        );
        // named inside generated text (escaped quotes): not a member
        let quoted = r#"{"content":"say \"cached_tokens\": 5","usage":{"prompt_tokens":9}}"#;
        assert_eq!(scan(&[quoted]), None);
        // the last report wins (usage in every chunk)
        let two = r#"{"usage":{"prompt_tokens_details":{"cached_tokens":1}}} {"usage":{"prompt_tokens_details":{"cached_tokens":2}}}"#;
        assert_eq!(scan(&[two]), usage(2, None));
        assert_eq!(scan(&[]), None);
    }

    #[test]
    fn keeps_only_the_tail() {
        let mut s = UsageScan::default();
        let head = Bytes::from(format!(
            r#"{{"usage":{{"prompt_tokens_details":{{"cached_tokens":7}}}},"x":"{}"#,
            "p".repeat(TAIL)
        ));
        s.feed(&head);
        for _ in 0..1000 {
            s.feed(&Bytes::from_static(b"pppppppp"));
        }
        assert!(s.held < TAIL + head.len() && s.frames.len() <= TAIL / 8 + 2);
        // the early report fell out of the window
        s.feed(&Bytes::from_static(b"\"}"));
        assert_eq!(s.finish(), None);
        let mut s = UsageScan::default();
        s.feed(&Bytes::from("x".repeat(3 * TAIL)));
        s.feed(&Bytes::from_static(br#"{"cached_tokens":5}"#));
        assert_eq!(s.finish(), usage(5, None));
    }
}

//! Finding a JSON body's top-level `"model"` while the body streams past, without buffering it.
//!
//! A streamed body is never parsed as a whole, yet an unknown `model` must get 404
//! `model_not_found` before a worker sees the request (as a buffered body does). [`ModelScan`] is
//! a byte-at-a-time state machine over the JSON structure: it tracks nesting depth, strings and
//! escapes, and at depth 1 which string is a key and which a value. It keeps at most
//! [`MAX_KEY`] bytes of the current top-level key and [`MAX_MODEL`] bytes of the model's value,
//! so its memory is bounded whatever the body's size, and it stops looking at bytes as soon as
//! it has an answer. Escapes in a key or in the model's value are decoded (by `serde_json`, on
//! the few bytes kept), so `"mod\u0065l"` is `model`.
//!
//! Answers: the model's value ([`Found::Model`]); no top-level `model` in the object
//! ([`Found::NoModel`]); or not something it can judge ([`Found::NotJudged`]): the body is not a
//! JSON object, `model` is not a string, or its value is longer than [`MAX_MODEL`]. The gateway
//! passes a `NotJudged` body through as it did before (the worker decides).
//!
//! Cost: measured in `benches/model_scan.rs` (figures in docs/benchmarks.md).

/// Longest top-level key kept (longer keys are not `model`).
pub const MAX_KEY: usize = 64;
/// Longest model value kept, escapes included.
pub const MAX_MODEL: usize = 1024;

/// What the scan found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// The top-level `model` string.
    Model(String),
    /// The top-level object ended without a `model` member.
    NoModel,
    /// Not a JSON object with a string `model` the scan can judge.
    NotJudged,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// Before the top-level `{`.
    Start,
    /// A key (or `}`) at depth 1.
    Key,
    /// The `:` after a key.
    Colon,
    /// A value at depth 1.
    Value,
    /// A `,` or `}` after a value at depth 1.
    Comma,
}

/// The incremental scanner; feed it the body's bytes in order.
#[derive(Debug)]
pub struct ModelScan {
    expect: Expect,
    depth: u32,
    in_string: bool,
    escape: bool,
    /// The string being read is a depth-1 key (kept in `buf`).
    in_key: bool,
    /// The string being read is the `model` value (kept in `buf`).
    in_model: bool,
    /// The last key read was `model`.
    key_is_model: bool,
    /// A depth-1 scalar value (number, literal) is being skipped.
    in_scalar: bool,
    buf: Vec<u8>,
    overflow: bool,
    found: Option<Found>,
}

impl Default for ModelScan {
    fn default() -> Self {
        Self::new()
    }
}

impl ModelScan {
    /// A scan at the start of a body.
    pub fn new() -> Self {
        Self {
            expect: Expect::Start,
            depth: 0,
            in_string: false,
            escape: false,
            in_key: false,
            in_model: false,
            key_is_model: false,
            in_scalar: false,
            buf: Vec::new(),
            overflow: false,
            found: None,
        }
    }

    /// The answer, once there is one.
    pub fn found(&self) -> Option<&Found> {
        self.found.as_ref()
    }

    /// The body ended: whatever the scan has not answered yet is not judged.
    pub fn finish(&mut self) -> &Found {
        self.found.get_or_insert(Found::NotJudged)
    }

    /// Scans the next bytes; returns the answer once there is one (later bytes are ignored).
    pub fn feed(&mut self, bytes: &[u8]) -> Option<&Found> {
        if self.found.is_some() {
            return self.found.as_ref();
        }
        let mut i = 0;
        while i < bytes.len() {
            // Inside a string nobody keeps (message text, mostly): jump to its next quote or
            // backslash, the only bytes that matter there.
            if self.in_string && !self.in_key && !self.in_model && !self.escape {
                match memchr::memchr2(b'"', b'\\', &bytes[i..]) {
                    Some(off) => i += off,
                    None => break,
                }
            }
            if let Some(f) = self.step(bytes[i]) {
                self.found = Some(f);
                break;
            }
            i += 1;
        }
        self.found.as_ref()
    }

    fn keep(&mut self, b: u8, limit: usize) {
        if self.buf.len() < limit {
            self.buf.push(b);
        } else {
            self.overflow = true;
        }
    }

    /// The kept string, decoded (escapes resolved); `None` if it overflowed or is not valid.
    fn take_string(&mut self) -> Option<String> {
        let raw = std::mem::take(&mut self.buf);
        if std::mem::take(&mut self.overflow) {
            return None;
        }
        if !raw.contains(&b'\\') {
            return String::from_utf8(raw).ok();
        }
        let mut quoted = Vec::with_capacity(raw.len() + 2);
        quoted.push(b'"');
        quoted.extend_from_slice(&raw);
        quoted.push(b'"');
        serde_json::from_slice(&quoted).ok()
    }

    fn step(&mut self, b: u8) -> Option<Found> {
        if self.in_string {
            if self.in_key {
                self.keep(b, MAX_KEY);
            } else if self.in_model {
                self.keep(b, MAX_MODEL);
            }
            if self.escape {
                self.escape = false;
            } else if b == b'\\' {
                self.escape = true;
            } else if b == b'"' {
                self.in_string = false;
                return self.string_ended();
            }
            return None;
        }
        if self.in_scalar {
            match b {
                b',' | b'}' | b' ' | b'\t' | b'\n' | b'\r' => self.in_scalar = false,
                _ => return None,
            }
        }
        if self.depth > 1 {
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 1 {
                        self.expect = Expect::Comma;
                    }
                }
                _ => {}
            }
            return None;
        }
        if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            return None;
        }
        match (self.expect, b) {
            (Expect::Start, b'{') => {
                self.depth = 1;
                self.expect = Expect::Key;
            }
            (Expect::Key, b'"') => {
                self.in_string = true;
                self.in_key = true;
            }
            (Expect::Key | Expect::Comma, b'}') => return Some(Found::NoModel),
            (Expect::Colon, b':') => self.expect = Expect::Value,
            (Expect::Comma, b',') => self.expect = Expect::Key,
            (Expect::Value, _) if self.key_is_model => {
                if b != b'"' {
                    return Some(Found::NotJudged);
                }
                self.in_string = true;
                self.in_model = true;
            }
            (Expect::Value, b'"') => {
                self.in_string = true;
                self.expect = Expect::Comma;
            }
            (Expect::Value, b'{' | b'[') => self.depth = 2,
            (Expect::Value, _) => {
                self.in_scalar = true;
                self.expect = Expect::Comma;
            }
            _ => return Some(Found::NotJudged),
        }
        None
    }

    /// A string just closed at depth 1 (nested strings never reach here).
    fn string_ended(&mut self) -> Option<Found> {
        if self.depth > 1 {
            return None;
        }
        if std::mem::take(&mut self.in_key) {
            // The closing quote was kept too.
            self.buf.pop();
            self.key_is_model = self.take_string().as_deref() == Some("model");
            self.expect = Expect::Colon;
            return None;
        }
        if std::mem::take(&mut self.in_model) {
            self.buf.pop();
            return Some(self.take_string().map_or(Found::NotJudged, Found::Model));
        }
        None
    }
}

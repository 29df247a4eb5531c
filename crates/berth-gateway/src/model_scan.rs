//! Finding a JSON body's top-level `"model"` (and, when asked, the top-level members that may
//! name a session) while the body streams past, without buffering it.
//!
//! A streamed body is never parsed as a whole, yet an unknown `model` must get 404
//! `model_not_found` before a worker sees the request (as a buffered body does), and a session
//! key in the body (`--routing-key-sources`) must be known before it is routed. [`ModelScan`] is
//! a byte-at-a-time state machine over the JSON structure: it tracks nesting depth, strings and
//! escapes, and at depth 1 which string is a key and which a value. It keeps at most
//! [`MAX_KEY`] bytes of the current top-level key, [`MAX_MODEL`] bytes of the model's value and
//! [`MAX_FIELD`] bytes of each kept member's raw value ([`Field`]), so its memory is bounded
//! whatever the body's size, and it stops looking at bytes as soon as it has every answer it
//! was asked for. Escapes in a key or in the model's value are decoded (by `serde_json`, on the
//! few bytes kept), so `"mod\u0065l"` is `model`.
//!
//! Model answers: the model's value ([`Found::Model`]); no top-level `model` in the object
//! ([`Found::NoModel`]); or not something it can judge ([`Found::NotJudged`]): the body is not a
//! JSON object, `model` is not a string, or its value is longer than [`MAX_MODEL`]. The gateway
//! passes a `NotJudged` body through as it did before (the worker decides).
//!
//! Kept members ([`ModelScan::with_fields`]): each one's raw JSON value as it appeared (the
//! caller parses these few bytes), [`Kept::TooLong`] past [`MAX_FIELD`], and whether the object
//! has ended ([`ModelScan::ended`]: no member can come any more). Only the first occurrence of a
//! member is kept.
//!
//! Cost: measured in `benches/model_scan.rs` (figures in docs/benchmarks.md).

/// Longest top-level key kept (longer keys are neither `model` nor a kept member).
pub const MAX_KEY: usize = 64;
/// Longest model value kept, escapes included.
pub const MAX_MODEL: usize = 1024;
/// Longest raw value kept of a [`Field`] member (a longer one is [`Kept::TooLong`]).
pub const MAX_FIELD: usize = 4096;

/// Emptied scan buffers kept per thread for the next scans.
const SPARE_BUFS: usize = 64;

mod fields;
mod keep;
mod skip;
mod text;

thread_local! {
    /// Scan buffers given back by ended scans, so that a scan's first kept byte allocates
    /// nothing (one buffer per scan in flight; each at most [`MAX_MODEL`] bytes).
    static SPARE: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// An empty buffer with room for a key: one this thread kept, or a new one.
fn spare_buf() -> Vec<u8> {
    SPARE
        .try_with(|s| s.try_borrow_mut().ok().and_then(|mut s| s.pop()))
        .ok()
        .flatten()
        .unwrap_or_else(|| Vec::with_capacity(MAX_KEY))
}

/// How many buffers this thread keeps (tests).
#[cfg(test)]
fn spare_bufs() -> usize {
    SPARE.with_borrow(Vec::len)
}

pub use fields::{Field, Kept};
pub use text::ModelText;

/// What the scan found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// The top-level `model` string.
    Model(ModelText),
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

/// What the last top-level key named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Other,
    Model,
    Field(Field),
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
    /// The value being read is kept in `buf` (the model's or a field's).
    keeping: Option<Target>,
    /// What the last key read named.
    target: Target,
    /// A depth-1 scalar value (number, literal) is being skipped.
    in_scalar: bool,
    buf: Vec<u8>,
    overflow: bool,
    model: Option<Found>,
    /// Whether the model answer is asked for.
    want_model: bool,
    /// The fields asked for, and those seen (bit sets over [`Field`]).
    wanted: u8,
    seen: u8,
    kept: [Option<Kept>; 5],
    /// No top-level member can come any more (the object closed, or it is not one).
    ended: bool,
}

/// `buf` goes back to the thread's spares (unless it grew past [`MAX_MODEL`] for a kept
/// member, is smaller than a spare is made (a decoded model's own), or the thread keeps
/// [`SPARE_BUFS`] already).
fn give_back(mut buf: Vec<u8>) {
    if buf.capacity() < MAX_KEY || buf.capacity() > MAX_MODEL {
        return;
    }
    buf.clear();
    let _ = SPARE.try_with(|s| {
        if let Ok(mut s) = s.try_borrow_mut()
            && s.len() < SPARE_BUFS
        {
            s.push(buf);
        }
    });
}

/// The scan's buffer goes back to the thread's spares ([`give_back`]).
impl Drop for ModelScan {
    fn drop(&mut self) {
        give_back(std::mem::take(&mut self.buf));
    }
}

impl Default for ModelScan {
    fn default() -> Self {
        Self::new()
    }
}

impl ModelScan {
    /// A scan for the model only, at the start of a body.
    pub fn new() -> Self {
        Self {
            expect: Expect::Start,
            depth: 0,
            in_string: false,
            escape: false,
            in_key: false,
            keeping: None,
            target: Target::Other,
            in_scalar: false,
            buf: Vec::new(),
            overflow: false,
            model: None,
            want_model: true,
            wanted: 0,
            seen: 0,
            kept: Default::default(),
            ended: false,
        }
    }

    /// A scan for the model and `fields`.
    pub fn with_fields(fields: &[Field]) -> Self {
        let mut s = Self::new();
        s.want(fields);
        s
    }

    /// Also keeps `fields` from here on (members already passed are not seen).
    pub fn want(&mut self, fields: &[Field]) {
        self.wanted |= fields.iter().fold(0, |a, f| a | f.bit());
    }

    /// From here on, asks only for the model answer (if `model`) and `fields`: [`Self::done`]
    /// no longer waits for the rest (what was kept stays).
    pub fn want_only(&mut self, model: bool, fields: &[Field]) {
        self.want_model = model;
        self.wanted = fields.iter().fold(0, |a, f| a | f.bit());
    }

    /// The model answer, once there is one.
    pub fn found(&self) -> Option<&Found> {
        self.model.as_ref()
    }

    /// Takes the model's value out of a [`Found::Model`] answer (no copy). The answer stays
    /// [`Found::Model`], with an empty value: [`Self::found`] still tells that the model was
    /// found, and the scan does not look for it again.
    pub fn take_model(&mut self) -> Option<ModelText> {
        match self.model.as_mut() {
            Some(Found::Model(m)) => Some(std::mem::take(m)),
            _ => None,
        }
    }

    /// Whether the member `field` has been seen (kept, or too long to keep).
    pub fn seen(&self, field: Field) -> bool {
        self.seen & field.bit() != 0
    }

    /// The member `field` as kept.
    pub fn kept(&self, field: Field) -> Option<&Kept> {
        self.kept[field as usize].as_ref()
    }

    /// Changes whenever a member is seen or the object ends (to re-check only then).
    pub fn progress(&self) -> (u8, bool) {
        (self.seen, self.ended)
    }

    /// Whether no member can come any more: the top-level object closed, the body is not a
    /// JSON object, or it ended ([`Self::finish`]).
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Whether every answer asked for is in (later bytes are ignored).
    pub fn done(&self) -> bool {
        (self.model.is_some() || !self.want_model) && (self.ended || self.wanted & !self.seen == 0)
    }

    /// The body ended: whatever the scan has not answered yet is not judged (and no member
    /// can come any more).
    pub fn finish(&mut self) -> &Found {
        self.ended = true;
        self.model.get_or_insert(Found::NotJudged)
    }

    /// Scans the next bytes; returns whether every answer is in ([`Self::done`]).
    pub fn feed(&mut self, bytes: &[u8]) -> bool {
        self.scan(bytes, false).0
    }

    /// Scans the body's last bytes, then [`Self::finish`]es. Once the model answer is in (or
    /// not asked for), the bytes left are not scanned at all when they cannot name a member
    /// asked for and not seen yet: no such name in them and no backslash (a name written with
    /// escapes), and the scan is not inside a key or a kept value that began earlier, nor
    /// between a key asked for and its value. (A
    /// chat body names no member but `model`: of its bytes only those up to the model's
    /// value are scanned.) The model answer, when not asked for, may then be
    /// [`Found::NotJudged`] where a full scan would have found none.
    pub fn feed_last(&mut self, bytes: &[u8]) -> &Found {
        let mut rest = bytes;
        if self.want_model && self.model.is_none() {
            let (_, n) = self.scan(bytes, true);
            rest = &bytes[n..];
        }
        if !self.done() && self.may_name_wanted(rest) {
            self.feed(rest);
        }
        self.finish()
    }

    /// Whether `bytes`, the rest of the body, may still give an answer asked for.
    fn may_name_wanted(&self, bytes: &[u8]) -> bool {
        if (self.want_model && self.model.is_none()) || self.in_key || self.keeping.is_some() {
            return true;
        }
        // A key asked for was read and its value has not begun: the value is in `bytes`.
        if matches!(self.expect, Expect::Colon | Expect::Value)
            && matches!(self.target, Target::Field(f) if self.wanted & !self.seen & f.bit() != 0)
        {
            return true;
        }
        let pending = self.wanted & !self.seen;
        pending != 0
            && (memchr::memchr(b'\\', bytes).is_some()
                || Field::ALL
                    .into_iter()
                    .any(|f| pending & f.bit() != 0 && skip::finder(f).find(bytes).is_some()))
    }

    /// Scans `bytes`: (whether every answer is in, how many bytes were scanned). With
    /// `to_model`, stops right after the model answer comes in.
    fn scan(&mut self, bytes: &[u8], to_model: bool) -> (bool, usize) {
        if self.done() {
            return (true, 0);
        }
        let mut i = 0;
        while i < bytes.len() {
            // A nested value nobody keeps (most of a body) is passed to its close at once.
            if self.depth > 1 && self.keeping.is_none() {
                i += self.skip_nested(&bytes[i..]);
                continue;
            }
            // Runs of bytes that change nothing but the kept buffer are passed in one go; the
            // byte that ends the run goes through `step`.
            i += self.pass(&bytes[i..]);
            let Some(&b) = bytes.get(i) else { break };
            i += 1;
            if self.step(b) {
                if self.done() {
                    return (true, i);
                }
                if to_model && self.model.is_some() {
                    return (false, i);
                }
            }
        }
        (false, i)
    }

    /// The kept string, decoded (escapes resolved); `None` if it overflowed or is not valid.
    /// An unescaped string is the buffer itself (the next kept byte takes a spare one);
    /// otherwise the buffer is emptied, its capacity kept for the next string.
    fn take_text(&mut self) -> Option<ModelText> {
        if !self.overflow && !has_escape(&self.buf) {
            return match ModelText::checked(std::mem::take(&mut self.buf)) {
                Ok(text) => Some(text),
                Err(buf) => {
                    self.buf = buf;
                    self.buf.clear();
                    None
                }
            };
        }
        let s = self.kept_str().map(std::borrow::Cow::into_owned);
        self.buf.clear();
        s.map(ModelText::from)
    }

    /// The kept string as [`Self::take_text`] gives it, borrowed when it has no escapes.
    fn kept_str(&mut self) -> Option<std::borrow::Cow<'_, str>> {
        if std::mem::take(&mut self.overflow) {
            return None;
        }
        let raw = &self.buf[..];
        if !has_escape(raw) {
            return std::str::from_utf8(raw)
                .ok()
                .map(std::borrow::Cow::Borrowed);
        }
        let mut quoted = Vec::with_capacity(raw.len() + 2);
        quoted.push(b'"');
        quoted.extend_from_slice(raw);
        quoted.push(b'"');
        serde_json::from_slice::<String>(&quoted)
            .ok()
            .map(std::borrow::Cow::Owned)
    }

    /// A kept field's value is complete.
    fn field_ended(&mut self, field: Field) {
        self.keeping = None;
        self.kept[field as usize] = Some(if std::mem::take(&mut self.overflow) {
            Kept::TooLong
        } else {
            Kept::Raw(self.buf.clone())
        });
        self.buf.clear();
        self.seen |= field.bit();
    }

    /// Top-level parsing is over (the object closed or is not one).
    fn end(&mut self, model: Found) -> bool {
        self.ended = true;
        self.model.get_or_insert(model);
        true
    }

    /// One byte; `true` when an answer came in.
    fn step(&mut self, b: u8) -> bool {
        if self.in_string {
            if self.in_key {
                self.keep(b, MAX_KEY);
            } else {
                self.keep_value(b);
            }
            if self.escape {
                self.escape = false;
            } else if b == b'\\' {
                self.escape = true;
            } else if b == b'"' {
                self.in_string = false;
                return self.string_ended();
            }
            return false;
        }
        if self.in_scalar {
            match b {
                b',' | b'}' | b' ' | b'\t' | b'\n' | b'\r' => {
                    self.in_scalar = false;
                    if let Some(Target::Field(f)) = self.keeping {
                        self.field_ended(f);
                        // The delimiter is still read below.
                        let _ = self.step(b);
                        return true;
                    }
                }
                _ => {
                    self.keep_value(b);
                    return false;
                }
            }
        }
        if self.depth > 1 {
            self.keep_value(b);
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 1 {
                        self.expect = Expect::Comma;
                        if let Some(Target::Field(f)) = self.keeping {
                            self.field_ended(f);
                            return true;
                        }
                    }
                }
                _ => {}
            }
            return false;
        }
        if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            return false;
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
            (Expect::Key | Expect::Comma, b'}') => return self.end(Found::NoModel),
            (Expect::Colon, b':') => self.expect = Expect::Value,
            (Expect::Comma, b',') => self.expect = Expect::Key,
            (Expect::Value, _) if self.target == Target::Model && self.model.is_none() => {
                if b != b'"' {
                    // Not judged; the other members are still read.
                    self.model = Some(Found::NotJudged);
                    self.value_start(b);
                    return true;
                }
                self.in_string = true;
                self.keeping = Some(Target::Model);
                self.expect = Expect::Comma;
            }
            (Expect::Value, _) => {
                if let Target::Field(f) = self.target {
                    self.keeping = Some(Target::Field(f));
                    self.keep_value(b);
                }
                return self.value_start(b);
            }
            _ => return self.end(Found::NotJudged),
        }
        false
    }

    /// The first byte of a depth-1 value that is skipped or kept raw.
    fn value_start(&mut self, b: u8) -> bool {
        self.expect = Expect::Comma;
        match b {
            b'"' => self.in_string = true,
            b'{' | b'[' => self.depth = 2,
            _ => self.in_scalar = true,
        }
        false
    }

    /// A string just closed at depth 1 (nested strings never reach here).
    fn string_ended(&mut self) -> bool {
        if self.depth > 1 {
            return false;
        }
        if std::mem::take(&mut self.in_key) {
            // The closing quote was kept too.
            self.buf.pop();
            let (wanted, seen) = (self.wanted, self.seen);
            let target = |k: &[u8]| match k {
                b"model" => Target::Model,
                k => Field::ALL
                    .into_iter()
                    .find(|f| {
                        f.name().as_bytes() == k && wanted & f.bit() != 0 && seen & f.bit() == 0
                    })
                    .map_or(Target::Other, Target::Field),
            };
            // A key without escapes is compared as it is (a key that is not UTF-8 names
            // nothing either way); one with escapes is decoded first.
            self.target = if has_escape(&self.buf) {
                self.kept_str()
                    .as_deref()
                    .map_or(Target::Other, |k| target(k.as_bytes()))
            } else if std::mem::take(&mut self.overflow) {
                Target::Other
            } else {
                target(&self.buf)
            };
            self.buf.clear();
            self.expect = Expect::Colon;
            return false;
        }
        match self.keeping {
            Some(Target::Model) => {
                self.keeping = None;
                self.buf.pop();
                self.model = Some(self.take_text().map_or(Found::NotJudged, Found::Model));
                true
            }
            Some(Target::Field(f)) => {
                self.field_ended(f);
                true
            }
            _ => false,
        }
    }
}

/// Whether a kept key or value has a backslash: a byte loop, as kept strings are short and a
/// `memchr` call (`<[u8]>::contains`) costs more than it saves on them.
fn has_escape(bytes: &[u8]) -> bool {
    for &b in bytes {
        if b == b'\\' {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests;

//! Deriving a request's routing key (SPEC.md section 1).
//!
//! One extractor serves every policy, so `manual`, `consistent_hashing` and the override can
//! never disagree about which conversation a request belongs to. Precedence follows the
//! ordered source list (`sources.rs`, `--routing-key-sources`); by default the body `rid`
//! (override only, lineage-stripped), then the first valid routing-key header (SMG's order),
//! then berth's additions (agent session headers, then body fields). Stripping computes the key
//! only; the caller forwards the request with its full rid.

use crate::Error;

mod sources;
mod text;

pub use sources::{BodyKeys, DEFAULT_KEY_SOURCES, Source, parse_sources, session_from_user_id};
pub use text::KeyText;

/// Longest routing key, in bytes.
pub const MAX_KEY_BYTES: usize = 128;

/// The header SMG reads by default.
pub const DEFAULT_ROUTING_KEY_HEADER: &str = "x-smg-routing-key";

/// Where a request's key came from (the `source` label of `smg_routing_key_source_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeySource {
    /// The body `rid`.
    Rid,
    /// A routing-key header (`--routing-key-headers`).
    Header,
    /// A `header:<name>` source (an agent's session header).
    SessionHeader,
    /// The body's `nvext.session_control.session_id`.
    NvextSessionId,
    /// The key remembered for the body's `previous_response_id` (a Responses chain).
    PreviousResponseId,
    /// The body's `prompt_cache_key`.
    PromptCacheKey,
    /// The body's `conversation`.
    Conversation,
    /// The session part of the body's `metadata.user_id`.
    MetadataUserId,
}

impl KeySource {
    /// The wire and metric name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rid => "rid",
            Self::Header => "header",
            Self::SessionHeader => "session_header",
            Self::NvextSessionId => "nvext_session_id",
            Self::PreviousResponseId => "previous_response_id",
            Self::PromptCacheKey => "prompt_cache_key",
            Self::Conversation => "conversation",
            Self::MetadataUserId => "metadata_user_id",
        }
    }
}

/// A derived routing key and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutingKey {
    /// The key (lineage-stripped where SPEC.md says so).
    pub key: KeyText,
    /// Its source.
    pub source: KeySource,
}

/// Read access to a request's headers, so the core needs no HTTP crate.
pub trait HeaderSource {
    /// The first value of the header named `lowercase_name`, as raw bytes.
    fn first_value(&self, lowercase_name: &str) -> Option<&[u8]>;
}

/// Headers as a list of `(name, value)` pairs: for tests, benches and non-HTTP callers.
#[derive(Debug, Clone, Copy)]
pub struct HeaderList<'a>(pub &'a [(&'a str, &'a [u8])]);

impl HeaderSource for HeaderList<'_> {
    fn first_value(&self, lowercase_name: &str) -> Option<&[u8]> {
        self.0
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(lowercase_name))
            .map(|(_, v)| *v)
    }
}

/// How keys are derived: validated once at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyConfig {
    override_on: bool,
    header_names: Vec<String>,
    sources: Vec<Source>,
    /// What the request path asks of `sources` per request, found once when they are set.
    kinds: SourceKinds,
}

/// Which kinds of source a list holds (read from it once, not searched per request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SourceKinds {
    /// A body source.
    body: bool,
    /// `nvext_session_id`.
    nvext_session_id: bool,
    /// `previous_response_id`.
    previous_response_id: bool,
}

impl SourceKinds {
    fn of(sources: &[Source]) -> Self {
        Self {
            body: sources.iter().any(Source::in_body),
            nvext_session_id: sources.contains(&Source::NvextSessionId),
            previous_response_id: sources.contains(&Source::PreviousResponseId),
        }
    }
}

impl KeyConfig {
    /// Validates the ordered header names (each must be a valid HTTP header name, i.e. an
    /// RFC 9110 token) and lowercases them for case-insensitive matching.
    pub fn try_new(override_on: bool, header_names: &[String]) -> Result<Self, Error> {
        let mut names = Vec::with_capacity(header_names.len());
        for name in header_names {
            if !is_token(name) {
                return Err(Error::config(
                    "--routing-key-headers",
                    format!("{name:?} is not a valid HTTP header name"),
                ));
            }
            let lower = name.to_ascii_lowercase();
            if !names.contains(&lower) {
                names.push(lower);
            }
        }
        let sources = vec![Source::Rid, Source::RoutingKeyHeaders];
        Ok(Self {
            override_on,
            header_names: names,
            kinds: SourceKinds::of(&sources),
            sources,
        })
    }

    /// The same headers and override with the ordered `--routing-key-sources` list.
    pub fn with_sources(mut self, sources: Vec<Source>) -> Self {
        self.kinds = SourceKinds::of(&sources);
        self.sources = sources;
        self
    }

    /// The sources, in precedence order.
    pub fn sources(&self) -> &[Source] {
        &self.sources
    }

    /// Whether `nvext_session_id` is one of the sources.
    pub fn has_nvext_session_id(&self) -> bool {
        self.kinds.nvext_session_id
    }

    /// Whether `previous_response_id` is one of the sources.
    pub fn has_previous_response_id(&self) -> bool {
        self.kinds.previous_response_id
    }

    /// Whether the body must be read to find this request's key: a body source comes before
    /// any header source that has a valid value. Zero body cost when every body source is off
    /// or a header earlier in the list already names the key.
    pub fn needs_body(&self, headers: &dyn HeaderSource) -> bool {
        if !self.kinds.body {
            return false;
        }
        for source in &self.sources {
            match source {
                Source::Rid => {}
                Source::RoutingKeyHeaders => {
                    if self
                        .header_names
                        .iter()
                        .any(|n| headers.first_value(n).is_some_and(is_valid_header_key))
                    {
                        return false;
                    }
                }
                Source::Header(n) => {
                    if headers.first_value(n).is_some_and(is_valid_header_key) {
                        return false;
                    }
                }
                _ => return true,
            }
        }
        false
    }

    /// Whether the routing-key override is on.
    pub fn override_on(&self) -> bool {
        self.override_on
    }

    /// The header names, lowercased, in precedence order.
    pub fn header_names(&self) -> &[String] {
        &self.header_names
    }

    /// Derives the key of one request from its body `rid` (if the caller found one) and its
    /// headers. `None` means the request has no key.
    pub fn derive(&self, rid: Option<&str>, headers: &dyn HeaderSource) -> Option<RoutingKey> {
        self.derive_with_body(rid, None, headers)
    }

    /// [`Self::derive`] with the body's key fields, when the caller read the body.
    pub fn derive_with_body(
        &self,
        rid: Option<&str>,
        body: Option<&BodyKeys>,
        headers: &dyn HeaderSource,
    ) -> Option<RoutingKey> {
        self.sources
            .iter()
            .find_map(|source| self.hit(source, rid, body, headers))
    }

    /// Whether the body fields seen so far settle the key of a request whose body is still
    /// arriving (the gateway's streaming scan): some source ranked above every unseen body
    /// source has a valid value, or every body source was seen. `seen`: whether the body has
    /// shown that source's member yet (or can show no more: its top-level object ended). Then
    /// no later byte of the body can change [`Self::derive_with_body`]'s answer.
    pub fn body_settled(
        &self,
        body: Option<&BodyKeys>,
        headers: &dyn HeaderSource,
        seen: &dyn Fn(&Source) -> bool,
    ) -> bool {
        for source in &self.sources {
            if source.in_body() && !seen(source) {
                return false;
            }
            if self.hit(source, None, body, headers).is_some() {
                return true;
            }
        }
        true
    }

    /// The key one source gives, if it has a valid one.
    fn hit(
        &self,
        source: &Source,
        rid: Option<&str>,
        body: Option<&BodyKeys>,
        headers: &dyn HeaderSource,
    ) -> Option<RoutingKey> {
        let found = |key: &str, source| {
            Some(RoutingKey {
                key: KeyText::from(key),
                source,
            })
        };
        fn body_field(v: &Option<String>) -> Option<&str> {
            v.as_deref().and_then(|v| valid_header_key(v.as_bytes()))
        }
        match source {
            Source::Rid => rid
                .filter(|_| self.override_on)
                .and_then(key_from_rid)
                .and_then(|k| found(k, KeySource::Rid)),
            Source::RoutingKeyHeaders => self.key_in_routing_key_headers(headers),
            Source::Header(n) => headers
                .first_value(n)
                .filter(|v| key_length_ok(v))
                .and_then(KeyText::from_utf8)
                .map(|key| RoutingKey {
                    key,
                    source: KeySource::SessionHeader,
                }),
            Source::NvextSessionId => body
                .and_then(|b| body_field(&b.nvext_session_id))
                .and_then(|k| found(k, KeySource::NvextSessionId)),
            Source::PreviousResponseId => body
                .and_then(|b| body_field(&b.previous_response_key))
                .and_then(|k| found(k, KeySource::PreviousResponseId)),
            Source::PromptCacheKey => body
                .and_then(|b| body_field(&b.prompt_cache_key))
                .and_then(|k| found(k, KeySource::PromptCacheKey)),
            Source::Conversation => body
                .and_then(|b| body_field(&b.conversation))
                .and_then(|k| found(k, KeySource::Conversation)),
            Source::MetadataUserId => body
                .and_then(|b| b.metadata_user_id.as_deref())
                .and_then(session_from_user_id)
                .and_then(|k| valid_header_key(k.as_bytes()))
                .and_then(|k| found(k, KeySource::MetadataUserId)),
        }
    }

    /// SMG's header source: the first valid `--routing-key-headers` value (lineage-stripped
    /// under the override).
    fn key_in_routing_key_headers(&self, headers: &dyn HeaderSource) -> Option<RoutingKey> {
        for name in &self.header_names {
            let Some(raw) = headers.first_value(name) else {
                continue;
            };
            if !key_length_ok(raw) {
                continue;
            }
            // (the bytes are checked as UTF-8 once, as the key is made: a lineage suffix is cut
            // just before an ASCII `_`, so the base of valid text is valid text)
            let key = if self.override_on {
                &raw[..lineage_base(raw)]
            } else {
                raw
            };
            let Some(key) = KeyText::from_utf8(key) else {
                continue;
            };
            return Some(RoutingKey {
                key,
                source: KeySource::Header,
            });
        }
        None
    }
}

/// The key a rid yields: lineage-stripped, or `None` when the result is over
/// [`MAX_KEY_BYTES`] (the caller then tries the headers) or the rid is empty.
pub fn key_from_rid(rid: &str) -> Option<&str> {
    let key = strip_lineage(rid);
    (!key.is_empty() && key.len() <= MAX_KEY_BYTES).then_some(key)
}

/// A header value usable as a key: non-empty, valid UTF-8, at most [`MAX_KEY_BYTES`] bytes.
/// Body fields are held to the same rule.
fn valid_header_key(raw: &[u8]) -> Option<&str> {
    if !key_length_ok(raw) {
        return None;
    }
    std::str::from_utf8(raw).ok()
}

/// Whether a header value has a key's length: non-empty, at most [`MAX_KEY_BYTES`] bytes.
fn key_length_ok(raw: &[u8]) -> bool {
    !raw.is_empty() && raw.len() <= MAX_KEY_BYTES
}

/// Whether [`valid_header_key`] takes `raw`, without making the `&str`: an ASCII value (the
/// usual key) is checked by words, not byte by byte as `from_utf8` checks a short one.
fn is_valid_header_key(raw: &[u8]) -> bool {
    !raw.is_empty()
        && raw.len() <= MAX_KEY_BYTES
        && (raw.is_ascii() || std::str::from_utf8(raw).is_ok())
}

/// `<base>[_t<digits>][_r<digits>] -> <base>`: removes one trailing retry suffix, then one
/// trailing turn suffix. If nothing would be left, the whole rid is the key.
pub fn strip_lineage(rid: &str) -> &str {
    // The cut is just before an ASCII '_' (or none), so it is a char boundary.
    rid.get(..lineage_base(rid.as_bytes())).unwrap_or(rid)
}

/// The length of [`strip_lineage`]'s result, on bytes.
fn lineage_base(rid: &[u8]) -> usize {
    let after_retry = strip_suffix(rid.len(), rid, b'r');
    let base = strip_suffix(after_retry, rid, b't');
    if base == 0 { rid.len() } else { base }
}

/// Removes `_<tag><digits>` (one or more ASCII digits) from the very end of `bytes[..len]`,
/// once: the length left.
fn strip_suffix(len: usize, bytes: &[u8], tag: u8) -> usize {
    let bytes = &bytes[..len];
    let digits = bytes
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if digits == 0 || bytes.len() < digits + 2 {
        return len;
    }
    let tag_at = bytes.len() - digits - 1;
    if bytes[tag_at] == tag && bytes[tag_at - 1] == b'_' {
        tag_at - 1
    } else {
        len
    }
}

/// RFC 9110 `token`: one or more tchar.
pub fn is_token(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(is_tchar)
}

/// RFC 9110 `tchar`: a byte of a token (a header name, a method).
pub const fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'!' | b'#'
                | b'$'
                | b'%'
                | b'&'
                | b'\''
                | b'*'
                | b'+'
                | b'-'
                | b'.'
                | b'^'
                | b'_'
                | b'`'
                | b'|'
                | b'~'
        )
}

#[cfg(test)]
mod tests;

//! Deriving a request's routing key (SPEC.md section 1).
//!
//! One extractor serves every policy, so `manual`, `consistent_hashing` and the override can
//! never disagree about which conversation a request belongs to. Precedence: the body `rid`
//! (override only, lineage-stripped), then the first valid routing-key header, then nothing.
//! Stripping computes the key only; the caller forwards the request with its full rid.

use crate::Error;

/// Longest routing key, in bytes.
pub const MAX_KEY_BYTES: usize = 128;

/// The header SMG reads by default.
pub const DEFAULT_ROUTING_KEY_HEADER: &str = "x-smg-routing-key";

/// Where a request's key came from (the `source` label of `smg_routing_key_source_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeySource {
    /// The body `rid`.
    Rid,
    /// A routing-key header.
    Header,
}

impl KeySource {
    /// The wire and metric name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rid => "rid",
            Self::Header => "header",
        }
    }
}

/// A derived routing key and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutingKey {
    /// The key (lineage-stripped where SPEC.md says so).
    pub key: String,
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
        Ok(Self {
            override_on,
            header_names: names,
        })
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
        if let Some(key) = rid.filter(|_| self.override_on).and_then(key_from_rid) {
            return Some(RoutingKey {
                key: key.to_owned(),
                source: KeySource::Rid,
            });
        }
        for name in &self.header_names {
            let Some(raw) = headers.first_value(name) else {
                continue;
            };
            let Some(value) = valid_header_key(raw) else {
                continue;
            };
            let key = if self.override_on {
                strip_lineage(value)
            } else {
                value
            };
            return Some(RoutingKey {
                key: key.to_owned(),
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
fn valid_header_key(raw: &[u8]) -> Option<&str> {
    if raw.is_empty() || raw.len() > MAX_KEY_BYTES {
        return None;
    }
    std::str::from_utf8(raw).ok()
}

/// `<base>[_t<digits>][_r<digits>] -> <base>`: removes one trailing retry suffix, then one
/// trailing turn suffix. If nothing would be left, the whole rid is the key.
pub fn strip_lineage(rid: &str) -> &str {
    let after_retry = strip_suffix(rid, b'r');
    let base = strip_suffix(after_retry, b't');
    if base.is_empty() { rid } else { base }
}

/// Removes `_<tag><digits>` (one or more ASCII digits) from the very end, once.
fn strip_suffix(s: &str, tag: u8) -> &str {
    let bytes = s.as_bytes();
    let digits = bytes
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if digits == 0 || bytes.len() < digits + 2 {
        return s;
    }
    let tag_at = bytes.len() - digits - 1;
    if bytes[tag_at] == tag && bytes[tag_at - 1] == b'_' {
        // The cut is just before an ASCII '_', so it is a char boundary.
        &s[..tag_at - 1]
    } else {
        s
    }
}

/// RFC 9110 `token`: one or more tchar.
pub fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name.bytes().all(|b| {
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
        })
}

#[cfg(test)]
mod tests;

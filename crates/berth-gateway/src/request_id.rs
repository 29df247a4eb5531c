//! `x-request-id` on every response, as SMG sends it.
//!
//! The id is the client's own when the request carries one of the headers SMG reads by default
//! (`x-request-id`, `x-correlation-id`, `x-trace-id`, `request-id`; the first present wins),
//! else a fresh one: SMG's prefix for the route (`chatcmpl-`, `cmpl-`, `gnt-`, `resp-`, `msg_`,
//! `req-` for everything else) and 24 random letters and digits. It is set where the response is
//! finished (`service::handle`), so worker responses, gateway errors and admin routes all carry
//! it; a worker's own `x-request-id` is replaced by it. A client's header reaches the worker
//! with the other end-to-end headers; a fresh id is not sent to the worker (nor is it by SMG).

use http::{HeaderName, HeaderValue, Response};

use crate::fields::{Fields, same_name};

use crate::rng::with_rng;

/// The response header.
pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Request headers whose value becomes the id, in order (SMG's `--request-id-headers` default).
/// (Names as text: a `const` array of `HeaderName`s is built and dropped at every use.)
const CLIENT_HEADERS: [&str; 4] = [
    "x-request-id",
    "x-correlation-id",
    "x-trace-id",
    "request-id",
];

/// Random characters after the prefix.
const RANDOM_LEN: usize = 24;

const ALPHANUMERIC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// The character of each byte value (`ALPHANUMERIC[b % 62]`), looked up instead of computed.
const CHAR_OF: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = ALPHANUMERIC[i % ALPHANUMERIC.len()];
        i += 1;
    }
    t
};

/// A request's id: the client's value (shared with its head), or a fresh one kept inline (no
/// allocation, no validation: its bytes are a prefix and letters and digits).
#[derive(Clone, Debug)]
pub(crate) enum RequestId {
    /// The client's own.
    Client(HeaderValue),
    /// Made here: `len` bytes of `bytes`.
    Fresh { bytes: [u8; FRESH_MAX], len: u8 },
}

/// The longest fresh id: the longest prefix and [`RANDOM_LEN`] characters.
const FRESH_MAX: usize = "chatcmpl-".len() + RANDOM_LEN;

impl RequestId {
    /// The id's bytes, as the header's value.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            Self::Client(v) => v.as_bytes(),
            Self::Fresh { bytes, len } => &bytes[..usize::from(*len)],
        }
    }

    /// The id as a header value (for a response the gateway made).
    pub(crate) fn to_value(&self) -> HeaderValue {
        match self {
            Self::Client(v) => v.clone(),
            Self::Fresh { .. } => HeaderValue::from_bytes(self.as_bytes())
                .unwrap_or(HeaderValue::from_static("req-0")),
        }
    }
}

impl PartialEq<&str> for RequestId {
    fn eq(&self, other: &&str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

/// The id of a request (whose header fields are `fields`): the client's, or a fresh one for
/// its path.
pub(crate) fn for_request(fields: &Fields, path: &[u8]) -> RequestId {
    with_prefix(fields, prefix(path))
}

/// [`for_request`] for a request whose path was matched already: `prefix` is [`prefix`]'s
/// for its path (the service matches the path once, for its route and this prefix:
/// `Endpoint::id_prefix`).
pub(crate) fn with_prefix(fields: &Fields, prefix: &'static str) -> RequestId {
    // One pass over the request's few headers rather than a lookup per candidate name. As
    // `HeaderMap::get` would: only a name's first value counts, and the earliest name in
    // `CLIENT_HEADERS` with a non-empty one wins.
    let mut seen = [false; 4];
    let mut best: Option<(usize, &[u8])> = None;
    for (name, value) in fields.iter() {
        // (the candidates are 10, 12 or 16 bytes long: other names are not compared)
        if !matches!(name.len(), 10 | 12 | 16) {
            continue;
        }
        let Some(rank) = CLIENT_HEADERS.iter().position(|n| same_name(name, n)) else {
            continue;
        };
        if std::mem::replace(&mut seen[rank], true) || value.is_empty() {
            continue;
        }
        if best.is_none_or(|(r, _)| rank < r) {
            best = Some((rank, value));
        }
    }
    // the client's value, shared with its head (httparse checked its bytes)
    best.and_then(|(_, v)| HeaderValue::from_maybe_shared(fields.shared(v)).ok())
        .map_or_else(|| fresh(prefix), RequestId::Client)
}

/// Sets the id on a finished response.
pub(crate) fn stamp<B>(resp: &mut Response<B>, id: &RequestId) {
    resp.headers_mut().insert(REQUEST_ID, id.to_value());
}

/// SMG's prefixes for the ids it makes, by route path (any other path: `req-`). The one table:
/// the proxy's endpoints take theirs from it at compile time (`Endpoint::id_prefix`).
const PREFIXES: [(&[u8], &str); 5] = [
    (b"/v1/chat/completions", "chatcmpl-"),
    (b"/v1/completions", "cmpl-"),
    (b"/generate", "gnt-"),
    (b"/v1/responses", "resp-"),
    (b"/v1/messages", "msg_"),
];

/// SMG's prefix for ids it makes on this route.
pub(crate) const fn prefix(path: &[u8]) -> &'static str {
    let mut i = 0;
    while i < PREFIXES.len() {
        let (p, prefix) = PREFIXES[i];
        if same_bytes(p, path) {
            return prefix;
        }
        i += 1;
    }
    "req-"
}

/// `a == b`, in a `const fn`.
const fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

fn fresh(prefix: &str) -> RequestId {
    let mut bytes = [0u8; FRESH_MAX];
    let p = prefix.len().min(FRESH_MAX - RANDOM_LEN);
    bytes[..p].copy_from_slice(&prefix.as_bytes()[..p]);
    with_rng(|rng| {
        // Eight characters from each 64-bit draw (8 bits each; 256 % 62 skews the alphabet a
        // little, which an identifier does not mind).
        for chunk in bytes[p..p + RANDOM_LEN].chunks_exact_mut(8) {
            let bits = rng.next_u64();
            for (c, b) in chunk.iter_mut().zip(bits.to_le_bytes()) {
                *c = CHAR_OF[usize::from(b)];
            }
        }
    });
    RequestId::Fresh {
        bytes,
        len: (p + RANDOM_LEN) as u8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderMap;

    #[test]
    fn a_client_id_is_kept_and_a_missing_one_is_made_with_smgs_prefix() {
        let mut h = HeaderMap::new();
        h.insert("x-trace-id", "trace-1".parse().unwrap());
        assert_eq!(
            for_request(&Fields::from_map(&h), b"/v1/chat/completions"),
            "trace-1"
        );
        h.insert("x-request-id", "mine".parse().unwrap());
        assert_eq!(
            for_request(&Fields::from_map(&h), b"/v1/chat/completions"),
            "mine"
        );
        // the order of the names decides, not the order of the headers; a name whose first
        // value is empty is passed over (its later values too, as `HeaderMap::get` sees it)
        let mut h = HeaderMap::new();
        h.append("request-id", "last-name".parse().unwrap());
        h.append("x-request-id", "".parse().unwrap());
        h.append("x-request-id", "second-value".parse().unwrap());
        h.append("x-correlation-id", "corr".parse().unwrap());
        assert_eq!(
            for_request(&Fields::from_map(&h), b"/v1/chat/completions"),
            "corr"
        );
        h.remove("x-correlation-id");
        assert_eq!(
            for_request(&Fields::from_map(&h), b"/v1/chat/completions"),
            "last-name"
        );

        for (path, prefix) in [
            ("/v1/chat/completions", "chatcmpl-"),
            ("/v1/completions", "cmpl-"),
            ("/generate", "gnt-"),
            ("/v1/responses", "resp-"),
            ("/v1/messages", "msg_"),
            ("/workers", "req-"),
            ("/v1/embeddings", "req-"),
            ("/v1/rerank", "req-"),
            ("/v1/classify", "req-"),
        ] {
            let id = for_request(&Fields::default(), path.as_bytes()).to_value();
            let id = id.to_str().unwrap();
            let rest = id.strip_prefix(prefix).unwrap();
            assert_eq!(rest.len(), RANDOM_LEN, "{id}");
            assert!(rest.bytes().all(|b| b.is_ascii_alphanumeric()), "{id}");
        }
        assert_ne!(
            for_request(&Fields::default(), b"/generate").as_bytes(),
            for_request(&Fields::default(), b"/generate").as_bytes()
        );
        // a header name of another length is not a candidate, one of the same length is
        // compared
        let mut h = HeaderMap::new();
        h.insert("x-request-i", "short".parse().unwrap());
        h.insert("x-request-idd", "long".parse().unwrap());
        h.insert("X-Trace-ID", "upper".parse().unwrap());
        assert_eq!(
            for_request(&Fields::from_map(&h), b"/v1/chat/completions"),
            "upper"
        );
    }
}

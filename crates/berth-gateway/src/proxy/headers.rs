//! Which headers cross the gateway.
//!
//! End-to-end headers pass both ways untouched (routing-key headers and `Authorization`
//! included); hop-by-hop headers (RFC 9110 section 7.6.1, plus any the `Connection` header
//! names) are dropped, and so is the `x-smg-routing-tokens` hint, which is for the gateway only.
//! `Host` is set by the client for the worker's authority.

use http::{HeaderMap, HeaderName, HeaderValue, header};

use crate::routing::HeaderSource;

/// The placement hint header, consumed by the gateway.
pub(crate) const ROUTING_TOKENS: &str = "x-smg-routing-tokens";

/// The header naming the worker that served a response.
pub(crate) const ROUTED_WORKER: HeaderName = HeaderName::from_static("x-smg-routed-worker-id");

/// Whether `name` is hop-by-hop (RFC 9110 section 7.6.1, `Keep-Alive` and `Proxy-Connection`
/// included). A match on the name's text: a `const` array of `HeaderName`s was built and
/// dropped at every use (per header of both messages).
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "upgrade"
    )
}

/// Whether a client request header goes on to the worker: not hop-by-hop, not `Host` or
/// `Transfer-Encoding` (the upstream writer sets both), not the routing hint. Headers the
/// client's `Connection` names are dropped by the upstream writer (`upstream/h1/head.rs`).
pub(crate) fn forwarded(name: &HeaderName) -> bool {
    !(hop_by_hop(name)
        || name == header::HOST
        || name == header::TRANSFER_ENCODING
        || name.as_str() == ROUTING_TOKENS)
}

/// Drops hop-by-hop headers from a worker's response, in place.
pub(crate) fn strip_response_headers(headers: &mut HeaderMap) {
    // One pass over the response's few names finds the hop-by-hop ones present; only those
    // are removed (a `remove` of each of the nine names hashed every name, ~2% of a proxied
    // request's instructions, for responses that carry one or none of them).
    let mut present: [Option<HeaderName>; 9] = Default::default();
    let mut n = 0;
    for name in headers.keys() {
        if hop_by_hop(name) || name == header::TRANSFER_ENCODING {
            // each name comes once from `keys`, and there are nine such names
            if let Some(slot) = present.get_mut(n) {
                *slot = Some(name.clone());
                n += 1;
            }
        }
    }
    if n == 0 {
        return;
    }
    for name in connection_listed(headers) {
        headers.remove(name);
    }
    for name in present.into_iter().flatten() {
        headers.remove(name);
    }
}

fn connection_listed(headers: &HeaderMap) -> Vec<HeaderName> {
    let mut names = Vec::new();
    for value in headers.get_all(header::CONNECTION) {
        // the common values name no header: nothing to parse or allocate
        let v = value.as_bytes();
        if v.eq_ignore_ascii_case(b"keep-alive") || v.eq_ignore_ascii_case(b"close") {
            continue;
        }
        for token in value.to_str().unwrap_or("").split(',') {
            if let Ok(name) = HeaderName::from_bytes(token.trim().as_bytes()) {
                names.push(name);
            }
        }
    }
    names
}

/// The routing core's view of a request's headers.
pub(crate) struct HeaderMapSource<'a>(pub(crate) &'a HeaderMap);

impl HeaderSource for HeaderMapSource<'_> {
    fn first_value(&self, lowercase_name: &str) -> Option<&[u8]> {
        first(self.0, lowercase_name).map(|v| v.as_bytes())
    }
}

/// The first value of the header `lowercase_name`, as `HeaderMap::get` gives it, found by
/// comparing the request's few names: `get` with a `&str` validates, lowercases and hashes the
/// name first (about 400 instructions a lookup, against some 10 per name compared here; a
/// request has at most the head parser's limit of names).
pub(crate) fn first<'h>(headers: &'h HeaderMap, lowercase_name: &str) -> Option<&'h HeaderValue> {
    // `iter` yields a name's values in order, the first one first
    headers
        .iter()
        .find(|(name, _)| name.as_str() == lowercase_name)
        .map(|(_, value)| value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_and_hints_are_dropped_end_to_end_kept() {
        for name in [
            "connection",
            "keep-alive",
            "proxy-connection",
            "te",
            "trailer",
            "upgrade",
            "host",
            "transfer-encoding",
            "x-smg-routing-tokens",
            "proxy-authenticate",
            "proxy-authorization",
        ] {
            assert!(!forwarded(&HeaderName::from_static(name)), "{name}");
        }
        for name in [
            "x-smg-routing-key",
            "authorization",
            "content-type",
            "content-length",
        ] {
            assert!(forwarded(&HeaderName::from_static(name)), "{name}");
        }
    }

    #[test]
    fn first_is_get_for_lowercase_names() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("content-type", "application/json"),
            ("x-smg-routing-key", "a"),
            ("x-other", "1"),
            ("x-smg-routing-key", "b"),
        ] {
            h.append(HeaderName::from_static(k), v.parse().unwrap());
        }
        for name in [
            "x-smg-routing-key",
            "content-type",
            "x-other",
            "x-missing",
            "x-smg",
        ] {
            assert_eq!(first(&h, name), h.get(name), "{name}");
        }
        assert_eq!(first(&h, "x-smg-routing-key").unwrap(), "a");
        assert_eq!(HeaderMapSource(&h).first_value("x-other"), Some(&b"1"[..]));
    }

    #[test]
    fn a_response_loses_its_hop_by_hop_headers_and_those_connection_names() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("content-type", "application/json"),
            ("connection", "x-private, upgrade"),
            ("x-private", "1"),
            ("keep-alive", "timeout=5"),
            ("proxy-connection", "keep-alive"),
            ("proxy-authenticate", "Basic"),
            ("te", "trailers"),
            ("trailer", "x-a"),
            ("trailer", "x-b"),
            ("upgrade", "h2c"),
            ("transfer-encoding", "chunked"),
            ("x-kept", "2"),
        ] {
            h.append(HeaderName::from_static(k), v.parse().unwrap());
        }
        strip_response_headers(&mut h);
        let mut left: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
        left.sort_unstable();
        assert_eq!(left, ["content-type", "x-kept"]);

        // nothing hop-by-hop: untouched
        let mut h = HeaderMap::new();
        h.append("content-type", "text/plain".parse().unwrap());
        h.append("x-a", "1".parse().unwrap());
        h.append("x-a", "2".parse().unwrap());
        let before = h.clone();
        strip_response_headers(&mut h);
        assert_eq!(h, before);
    }
}

//! Which headers cross the gateway.
//!
//! End-to-end headers pass both ways untouched (routing-key headers and `Authorization`
//! included); hop-by-hop headers (RFC 9110 section 7.6.1, plus any the `Connection` header
//! names) are dropped, and so is the `x-smg-routing-tokens` hint, which is for the gateway only.
//! `Host` is set by the client for the worker's authority.

use http::{HeaderMap, HeaderName, HeaderValue, header};

use crate::routing::HeaderSource;
use crate::upstream::h1::{Fields, same_name};

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

/// Drops hop-by-hop fields (and those the `Connection` field names) from a worker's response
/// head, and its `Transfer-Encoding` (the client side frames the body).
pub(crate) fn strip_response_fields(fields: &mut Fields) {
    // One pass over the response's few names finds whether any is to go; most have none.
    let mut any = false;
    let mut listing = false;
    for (name, value) in fields.iter() {
        if hop_by_hop_raw(name) || same_name(name, "transfer-encoding") {
            any = true;
            // the common values name no header: nothing to collect
            listing |= same_name(name, "connection")
                && !(value.eq_ignore_ascii_case(b"keep-alive")
                    || value.eq_ignore_ascii_case(b"close"));
        }
    }
    if !any {
        return;
    }
    let listed: Vec<Vec<u8>> = if listing {
        fields
            .iter()
            .filter(|(name, _)| same_name(name, "connection"))
            .flat_map(|(_, value)| value.split(|b| *b == b','))
            .map(|token| token.trim_ascii().to_ascii_lowercase())
            .filter(|token| !token.is_empty())
            .collect()
    } else {
        Vec::new()
    };
    fields.retain(|name, _| {
        !(hop_by_hop_raw(name)
            || same_name(name, "transfer-encoding")
            || listed.iter().any(|l| name.eq_ignore_ascii_case(l)))
    });
}

/// [`hop_by_hop`] for a name as sent (any case).
fn hop_by_hop_raw(name: &[u8]) -> bool {
    const NAMES: [&str; 8] = [
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "upgrade",
    ];
    NAMES.iter().any(|n| same_name(name, n))
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
        let mut h = Fields::from_pairs(&[
            ("content-type", "application/json"),
            ("Connection", "x-private, upgrade"),
            ("X-Private", "1"),
            ("keep-alive", "timeout=5"),
            ("proxy-connection", "keep-alive"),
            ("proxy-authenticate", "Basic"),
            ("te", "trailers"),
            ("trailer", "x-a"),
            ("trailer", "x-b"),
            ("Upgrade", "h2c"),
            ("transfer-encoding", "chunked"),
            ("x-kept", "2"),
        ]);
        strip_response_fields(&mut h);
        let mut left: Vec<&[u8]> = h.iter().map(|(name, _)| name).collect();
        left.sort_unstable();
        assert_eq!(left, [&b"content-type"[..], b"x-kept"]);

        // nothing hop-by-hop: untouched
        let pairs = [("content-type", "text/plain"), ("x-a", "1"), ("x-a", "2")];
        let mut h = Fields::from_pairs(&pairs);
        let before = h.to_map();
        strip_response_fields(&mut h);
        assert_eq!(h.to_map(), before);
        assert_eq!(h.len(), 3);
    }
}

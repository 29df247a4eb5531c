//! Which headers cross the gateway.
//!
//! End-to-end headers pass both ways untouched (routing-key headers and `Authorization`
//! included); hop-by-hop headers (RFC 9110 section 7.6.1, plus any the `Connection` header
//! names) are dropped, and so is the `x-smg-routing-tokens` hint, which is for the gateway only.
//! `Host` is set by the client for the worker's authority.

use http::HeaderName;

use crate::fields::{Fields, same_name};
use crate::routing::HeaderSource;

/// The placement hint header, consumed by the gateway.
pub(crate) const ROUTING_TOKENS: &str = "x-smg-routing-tokens";

/// The header naming the worker that served a response.
pub(crate) const ROUTED_WORKER: HeaderName = HeaderName::from_static(ROUTED_WORKER_NAME);
pub(crate) const ROUTED_WORKER_NAME: &str = "x-smg-routed-worker-id";

/// Whether a client request header goes on to the worker: not hop-by-hop, not `Host` or
/// `Transfer-Encoding` (the upstream writer sets both), not the routing hint. Headers the
/// client's `Connection` names are dropped by the upstream writer (`upstream/h1/head.rs`).
/// Names as sent (any case).
#[inline]
pub(crate) fn forwarded(name: &[u8]) -> bool {
    // by length first: most names are none of these (`host` 4, `x-smg-routing-tokens` 20, the
    // hop-by-hop ones 2, 7, 10, 16, 18, 19, `transfer-encoding` 17)
    if !matches!(name.len(), 2 | 4 | 7 | 10 | 16..=20) {
        return true;
    }
    !(hop_by_hop(name)
        || same_name(name, "host")
        || same_name(name, "transfer-encoding")
        || same_name(name, ROUTING_TOKENS))
}

/// Drops hop-by-hop fields (and those the `Connection` field names) from a worker's response
/// head, and its `Transfer-Encoding` (the client side frames the body). The client side's
/// head writer drops them as it writes (`server/h1/head.rs`, one pass with its own checks);
/// this is its path for a `Connection` field that names other fields ([`names_fields`]).
pub(crate) fn strip_response_fields(fields: &mut Fields) {
    // One pass over the response's few names finds which are to go; most responses have none
    // or one (`Connection: keep-alive`), removed at once by position.
    let mut drop = [0usize; 4];
    let mut n = 0;
    let mut listing = false;
    for (i, (name, value)) in fields.iter().enumerate() {
        if hop_by_hop(name) || same_name(name, "transfer-encoding") {
            if let Some(slot) = drop.get_mut(n) {
                *slot = i;
            }
            n += 1;
            // the common values name no header: nothing to collect
            listing |= same_name(name, "connection") && names_fields(value);
        }
    }
    if n == 0 {
        return;
    }
    if !listing && n <= drop.len() {
        // from the last, so the positions before it stay
        for &i in drop[..n].iter().rev() {
            fields.remove(i);
        }
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
        !(hop_by_hop(name)
            || same_name(name, "transfer-encoding")
            || listed.iter().any(|l| name.eq_ignore_ascii_case(l)))
    });
}

/// Whether a `Connection` field's `value` may name other fields to drop (anything but the
/// common `keep-alive` or `close`).
pub(crate) fn names_fields(value: &[u8]) -> bool {
    !(same_name(value, "keep-alive") || same_name(value, "close"))
}

/// Whether `name` (as sent, any case) is hop-by-hop (RFC 9110 section 7.6.1, `Keep-Alive` and
/// `Proxy-Connection` included).
pub(crate) fn hop_by_hop(name: &[u8]) -> bool {
    // by length first: a name of another length is passed over at once
    match name.len() {
        2 => same_name(name, "te"),
        7 => same_name(name, "trailer") || same_name(name, "upgrade"),
        10 => same_name(name, "connection") || same_name(name, "keep-alive"),
        16 => same_name(name, "proxy-connection"),
        18 => same_name(name, "proxy-authenticate"),
        19 => same_name(name, "proxy-authorization"),
        _ => false,
    }
}

/// The routing core reads a request's headers from its fields: the first value of a name,
/// found by comparing the request's few names (no map is built or hashed).
impl HeaderSource for Fields {
    fn first_value(&self, lowercase_name: &str) -> Option<&[u8]> {
        self.first(lowercase_name)
    }
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
            assert!(!forwarded(name.as_bytes()), "{name}");
            assert!(!forwarded(name.to_ascii_uppercase().as_bytes()), "{name}");
        }
        for name in [
            "x-smg-routing-key",
            "authorization",
            "content-type",
            "content-length",
        ] {
            assert!(forwarded(name.as_bytes()), "{name}");
        }
    }

    #[test]
    fn first_is_get_for_lowercase_names() {
        let mut h = http::HeaderMap::new();
        for (k, v) in [
            ("content-type", "application/json"),
            ("x-smg-routing-key", "a"),
            ("x-other", "1"),
            ("x-smg-routing-key", "b"),
        ] {
            h.append(HeaderName::from_static(k), v.parse().unwrap());
        }
        let f = Fields::from_map(&h);
        for name in [
            "x-smg-routing-key",
            "content-type",
            "x-other",
            "x-missing",
            "x-smg",
        ] {
            assert_eq!(
                f.first(name),
                h.get(name).map(http::HeaderValue::as_bytes),
                "{name}"
            );
        }
        assert_eq!(f.first("x-smg-routing-key").unwrap(), b"a");
        assert_eq!(f.first_value("x-other"), Some(&b"1"[..]));
        // names as sent, any case
        let f = Fields::from_pairs(&[("X-SMG-Routing-Key", "k")]);
        assert_eq!(f.first_value("x-smg-routing-key"), Some(&b"k"[..]));
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

        // the common case, one or a few removed by position: the rest keep their order
        let mut h = Fields::from_pairs(&[
            ("server", "nginx"),
            ("Connection", "keep-alive"),
            ("content-type", "application/json"),
            ("Transfer-Encoding", "chunked"),
            ("x-a", "1"),
            ("keep-alive", "timeout=5"),
        ]);
        strip_response_fields(&mut h);
        let left: Vec<&[u8]> = h.iter().map(|(name, _)| name).collect();
        assert_eq!(left, [&b"server"[..], b"content-type", b"x-a"]);
        // more than the positions kept: the general pass
        let pairs: Vec<(&str, &str)> = (0..6).map(|_| ("te", "trailers")).collect();
        let mut h = Fields::from_pairs(&[pairs.as_slice(), &[("x-b", "2")]].concat());
        strip_response_fields(&mut h);
        assert_eq!(
            h.iter().map(|(name, _)| name).collect::<Vec<_>>(),
            [&b"x-b"[..]]
        );

        // nothing hop-by-hop: untouched
        let pairs = [("content-type", "text/plain"), ("x-a", "1"), ("x-a", "2")];
        let mut h = Fields::from_pairs(&pairs);
        let before = h.to_map();
        strip_response_fields(&mut h);
        assert_eq!(h.to_map(), before);
        assert_eq!(h.len(), 3);
    }
}

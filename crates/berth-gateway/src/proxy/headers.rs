//! Which headers cross the gateway.
//!
//! End-to-end headers pass both ways untouched (routing-key headers and `Authorization`
//! included); hop-by-hop headers (RFC 9110 section 7.6.1, plus any the `Connection` header
//! names) are dropped, and so is the `x-smg-routing-tokens` hint, which is for the gateway only.
//! `Host` is set by the client for the worker's authority.

use http::{HeaderMap, HeaderName, header};

use crate::routing::HeaderSource;

/// The placement hint header, consumed by the gateway.
pub(crate) const ROUTING_TOKENS: &str = "x-smg-routing-tokens";

/// The header naming the worker that served a response.
pub(crate) const ROUTED_WORKER: HeaderName = HeaderName::from_static("x-smg-routed-worker-id");

const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
];

/// The headers to send to a worker for this client request.
pub(crate) fn forward_request_headers(from: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(from.len());
    let listed = connection_listed(from);
    for (name, value) in from {
        if HOP_BY_HOP.contains(name)
            || name == header::HOST
            || name == header::TRANSFER_ENCODING
            || name.as_str() == ROUTING_TOKENS
            || listed.iter().any(|l| l == name)
        {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

/// Drops hop-by-hop headers from a worker's response, in place.
pub(crate) fn strip_response_headers(headers: &mut HeaderMap) {
    for name in connection_listed(headers) {
        headers.remove(name);
    }
    for name in &HOP_BY_HOP {
        headers.remove(name);
    }
    headers.remove(header::TRANSFER_ENCODING);
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
        self.0.get(lowercase_name).map(|v| v.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_and_hints_are_dropped_end_to_end_kept() {
        let mut h = HeaderMap::new();
        h.insert("connection", "keep-alive, x-private".parse().unwrap());
        h.insert("x-private", "1".parse().unwrap());
        h.insert("keep-alive", "timeout=5".parse().unwrap());
        h.insert("host", "gw".parse().unwrap());
        h.insert("x-smg-routing-tokens", "1,2".parse().unwrap());
        h.insert("x-smg-routing-key", "k".parse().unwrap());
        h.insert("authorization", "Bearer t".parse().unwrap());
        let out = forward_request_headers(&h);
        let names: Vec<_> = out.keys().map(|k| k.as_str()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(out.contains_key("x-smg-routing-key"));
        assert!(out.contains_key("authorization"));
    }
}

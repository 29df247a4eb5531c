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

/// The id of a request (whose header fields are `fields`): the client's, or a fresh one for
/// its path.
pub(crate) fn for_request(fields: &Fields, path: &str) -> HeaderValue {
    // One pass over the request's few headers rather than a lookup per candidate name. As
    // `HeaderMap::get` would: only a name's first value counts, and the earliest name in
    // `CLIENT_HEADERS` with a non-empty one wins.
    let mut seen = [false; 4];
    let mut best: Option<(usize, &[u8])> = None;
    for (name, value) in fields.iter() {
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
        .unwrap_or_else(|| fresh(prefix(path)))
}

/// Sets the id on a finished response.
pub(crate) fn stamp<B>(resp: &mut Response<B>, id: HeaderValue) {
    resp.headers_mut().insert(REQUEST_ID, id);
}

/// SMG's prefix for ids it makes on this route.
fn prefix(path: &str) -> &'static str {
    match path {
        "/v1/chat/completions" => "chatcmpl-",
        "/v1/completions" => "cmpl-",
        "/generate" => "gnt-",
        "/v1/responses" => "resp-",
        "/v1/messages" => "msg_",
        _ => "req-",
    }
}

fn fresh(prefix: &str) -> HeaderValue {
    let mut id = Vec::with_capacity(prefix.len() + RANDOM_LEN);
    id.extend_from_slice(prefix.as_bytes());
    with_rng(|rng| {
        // Eight characters from each 64-bit draw (8 bits each; 256 % 62 skews the alphabet a
        // little, which an identifier does not mind).
        for _ in 0..RANDOM_LEN / 8 {
            let bits = rng.next_u64();
            id.extend(
                (0..8).map(|i| {
                    ALPHANUMERIC[((bits >> (8 * i)) & 0xff) as usize % ALPHANUMERIC.len()]
                }),
            );
        }
    });
    HeaderValue::from_maybe_shared(bytes::Bytes::from(id))
        .unwrap_or(HeaderValue::from_static("req-0"))
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
            for_request(&Fields::from_map(&h), "/v1/chat/completions"),
            "trace-1"
        );
        h.insert("x-request-id", "mine".parse().unwrap());
        assert_eq!(
            for_request(&Fields::from_map(&h), "/v1/chat/completions"),
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
            for_request(&Fields::from_map(&h), "/v1/chat/completions"),
            "corr"
        );
        h.remove("x-correlation-id");
        assert_eq!(
            for_request(&Fields::from_map(&h), "/v1/chat/completions"),
            "last-name"
        );

        for (path, prefix) in [
            ("/v1/chat/completions", "chatcmpl-"),
            ("/v1/completions", "cmpl-"),
            ("/generate", "gnt-"),
            ("/v1/responses", "resp-"),
            ("/v1/messages", "msg_"),
            ("/workers", "req-"),
        ] {
            let id = for_request(&Fields::default(), path);
            let id = id.to_str().unwrap();
            let rest = id.strip_prefix(prefix).unwrap();
            assert_eq!(rest.len(), RANDOM_LEN, "{id}");
            assert!(rest.bytes().all(|b| b.is_ascii_alphanumeric()), "{id}");
        }
        assert_ne!(
            for_request(&Fields::default(), "/generate"),
            for_request(&Fields::default(), "/generate")
        );
    }
}

//! The proxied routes.

use crate::request_id;

/// A route the gateway forwards to a worker (all `POST`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Endpoint {
    ChatCompletions,
    Completions,
    Messages,
    Generate,
    Embeddings,
    Classify,
    Rerank,
    Responses,
}

impl Endpoint {
    /// Every endpoint (the route-table test checks them against docs/gateway.md).
    pub(crate) const ALL: [Self; 8] = [
        Self::ChatCompletions,
        Self::Completions,
        Self::Messages,
        Self::Generate,
        Self::Embeddings,
        Self::Classify,
        Self::Rerank,
        Self::Responses,
    ];

    /// The endpoint served at `path` (a target's path, as bytes), if any.
    pub(crate) fn from_path(path: &[u8]) -> Option<Self> {
        Some(match path {
            b"/v1/chat/completions" => Self::ChatCompletions,
            b"/v1/completions" => Self::Completions,
            b"/v1/messages" => Self::Messages,
            b"/generate" => Self::Generate,
            b"/v1/embeddings" => Self::Embeddings,
            b"/v1/classify" => Self::Classify,
            b"/v1/rerank" => Self::Rerank,
            b"/v1/responses" => Self::Responses,
            _ => return None,
        })
    }

    /// The route as a metric label.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::ChatCompletions => "/v1/chat/completions",
            Self::Completions => "/v1/completions",
            Self::Messages => "/v1/messages",
            Self::Generate => "/generate",
            Self::Embeddings => "/v1/embeddings",
            Self::Classify => "/v1/classify",
            Self::Rerank => "/v1/rerank",
            Self::Responses => "/v1/responses",
        }
    }

    /// SMG's prefix for the `x-request-id`s it makes on this route: `request_id::prefix` of
    /// its path, looked up once at compile time ([`ID_PREFIXES`]).
    pub(crate) fn id_prefix(self) -> &'static str {
        ID_PREFIXES[self as usize]
    }

    /// Whether a body `rid` is honoured here (the Responses API has none: header keys only).
    pub(crate) fn reads_rid(self) -> bool {
        self != Self::Responses
    }
}

/// Each endpoint's `x-request-id` prefix, by its index: `request_id`'s table read at compile
/// time, so the path is not matched again per request.
const ID_PREFIXES: [&str; Endpoint::ALL.len()] = {
    let mut prefixes = [""; Endpoint::ALL.len()];
    let mut i = 0;
    while i < Endpoint::ALL.len() {
        let e = Endpoint::ALL[i];
        prefixes[e as usize] = request_id::prefix(e.as_str().as_bytes());
        i += 1;
    }
    prefixes
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoints_id_prefix_is_the_one_of_its_path() {
        for e in Endpoint::ALL {
            assert_eq!(Endpoint::from_path(e.as_str().as_bytes()), Some(e));
            assert_eq!(
                e.id_prefix(),
                crate::request_id::prefix(e.as_str().as_bytes()),
                "{e:?}"
            );
        }
        // any other path: the service's default
        assert_eq!(crate::request_id::prefix(b"/workers"), "req-");
    }
}

//! The one error type of this crate.

use crate::policy::RouterPolicy;

/// Everything that can go wrong when building the client side of the contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The router policy places requests by key and the caller has none: sending the request
    /// would make the gateway answer `400 missing_routing_key` (or, worse, an older router
    /// would hash some constant header and pin all traffic to one worker).
    #[error(
        "router policy `{policy}` places requests by routing key, but no routing key is set: \
         mint one per sample or session (RoutingKey::mint) before generating"
    )]
    MissingRoutingKey {
        /// The policy that needs the key.
        policy: RouterPolicy,
    },
    /// A policy name the routing core does not know (or another refusal of the core's).
    #[error(transparent)]
    Routing(#[from] berth_routing::Error),
    /// A request id base that cannot carry lineage.
    #[error("invalid request id base `{base}`: {reason}")]
    InvalidRequestId {
        /// The rejected base.
        base: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A routing key that a gateway would skip (empty, over 128 bytes, or not a header value).
    #[error("invalid routing key `{key}`: {reason}")]
    InvalidRoutingKey {
        /// The rejected key.
        key: String,
        /// Why it was rejected.
        reason: &'static str,
    },
}

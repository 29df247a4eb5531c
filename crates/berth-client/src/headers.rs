//! The headers a request needs for the router's policy.

use crate::error::ClientError;
use crate::key::RoutingKey;
use crate::policy::{RouterPolicy, policy_uses_routing_key};

/// The header a key-based router reads the routing key from (SMG's spelling; routers match
/// header names case-insensitively).
pub const ROUTING_KEY_HEADER: &str = "X-SMG-Routing-Key";

/// Headers to attach to one request: empty when the policy does not use keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoutingHeaders(Vec<(&'static str, String)>);

impl RoutingHeaders {
    /// The headers as (name, value) pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.0.iter().map(|(n, v)| (*n, v.as_str()))
    }

    /// The value of `name` (case-insensitive), if present.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// Whether no header is needed.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The routing headers for one request: `X-SMG-Routing-Key: <key>` when `policy` uses keys,
/// nothing otherwise (a key given to a policy that ignores it is not sent).
///
/// # Errors
///
/// [`ClientError::MissingRoutingKey`] when the policy uses keys and `key` is `None`: the request
/// would be refused by the gateway, so it is refused here first, naming the policy.
///
/// ```
/// use berth_client::{RouterPolicy, RoutingKey, routing_headers};
/// let key = RoutingKey::mint();
/// assert!(routing_headers(RouterPolicy::CacheAware, Some(&key))?.is_empty());
/// assert!(routing_headers(RouterPolicy::ConsistentHashing, None).is_err());
/// # Ok::<(), berth_client::ClientError>(())
/// ```
pub fn routing_headers(
    policy: RouterPolicy,
    key: Option<&RoutingKey>,
) -> Result<RoutingHeaders, ClientError> {
    if !policy_uses_routing_key(policy) {
        return Ok(RoutingHeaders::default());
    }
    let key = key.ok_or(ClientError::MissingRoutingKey { policy })?;
    Ok(RoutingHeaders(vec![(
        ROUTING_KEY_HEADER,
        key.as_str().to_owned(),
    )]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_iff_policy_uses_keys_and_key_set() {
        let key = RoutingKey::mint();
        for p in RouterPolicy::ALL {
            let with = routing_headers(p, Some(&key)).unwrap();
            if policy_uses_routing_key(p) {
                assert_eq!(with.get("x-smg-routing-key"), Some(key.as_str()));
                assert_eq!(with.iter().count(), 1);
                let err = routing_headers(p, None).unwrap_err();
                assert_eq!(err, ClientError::MissingRoutingKey { policy: p });
                assert!(err.to_string().contains(p.as_str()));
            } else {
                assert!(with.is_empty());
                assert!(routing_headers(p, None).unwrap().is_empty());
            }
        }
    }

    #[test]
    fn retries_keep_the_key() {
        // The key belongs to the sample: building headers twice (first try, retry) gives the
        // same value.
        let key = RoutingKey::mint();
        let first = routing_headers(RouterPolicy::Manual, Some(&key)).unwrap();
        let retry = routing_headers(RouterPolicy::Manual, Some(&key)).unwrap();
        assert_eq!(first, retry);
    }
}

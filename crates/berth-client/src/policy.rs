//! Router policies as a client sees them, and the one predicate that says which use keys.
//!
//! Every call site that decides whether to attach a routing key asks
//! [`policy_uses_routing_key`]; a new key-based policy is a one-line change here.

use std::fmt;
use std::str::FromStr;

use crate::error::ClientError;

/// The policy the router in front of the workers runs (SMG's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RouterPolicy {
    /// Uniformly random placement.
    Random,
    /// Round robin.
    RoundRobin,
    /// Power of two choices by load.
    PowerOfTwo,
    /// Approximate prefix tree of request text per worker (the gateway's default).
    CacheAware,
    /// Hash the routing key onto the workers.
    ConsistentHashing,
    /// Pin each routing key in a key-to-worker map.
    Manual,
}

impl RouterPolicy {
    /// Every policy, in a stable order.
    pub const ALL: [RouterPolicy; 6] = [
        Self::Random,
        Self::RoundRobin,
        Self::PowerOfTwo,
        Self::CacheAware,
        Self::ConsistentHashing,
        Self::Manual,
    ];

    /// The name on the command line and in configuration files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Random => "random",
            Self::RoundRobin => "round_robin",
            Self::PowerOfTwo => "power_of_two",
            Self::CacheAware => "cache_aware",
            Self::ConsistentHashing => "consistent_hashing",
            Self::Manual => "manual",
        }
    }
}

impl fmt::Display for RouterPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RouterPolicy {
    type Err = ClientError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| ClientError::UnknownPolicy(s.to_owned()))
    }
}

/// Whether requests must carry a routing key under `policy`: true for `consistent_hashing` and
/// `manual`, which reject keyless generation requests with `400 missing_routing_key`.
///
/// ```
/// use berth_client::{RouterPolicy, policy_uses_routing_key};
/// assert!(policy_uses_routing_key(RouterPolicy::Manual));
/// assert!(!policy_uses_routing_key(RouterPolicy::CacheAware));
/// ```
pub fn policy_uses_routing_key(policy: RouterPolicy) -> bool {
    matches!(
        policy,
        RouterPolicy::ConsistentHashing | RouterPolicy::Manual
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truth_table() {
        for p in RouterPolicy::ALL {
            let expected = matches!(p.as_str(), "consistent_hashing" | "manual");
            assert_eq!(policy_uses_routing_key(p), expected, "{p}");
        }
    }

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for p in RouterPolicy::ALL {
            assert_eq!(p.as_str().parse::<RouterPolicy>().unwrap(), p);
        }
        let err = "sticky".parse::<RouterPolicy>().unwrap_err();
        assert!(err.to_string().contains("sticky"));
    }
}

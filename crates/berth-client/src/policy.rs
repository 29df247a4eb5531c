//! Router policies as a client sees them, and the one predicate that says which use keys.
//!
//! Both are the routing core's own ([`berth_routing::PolicyKind`] and
//! [`berth_routing::policy_uses_routing_key`]), re-exported: the client deciding whether to
//! attach a key and the gateway deciding whether to refuse a keyless request ask the same
//! predicate, so they cannot drift apart, and a new key-based policy is a one-line change there.
//!
//! ```
//! use berth_client::{RouterPolicy, policy_uses_routing_key};
//! assert!(policy_uses_routing_key(RouterPolicy::Manual));
//! assert!(!policy_uses_routing_key(RouterPolicy::CacheAware));
//! let p: RouterPolicy = "consistent_hashing".parse().unwrap();
//! assert!(policy_uses_routing_key(p));
//! ```

/// The policy the router in front of the workers runs (SMG's names).
pub use berth_routing::PolicyKind as RouterPolicy;
/// Whether requests must carry a routing key under a policy: true for `consistent_hashing` and
/// `manual`, which reject keyless generation requests with `400 missing_routing_key`.
pub use berth_routing::policy_uses_routing_key;

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

//! The closed set of policy names. A name as a string exists only at the CLI/serde boundary.

use std::fmt;
use std::str::FromStr;

use crate::Error;

/// A routing policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PolicyKind {
    /// Uniformly at random.
    Random,
    /// In turn.
    RoundRobin,
    /// The less loaded of two random workers.
    PowerOfTwo,
    /// Longest cached prefix, balanced by load (the default).
    #[default]
    CacheAware,
    /// Hash of the routing key on a ring of the available workers.
    ConsistentHashing,
    /// A key-to-worker map filled by the assignment mode.
    Manual,
    /// The least predicted time to first token; keyed requests pinned, moved only when
    /// staying is clearly slower (berth's own).
    TtftAware,
    /// `ttft_aware` priced by what a session costs the fleet (KV working sets, queued
    /// prefill, evictions): the recommendation for long agentic sessions (berth's own).
    Agentic,
}

impl PolicyKind {
    /// Every policy, in documentation order.
    pub const ALL: [Self; 8] = [
        Self::Random,
        Self::RoundRobin,
        Self::PowerOfTwo,
        Self::CacheAware,
        Self::ConsistentHashing,
        Self::Manual,
        Self::TtftAware,
        Self::Agentic,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Random => "random",
            Self::RoundRobin => "round_robin",
            Self::PowerOfTwo => "power_of_two",
            Self::CacheAware => "cache_aware",
            Self::ConsistentHashing => "consistent_hashing",
            Self::Manual => "manual",
            Self::TtftAware => "ttft_aware",
            Self::Agentic => "agentic",
        }
    }

    /// Whether the policy predicts time to first token and pins keys itself (`ttft_aware`
    /// and `agentic`).
    pub fn predicts_ttft(self) -> bool {
        matches!(self, Self::TtftAware | Self::Agentic)
    }

    /// Whether the policy routes on the prompt text (keeps a prefix index).
    pub fn reads_prompt(self) -> bool {
        matches!(self, Self::CacheAware | Self::TtftAware | Self::Agentic)
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PolicyKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|p| p.as_str()).collect();
                Error::config(
                    "--policy",
                    format!("unknown policy {s:?}; expected one of {}", names.join(", ")),
                )
            })
    }
}

/// Whether `policy` places requests by routing key, so a keyless request is refused with
/// `missing_routing_key` (seed 000). The one predicate every key site uses.
pub fn policy_uses_routing_key(policy: PolicyKind) -> bool {
    matches!(policy, PolicyKind::ConsistentHashing | PolicyKind::Manual)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in PolicyKind::ALL {
            assert_eq!(p.as_str().parse::<PolicyKind>().unwrap(), p);
        }
        let err = "sticky".parse::<PolicyKind>().unwrap_err();
        assert!(err.to_string().contains("--policy"));
    }

    #[test]
    fn key_predicate_truth_table() {
        let uses: Vec<_> = PolicyKind::ALL
            .into_iter()
            .filter(|p| policy_uses_routing_key(*p))
            .collect();
        assert_eq!(uses, [PolicyKind::ConsistentHashing, PolicyKind::Manual]);
        assert_eq!(PolicyKind::default(), PolicyKind::CacheAware);
    }
}

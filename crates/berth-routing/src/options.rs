//! The router's configuration: raw values in, validated domain values out.
//!
//! [`RouterOptions`] carries what the command line (or a TOML file) said, with SMG's names and
//! defaults; [`crate::Router::new`] validates it once and refuses, naming the flag, anything
//! that would make the router misbehave later.

use crate::key::{DEFAULT_KEY_SOURCES, DEFAULT_ROUTING_KEY_HEADER, KeyConfig, parse_sources};
use crate::policy::{CacheAwareConfig, FeedbackMode, PolicyKind, TtftConfig};
use crate::{AssignmentMode, Error, OverloadConfig};

/// Default in-flight threshold per key under the override.
pub const DEFAULT_STICKY_INFLIGHT_CAP: u32 = 2;

/// Router settings as given (SMG's flag names in the field docs).
#[derive(Debug, Clone, PartialEq)]
pub struct RouterOptions {
    /// `--policy`.
    pub policy: PolicyKind,
    /// `--routing-key-override` (alias `--sticky-sessions`).
    pub routing_key_override: bool,
    /// `--routing-key-headers`, in precedence order.
    pub routing_key_headers: Vec<String>,
    /// `--routing-key-sources`: where keys come from, in precedence order.
    pub routing_key_sources: Vec<String>,
    /// `--assignment-mode`; `None` takes the default (random under manual, delegate under
    /// the override).
    pub assignment_mode: Option<AssignmentMode>,
    /// `--max-idle-secs`; 0 disables idle eviction.
    pub max_idle_secs: u64,
    /// `--eviction-interval-secs`; 0 disables idle eviction (refused under `cache_aware`).
    pub eviction_interval_secs: u64,
    /// `--allow-requests-without-routing-key`.
    pub allow_requests_without_routing_key: bool,
    /// `--cache-threshold`, in [0, 1].
    pub cache_threshold: f64,
    /// `--balance-abs-threshold`.
    pub balance_abs_threshold: u32,
    /// `--balance-rel-threshold`, at least 1.
    pub balance_rel_threshold: f64,
    /// `--max-tree-size`, characters per worker in a cache-aware tree.
    pub max_tree_size: usize,
    /// `--prefix-index-budget-mb`: bytes of prefix index (all models and workers) in MiB.
    pub prefix_index_budget_mb: usize,
    /// `--max-sticky-keys`; 0 = unbounded.
    pub max_sticky_keys: usize,
    /// `--sticky-inflight-cap`: the per-key in-flight threshold under the override (>= 1).
    pub sticky_inflight_cap: u32,
    /// `ttft_aware`'s settings (the `--ttft-*` flags).
    pub ttft: TtftConfig,
    /// `--cache-feedback`: whether answers' reported cached tokens are read, and whether they
    /// correct the prefix index and the KV estimate (only policies with a prefix index).
    pub cache_feedback: FeedbackMode,
    /// Worker overload protection (`--worker-overload-*`, SMG 1.13's, on by default): reads the
    /// loads the gateway polls.
    pub overload: OverloadConfig,
}

impl Default for RouterOptions {
    fn default() -> Self {
        let ca = CacheAwareConfig::default();
        Self {
            policy: PolicyKind::CacheAware,
            routing_key_override: false,
            routing_key_headers: vec![DEFAULT_ROUTING_KEY_HEADER.to_owned()],
            routing_key_sources: DEFAULT_KEY_SOURCES
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            assignment_mode: None,
            max_idle_secs: 14_400,
            eviction_interval_secs: 120,
            allow_requests_without_routing_key: false,
            cache_threshold: ca.cache_threshold,
            balance_abs_threshold: ca.balance_abs_threshold,
            balance_rel_threshold: ca.balance_rel_threshold,
            max_tree_size: ca.max_tree_size,
            prefix_index_budget_mb: ca.index_budget_bytes >> 20,
            max_sticky_keys: 0,
            sticky_inflight_cap: DEFAULT_STICKY_INFLIGHT_CAP,
            ttft: TtftConfig::default(),
            cache_feedback: FeedbackMode::default(),
            overload: OverloadConfig::default(),
        }
    }
}

/// How the router keeps (or does not keep) pins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stickiness {
    /// No pin table: the policy places every request (consistent hashing hashes the key).
    None,
    /// `--policy manual`: one map scoped by leg, no in-flight threshold.
    Manual,
    /// The override on another policy: pins scoped by model and leg, with the threshold.
    Override,
    /// `--policy ttft_aware`: pins scoped by model and leg, moved by predicted TTFT instead of
    /// the threshold.
    Ttft,
}

impl Stickiness {
    /// Whether pins are scoped by model (every pin-keeping mode but `manual`).
    pub(crate) fn scoped_by_model(self) -> bool {
        matches!(self, Self::Override | Self::Ttft)
    }
}

/// Validated settings.
#[derive(Debug, Clone)]
pub(crate) struct Validated {
    pub(crate) policy: PolicyKind,
    pub(crate) keys: KeyConfig,
    pub(crate) stickiness: Stickiness,
    pub(crate) mode: AssignmentMode,
    pub(crate) allow_keyless: bool,
    pub(crate) cache: CacheAwareConfig,
    pub(crate) max_idle_secs: u32,
    pub(crate) eviction_interval_secs: u64,
    pub(crate) max_sticky_keys: usize,
    pub(crate) inflight_cap: u16,
    pub(crate) ttft: TtftConfig,
    pub(crate) feedback: FeedbackMode,
    pub(crate) overload: OverloadConfig,
}

impl RouterOptions {
    pub(crate) fn validate(&self) -> Result<Validated, Error> {
        let keys = KeyConfig::try_new(self.routing_key_override, &self.routing_key_headers)?
            .with_sources(parse_sources(&self.routing_key_sources)?);
        if !(0.0..=1.0).contains(&self.cache_threshold) {
            return Err(Error::config(
                "--cache-threshold",
                "must be between 0 and 1",
            ));
        }
        if !(self.balance_rel_threshold >= 1.0 && self.balance_rel_threshold.is_finite()) {
            return Err(Error::config(
                "--balance-rel-threshold",
                "must be a finite number >= 1",
            ));
        }
        if self.max_tree_size == 0 {
            return Err(Error::config("--max-tree-size", "must be greater than 0"));
        }
        if self.prefix_index_budget_mb == 0 || self.prefix_index_budget_mb > 1 << 20 {
            return Err(Error::config(
                "--prefix-index-budget-mb",
                "must be between 1 and 1048576",
            ));
        }
        if self.sticky_inflight_cap == 0 || self.sticky_inflight_cap > u32::from(u16::MAX) {
            return Err(Error::config(
                "--sticky-inflight-cap",
                "must be between 1 and 65535",
            ));
        }
        if self.eviction_interval_secs == 0 && self.policy == PolicyKind::CacheAware {
            return Err(Error::config(
                "--eviction-interval-secs",
                "0 disables eviction and is refused with --policy cache_aware",
            ));
        }
        if self.max_idle_secs > u64::from(u32::MAX) {
            return Err(Error::config("--max-idle-secs", "too large"));
        }
        validate_ttft(&self.ttft)?;
        if self.overload.waiting_requests == 0 {
            return Err(Error::config(
                "--worker-overload-waiting-requests",
                "must be >= 1 (the comparison is inclusive: 0 would veto every worker)",
            ));
        }
        let usage = self.overload.token_usage;
        if !(usage > 0.0 && usage <= 1.0) {
            return Err(Error::config(
                "--worker-overload-token-usage",
                "must be in (0, 1] (the comparison is inclusive: 0 would veto every worker)",
            ));
        }
        let stickiness = match (self.policy, self.routing_key_override) {
            (PolicyKind::Manual, _) => Stickiness::Manual,
            (PolicyKind::TtftAware | PolicyKind::Agentic, _) => Stickiness::Ttft,
            (PolicyKind::ConsistentHashing, _) | (_, false) => Stickiness::None,
            (_, true) => Stickiness::Override,
        };
        let mode = match (stickiness, self.assignment_mode) {
            (Stickiness::Manual, Some(AssignmentMode::Delegate)) => {
                return Err(Error::config(
                    "--assignment-mode",
                    "delegate needs a policy to delegate to; --policy manual has none \
                     (use random, min_load or min_group, or the override on another policy)",
                ));
            }
            (_, Some(m)) => m,
            (Stickiness::Manual, None) => AssignmentMode::Random,
            (_, None) => AssignmentMode::Delegate,
        };
        Ok(Validated {
            policy: self.policy,
            keys,
            stickiness,
            mode,
            allow_keyless: self.allow_requests_without_routing_key,
            cache: CacheAwareConfig {
                cache_threshold: self.cache_threshold,
                balance_abs_threshold: self.balance_abs_threshold,
                balance_rel_threshold: self.balance_rel_threshold,
                max_tree_size: self.max_tree_size,
                index_budget_bytes: self.prefix_index_budget_mb << 20,
            },
            max_idle_secs: if self.eviction_interval_secs == 0 {
                0
            } else {
                self.max_idle_secs as u32
            },
            eviction_interval_secs: self.eviction_interval_secs,
            max_sticky_keys: self.max_sticky_keys,
            inflight_cap: self.sticky_inflight_cap as u16,
            ttft: self.ttft,
            feedback: self.cache_feedback,
            overload: self.overload,
        })
    }
}

fn validate_ttft(t: &TtftConfig) -> Result<(), Error> {
    let finite_at_least = |v: f64, min: f64| v.is_finite() && v >= min;
    let checks: [(&'static str, bool, &str); 6] = [
        (
            "--ttft-base-ms",
            finite_at_least(t.prior.base_ms, 0.0),
            "must be a finite number >= 0",
        ),
        (
            "--ttft-prefill-ms-per-1k-tokens",
            finite_at_least(t.prior.per_token_ms, 0.0) && t.prior.per_token_ms > 0.0,
            "must be a finite number > 0",
        ),
        (
            "--ttft-decode-ms-per-request",
            finite_at_least(t.prior.per_decode_ms, 0.0),
            "must be a finite number >= 0",
        ),
        (
            "--ttft-chars-per-token",
            finite_at_least(t.chars_per_token, 0.0) && t.chars_per_token > 0.0,
            "must be a finite number > 0",
        ),
        (
            "--ttft-move-factor",
            finite_at_least(t.move_factor, 1.0),
            "must be a finite number >= 1",
        ),
        (
            "--ttft-move-margin-ms",
            finite_at_least(t.move_margin_ms, 0.0),
            "must be a finite number >= 0",
        ),
    ];
    match checks.into_iter().find(|(_, ok, _)| !ok) {
        Some((flag, _, reason)) => Err(Error::config(flag, reason)),
        None => Ok(()),
    }
}

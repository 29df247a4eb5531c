//! SPEC.md flag names and defaults as `berth serve` parses them: the routing-key flags of
//! section 1, the policies, assignment modes and eviction defaults of section 2.
#![allow(clippy::unwrap_used, missing_docs)]

use berth_gateway::GatewayConfig;
use berth_gateway::cli::Args;
use berth_gateway::routing::{AssignmentMode, PolicyKind};
use clap::{Args as _, FromArgMatches as _};

fn config(extra: &[&str]) -> Result<GatewayConfig, String> {
    let argv = ["serve", "--worker-urls", "http://127.0.0.1:1"]
        .into_iter()
        .chain(extra.iter().copied());
    let m = Args::augment_args(clap::Command::new("serve"))
        .try_get_matches_from(argv)
        .map_err(|e| e.to_string())?;
    let args = Args::from_arg_matches(&m).map_err(|e| e.to_string())?;
    GatewayConfig::from_args(&args).map_err(|e| e.to_string())
}

/// SPEC 1 "default `x-smg-routing-key`", SPEC 2 "`cache_aware` (the default)", idle eviction
/// "default 120" and "default 14400", assignment mode "Default: `random` under `manual`,
/// `delegate` under the override" (left unset so the router picks), override and the missing-key
/// escape hatch off.
#[test]
fn defaults_are_the_documented_ones() {
    let c = config(&[]).unwrap();
    let r = &c.router;
    assert_eq!(r.policy, PolicyKind::CacheAware);
    assert_eq!(r.routing_key_headers, ["x-smg-routing-key"]);
    assert!(!r.routing_key_override);
    assert!(!r.allow_requests_without_routing_key);
    assert_eq!(r.eviction_interval_secs, 120);
    assert_eq!(r.max_idle_secs, 14_400);
    assert_eq!(r.assignment_mode, None);
    assert_eq!(r.sticky_inflight_cap, 2);
}

/// SPEC 1: `--routing-key-override`, alias `--sticky-sessions`; `--routing-key-headers` is an
/// ordered list; SPEC 2: `--allow-requests-without-routing-key`, `--max-idle-secs`,
/// `--eviction-interval-secs`.
#[test]
fn routing_key_flags_parse_under_their_spec_names() {
    for flag in ["--routing-key-override", "--sticky-sessions"] {
        assert!(
            config(&[flag]).unwrap().router.routing_key_override,
            "{flag}"
        );
    }
    let c = config(&[
        "--routing-key-headers",
        "x-b",
        "X-A",
        "x-smg-routing-key",
        "--allow-requests-without-routing-key",
        "--max-idle-secs",
        "0",
        "--eviction-interval-secs",
        "30",
    ])
    .unwrap();
    assert_eq!(
        c.router.routing_key_headers,
        ["x-b", "X-A", "x-smg-routing-key"],
        "order kept"
    );
    assert!(c.router.allow_requests_without_routing_key);
    assert_eq!(
        (c.router.max_idle_secs, c.router.eviction_interval_secs),
        (0, 30)
    );
}

/// SPEC 2: the six policy names and the four assignment-mode names, exactly as spelled there.
#[test]
fn policy_and_assignment_mode_names() {
    for (name, kind) in [
        ("random", PolicyKind::Random),
        ("round_robin", PolicyKind::RoundRobin),
        ("power_of_two", PolicyKind::PowerOfTwo),
        ("cache_aware", PolicyKind::CacheAware),
        ("consistent_hashing", PolicyKind::ConsistentHashing),
        ("manual", PolicyKind::Manual),
    ] {
        assert_eq!(config(&["--policy", name]).unwrap().router.policy, kind);
    }
    for (name, mode) in [
        ("random", AssignmentMode::Random),
        ("min_load", AssignmentMode::MinLoad),
        ("min_group", AssignmentMode::MinGroup),
        ("delegate", AssignmentMode::Delegate),
    ] {
        let c = config(&["--routing-key-override", "--assignment-mode", name]).unwrap();
        assert_eq!(c.router.assignment_mode, Some(mode));
    }
}

/// SPEC 1: "a name that is not a valid HTTP header name refuses start-up", also when it is not
/// the first of the list; SPEC 2: "`--eviction-interval-secs 0` ... is refused at start-up when
/// the policy is `cache_aware`", with or without the override.
#[test]
fn start_up_refusals_name_the_flag() {
    for bad in ["x key", "x:y", "", "é"] {
        let err = config(&["--routing-key-headers", "x-ok", bad]).unwrap_err();
        assert!(err.contains("--routing-key-headers"), "{bad:?}: {err}");
    }
    for extra in [&[][..], &["--routing-key-override"][..]] {
        let mut argv = vec!["--eviction-interval-secs", "0"];
        argv.extend_from_slice(extra);
        let err = config(&argv).unwrap_err();
        assert!(err.contains("--eviction-interval-secs"), "{err}");
    }
    assert!(config(&["--policy", "manual", "--eviction-interval-secs", "0"]).is_ok());
}

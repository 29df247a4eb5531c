use super::*;

#[test]
fn configuration_is_validated_naming_the_flag() {
    let bad = |o: RouterOptions, flag: &str| {
        let e = Router::new(&o).unwrap_err().to_string();
        assert!(e.contains(flag), "{e}");
    };
    bad(
        RouterOptions {
            eviction_interval_secs: 0,
            ..Default::default()
        },
        "--eviction-interval-secs",
    );
    bad(
        RouterOptions {
            policy: PolicyKind::Manual,
            assignment_mode: Some(AssignmentMode::Delegate),
            ..Default::default()
        },
        "--assignment-mode",
    );
    bad(
        RouterOptions {
            routing_key_headers: vec!["bad header".into()],
            ..Default::default()
        },
        "--routing-key-headers",
    );
    bad(
        RouterOptions {
            cache_threshold: 1.5,
            ..Default::default()
        },
        "--cache-threshold",
    );
    bad(
        RouterOptions {
            balance_rel_threshold: 0.5,
            ..Default::default()
        },
        "--balance-rel-threshold",
    );
    bad(
        RouterOptions {
            sticky_inflight_cap: 0,
            ..Default::default()
        },
        "--sticky-inflight-cap",
    );
    bad(
        RouterOptions {
            max_tree_size: 0,
            ..Default::default()
        },
        "--max-tree-size",
    );
    // eviction interval 0 is accepted on other policies
    assert!(
        Router::new(&RouterOptions {
            policy: PolicyKind::Manual,
            eviction_interval_secs: 0,
            ..Default::default()
        })
        .is_ok()
    );
    // defaults: random under manual, delegate under the override
    assert_eq!(manual().assignment_mode(), AssignmentMode::Random);
    assert_eq!(sticky_rr().assignment_mode(), AssignmentMode::Delegate);
}

#[test]
fn body_paths() {
    use crate::BodyPath::*;
    let ca = router(PolicyKind::CacheAware, false, None);
    assert_eq!(ca.body_path(false, false), Buffered("cache_aware_text"));
    assert_eq!(ca.body_path(true, false), Streamed("routing_tokens_hint"));
    let ov = router(PolicyKind::CacheAware, true, None);
    assert_eq!(ov.body_path(true, false), Buffered("routing_key_override"));
    let rr = router(PolicyKind::RoundRobin, false, None);
    assert_eq!(rr.body_path(false, false), Streamed("not_needed"));
    assert_eq!(rr.body_path(false, true), Buffered("model_selection"));
    assert_eq!(Buffered("x").path(), "buffered");
}

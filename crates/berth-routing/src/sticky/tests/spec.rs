//! SPEC.md sentences the other files left without a test of their own (see
//! `docs/spec-coverage.md`): precedence on every policy, stickiness on every policy, delegate
//! placement of a new key, and the documented defaults.

use super::*;

/// Every policy that keeps pins under the override (all but consistent hashing).
const PINNING: [PolicyKind; 5] = [
    PolicyKind::Random,
    PolicyKind::RoundRobin,
    PolicyKind::PowerOfTwo,
    PolicyKind::CacheAware,
    PolicyKind::Manual,
];

fn with_rid<'a>(rid: &'a str, headers: &'a HeaderList<'a>) -> RouteRequest<'a> {
    RouteRequest {
        rid: Some(rid),
        ..keyed(headers)
    }
}

/// SPEC 1: "With the override on, a body rid wins over a header even when both are present, on
/// every policy, `manual` and `consistent_hashing` included."
#[test]
fn rid_wins_over_a_header_on_every_policy() {
    let f = Fleet::new(5);
    let s = f.snap(&[]);
    for policy in PolicyKind::ALL {
        let r = router(policy, true, None);
        let mut rng = Rng::seeded(3);
        let anchor = route_rid(&r, &s, "conv_t1", "m", &mut rng);
        for i in 0..12 {
            let stamped = format!("proxy-unique-{i}");
            let pairs = [("x-smg-routing-key", stamped.as_bytes())];
            let h = HeaderList(&pairs);
            let d = r
                .route(&with_rid("conv_t2_r1", &h), &s, T0, &mut rng)
                .unwrap();
            let key = d.key.as_ref().unwrap();
            assert_eq!(
                (key.key.as_str(), key.source),
                ("conv", KeySource::Rid),
                "{policy}"
            );
            assert_eq!(d.worker, anchor.worker, "{policy}: the header split it");
        }
    }
}

/// SPEC 2: "Routing-key override on any other policy: keyed requests stick" (every policy, not
/// only round robin), and SPEC 2 "Adding workers never moves a key" on each of them.
#[test]
fn keyed_requests_stick_on_every_pinning_policy() {
    let f = Fleet::new(6);
    for policy in PINNING {
        let r = router(policy, true, None);
        let mut rng = Rng::seeded(17);
        let small = f.snap_of(&[0, 1, 2], &[]);
        let keys: Vec<String> = (0..24).map(|i| format!("{policy}-{i}")).collect();
        let first: Vec<WorkerId> = keys
            .iter()
            .map(|k| route_key(&r, &small, k, &mut rng).worker)
            .collect();
        assert_eq!(r.stats().pins, keys.len(), "{policy}");
        let all = f.snap(&[]);
        for _ in 0..3 {
            for (k, w) in keys.iter().zip(&first) {
                let d = route_key(&r, &all, k, &mut rng);
                assert_eq!(
                    (d.worker, d.branch),
                    (*w, Some(Branch::OccupiedHit)),
                    "{policy} {k}"
                );
            }
        }
    }
}

/// SPEC 2: "(under `delegate`) the first request of each new key [is] placed by the configured
/// policy": under `cache_aware` a new key lands where the conversation's prefix already is.
#[test]
fn delegate_places_a_new_key_where_the_policy_finds_its_prefix() {
    let f = Fleet::new(4);
    let s = f.snap(&[]);
    let text = "You are a careful travel planner. ".repeat(30);
    for seed in 0..8 {
        let r = router(PolicyKind::CacheAware, true, None);
        assert_eq!(r.assignment_mode(), AssignmentMode::Delegate);
        let mut rng = Rng::seeded(seed);
        // A keyless request with the text: the policy places it and records the prefix there.
        let warm = r
            .route(
                &RouteRequest {
                    text: Some(&text),
                    ..keyed(&NO_HEADERS)
                },
                &s,
                T0,
                &mut rng,
            )
            .unwrap();
        assert_eq!(warm.branch, Some(Branch::NoRoutingId));
        let home = warm.worker;
        drop(warm);
        let pairs = [("x-smg-routing-key", &b"new-conversation"[..])];
        let h = HeaderList(&pairs);
        let d = r
            .route(
                &RouteRequest {
                    text: Some(&text),
                    ..keyed(&h)
                },
                &s,
                T0,
                &mut rng,
            )
            .unwrap();
        assert_eq!(
            (d.worker, d.branch),
            (home, Some(Branch::Vacant)),
            "seed {seed}"
        );
    }
}

/// The same sentence for a non-delegate mode: the assignment mode, not the policy, places a new
/// key. `min_load` under the override ignores the prefix and goes to the idle worker.
#[test]
fn a_non_delegate_mode_places_new_keys_instead_of_the_policy() {
    let f = Fleet::new(2);
    let s = f.snap(&[]);
    let r = router(PolicyKind::CacheAware, true, Some(AssignmentMode::MinLoad));
    let mut rng = Rng::seeded(4);
    let text = "shared system prompt, long enough to match. ".repeat(20);
    let warm = r
        .route(
            &RouteRequest {
                text: Some(&text),
                ..keyed(&NO_HEADERS)
            },
            &s,
            T0,
            &mut rng,
        )
        .unwrap();
    // `warm` stays in flight: its worker is busier than the other one.
    let pairs = [("x-smg-routing-key", &b"fresh"[..])];
    let h = HeaderList(&pairs);
    let d = r
        .route(
            &RouteRequest {
                text: Some(&text),
                ..keyed(&h)
            },
            &s,
            T0,
            &mut rng,
        )
        .unwrap();
    assert_eq!(d.branch, Some(Branch::Vacant));
    assert_ne!(d.worker, warm.worker, "min_load placed it, not cache_aware");
}

/// SPEC 2 (idle eviction, assignment modes) and SPEC 1 (header list): the documented defaults.
#[test]
fn documented_defaults() {
    let o = RouterOptions::default();
    assert_eq!(
        o.policy,
        PolicyKind::CacheAware,
        "cache_aware is the default"
    );
    assert_eq!(o.routing_key_headers, ["x-smg-routing-key"]);
    assert!(!o.routing_key_override);
    assert!(!o.allow_requests_without_routing_key);
    assert_eq!((o.eviction_interval_secs, o.max_idle_secs), (120, 14_400));
    assert_eq!(o.sticky_inflight_cap, 2, "the in-flight threshold is 2");
    assert_eq!(o.assignment_mode, None);
    for r in [manual(), sticky_rr()] {
        assert_eq!(r.eviction_interval(), Some(Duration::from_secs(120)));
    }
    // A router that keeps no pins has nothing to sweep.
    for policy in [PolicyKind::CacheAware, PolicyKind::ConsistentHashing] {
        assert_eq!(router(policy, false, None).eviction_interval(), None);
    }
    assert_eq!(
        router(PolicyKind::ConsistentHashing, true, None).eviction_interval(),
        None
    );
}

/// SPEC 2: "pins unused for `--max-idle-secs` (default 14400) are removed": with the default, a
/// pin survives 14399 s of disuse and goes at 14400 s.
#[test]
fn default_idle_window_is_four_hours() {
    let f = Fleet::new(2);
    let s = f.snap(&[]);
    let r = manual();
    let mut rng = Rng::seeded(1);
    let pairs = [("x-smg-routing-key", &b"k"[..])];
    let h = HeaderList(&pairs);
    drop(
        r.route(&keyed(&h), &s, Duration::from_secs(0), &mut rng)
            .unwrap(),
    );
    let sweep = |at: u64| {
        let mut removed = 0;
        for _ in 0..10_000 {
            let st = r.sweep_step(Duration::from_secs(at), &s);
            removed += st.removed_idle;
            if st.finished {
                return removed;
            }
        }
        panic!("sweep never finished");
    };
    assert_eq!(sweep(14_399), 0);
    assert_eq!(r.stats().pins, 1);
    assert_eq!(sweep(14_400), 1);
    assert_eq!(r.stats().pins, 0);
}

/// SPEC 2: "Default: `random` under `manual`, `delegate` under the override", whatever the
/// underlying policy, and `manual` with the override keeps `random`.
#[test]
fn default_assignment_mode_per_stickiness() {
    for policy in [
        PolicyKind::Random,
        PolicyKind::RoundRobin,
        PolicyKind::PowerOfTwo,
        PolicyKind::CacheAware,
    ] {
        assert_eq!(
            router(policy, true, None).assignment_mode(),
            AssignmentMode::Delegate,
            "{policy}"
        );
    }
    assert_eq!(
        router(PolicyKind::Manual, true, None).assignment_mode(),
        AssignmentMode::Random
    );
    assert_eq!(manual().assignment_mode(), AssignmentMode::Random);
}

/// SPEC 2: "When no remembered worker is available, the request is placed again", also when
/// the remembered worker left the fleet (manual and the override): a new worker, then a hit.
#[test]
fn a_key_whose_workers_all_left_is_placed_again() {
    let f = Fleet::new(3);
    for r in [manual(), sticky_rr()] {
        let mut rng = Rng::seeded(8);
        let a = route_key(&r, &f.snap(&[]), "k", &mut rng).worker;
        let rest: Vec<u32> = (0..3).filter(|i| *i != a.0).collect();
        let d = route_key(&r, &f.snap_of(&rest, &[]), "k", &mut rng);
        assert_eq!(d.branch, Some(Branch::OccupiedMiss));
        assert_ne!(d.worker, a);
        let again = route_key(&r, &f.snap_of(&rest, &[]), "k", &mut rng);
        assert_eq!(
            (again.worker, again.branch),
            (d.worker, Some(Branch::OccupiedHit))
        );
    }
}

/// SPEC 2: "every gateway replica that sees the same available workers computes the same
/// placement": a replica that also knows an unavailable worker, and numbers the workers in
/// another order, places every key on the same URL.
#[test]
fn consistent_hashing_agrees_across_replicas_seeing_the_same_available_workers() {
    let urls = [
        "http://10.0.0.1:30000",
        "http://10.0.0.2:30000",
        "http://10.0.0.3:30000",
    ];
    let entry = |id: u32, url: &str, available: bool| WorkerEntry {
        id: WorkerId(id),
        url: url.into(),
        models: vec![Arc::from("m")],
        available,
        stats: Arc::default(),
    };
    let a = WorkerSnapshot::new(
        urls.iter()
            .enumerate()
            .map(|(i, u)| entry(i as u32, u, true))
            .collect(),
    );
    let mut b_entries: Vec<WorkerEntry> = urls
        .iter()
        .rev()
        .enumerate()
        .map(|(i, u)| entry(10 + i as u32, u, true))
        .collect();
    b_entries.push(entry(20, "http://10.0.0.9:30000", false));
    let b = WorkerSnapshot::new(b_entries);
    let (ra, rb) = (
        router(PolicyKind::ConsistentHashing, false, None),
        router(PolicyKind::ConsistentHashing, false, None),
    );
    let (mut rng_a, mut rng_b) = (Rng::seeded(1), Rng::seeded(2));
    for i in 0..200 {
        let key = format!("session-{i}");
        let wa = route_key(&ra, &a, &key, &mut rng_a).worker;
        let wb = route_key(&rb, &b, &key, &mut rng_b).worker;
        assert_eq!(a.get(wa).unwrap().url, b.get(wb).unwrap().url, "{key}");
    }
}

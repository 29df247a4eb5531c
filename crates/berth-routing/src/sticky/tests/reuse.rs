use super::*;

#[test]
fn manual_pins_keyed_requests() {
    let f = Fleet::new(4);
    let s = f.snap(&[]);
    let r = manual();
    let mut rng = Rng::seeded(1);
    let first = route_key(&r, &s, "conv-1", &mut rng);
    assert_eq!(first.branch, Some(Branch::Vacant));
    assert_eq!(first.key.as_ref().unwrap().source, KeySource::Header);
    for _ in 0..20 {
        let d = route_key(&r, &s, "conv-1", &mut rng);
        assert_eq!(
            (d.worker, d.branch),
            (first.worker, Some(Branch::OccupiedHit))
        );
    }
    assert_eq!(r.stats().pins, 1);
    assert_eq!(f.stats[first.worker.0 as usize].pinned_keys(), 1);
}

#[test]
fn keyless_requests_are_refused_under_key_policies_unless_allowed() {
    let f = Fleet::new(2);
    let s = f.snap(&[]);
    let mut rng = Rng::seeded(1);
    for policy in [PolicyKind::Manual, PolicyKind::ConsistentHashing] {
        let r = router(policy, false, None);
        let err = r.route(&keyed(&NO_HEADERS), &s, T0, &mut rng).unwrap_err();
        assert_eq!(err, Error::MissingRoutingKey);
        assert!(
            err.to_string()
                .contains("--allow-requests-without-routing-key")
        );
        // never derived from Authorization or other headers
        let pairs = [
            ("authorization", &b"Bearer constant"[..]),
            ("cookie", b"x=1"),
        ];
        let h = HeaderList(&pairs);
        assert_eq!(
            r.route(&keyed(&h), &s, T0, &mut rng).unwrap_err(),
            Error::MissingRoutingKey
        );
        let allowed = Router::new(&RouterOptions {
            policy,
            allow_requests_without_routing_key: true,
            ..RouterOptions::default()
        })
        .unwrap();
        let d = allowed
            .route(&keyed(&NO_HEADERS), &s, T0, &mut rng)
            .unwrap();
        let expect = (policy == PolicyKind::Manual).then_some(Branch::NoRoutingId);
        assert_eq!(d.branch, expect);
        assert_eq!(allowed.stats().pins, 0);
    }
    // other policies place keyless requests without complaint
    for policy in [
        PolicyKind::Random,
        PolicyKind::RoundRobin,
        PolicyKind::PowerOfTwo,
        PolicyKind::CacheAware,
    ] {
        let r = router(policy, false, None);
        assert!(r.route(&keyed(&NO_HEADERS), &s, T0, &mut rng).is_ok());
    }
}

#[test]
fn override_keyless_goes_to_the_policy() {
    let f = Fleet::new(3);
    let s = f.snap(&[]);
    let r = sticky_rr();
    let mut rng = Rng::seeded(1);
    let ws: Vec<_> = (0..3)
        .map(|_| r.route(&keyed(&NO_HEADERS), &s, T0, &mut rng).unwrap())
        .collect();
    assert!(ws.iter().all(|d| d.branch == Some(Branch::NoRoutingId)));
    let mut ids: Vec<_> = ws.iter().map(|d| d.worker.0).collect();
    ids.sort();
    assert_eq!(ids, [0, 1, 2], "round robin placed them");
    assert_eq!(r.stats().pins, 0);
}

#[test]
fn rid_lineage_shares_one_pin_and_beats_headers() {
    let f = Fleet::new(4);
    let s = f.snap(&[]);
    let mut rng = Rng::seeded(3);
    for r in [sticky_rr(), router(PolicyKind::Manual, true, None)] {
        let a = route_rid(&r, &s, "chat-7f3a_t1", "m", &mut rng);
        assert_eq!(a.key.as_ref().unwrap().key, "chat-7f3a");
        for rid in ["chat-7f3a_t2", "chat-7f3a_t2_r1", "chat-7f3a"] {
            let pairs = [("x-smg-routing-key", &b"unique-per-request-123"[..])];
            let h = HeaderList(&pairs);
            let req = RouteRequest {
                rid: Some(rid),
                ..keyed(&h)
            };
            let d = r.route(&req, &s, T0, &mut rng).unwrap();
            assert_eq!(d.worker, a.worker, "{rid}");
            assert_eq!(d.key.unwrap().source, KeySource::Rid);
        }
        // a header forwarding conv_t2 pins the same entry as the rid
        let d = route_key(&r, &s, "chat-7f3a_t9", &mut rng);
        assert_eq!((d.worker, d.branch), (a.worker, Some(Branch::OccupiedHit)));
    }
}

#[test]
fn consistent_hashing_with_override_hashes_the_stripped_rid() {
    let f = Fleet::new(8);
    let s = f.snap(&[]);
    let r = router(PolicyKind::ConsistentHashing, true, None);
    let mut rng = Rng::seeded(1);
    let by_header = route_key(&r, &s, "conv-42", &mut rng);
    assert_eq!(by_header.branch, None);
    for rid in ["conv-42_t1", "conv-42_t2_r3"] {
        let pairs = [("x-smg-routing-key", &b"other"[..])];
        let h = HeaderList(&pairs);
        let d = r
            .route(
                &RouteRequest {
                    rid: Some(rid),
                    ..keyed(&h)
                },
                &s,
                T0,
                &mut rng,
            )
            .unwrap();
        assert_eq!(d.worker, by_header.worker);
    }
    assert_eq!(r.stats().pins, 0, "consistent hashing keeps no pin");
    // without the override the rid is not read
    let plain = router(PolicyKind::ConsistentHashing, false, None);
    let req = RouteRequest {
        rid: Some("conv-42_t1"),
        ..keyed(&NO_HEADERS)
    };
    assert_eq!(
        plain.route(&req, &s, T0, &mut rng).unwrap_err(),
        Error::MissingRoutingKey
    );
}

#[test]
fn override_pins_per_model_manual_does_not() {
    let mut f = Fleet::new(4);
    f.models = vec![vec!["a", "b"]; 4];
    let s = f.snap(&[]);
    let mut rng = Rng::seeded(11);
    let r = sticky_rr();
    let a = route_rid(&r, &s, "conv_t1", "a", &mut rng);
    let b = route_rid(&r, &s, "conv_t1", "b", &mut rng);
    assert_eq!(
        (a.branch, b.branch),
        (Some(Branch::Vacant), Some(Branch::Vacant))
    );
    assert_eq!(r.stats().pins, 2);
    assert_ne!(
        a.worker, b.worker,
        "round robin placed the second model's pin elsewhere"
    );
    let m = router(PolicyKind::Manual, true, None);
    let a = route_rid(&m, &s, "conv_t1", "a", &mut rng);
    let b = route_rid(&m, &s, "conv_t2", "b", &mut rng);
    assert_eq!(b.branch, Some(Branch::OccupiedHit));
    assert_eq!(a.worker, b.worker);
    assert_eq!(m.stats().pins, 1);
}

#[test]
fn prefill_and_decode_legs_pin_independently() {
    let f = Fleet::new(4);
    let s = f.snap(&[]);
    let mut rng = Rng::seeded(1);
    for r in [manual(), sticky_rr()] {
        let pairs = [("x-smg-routing-key", &b"k"[..])];
        let h = HeaderList(&pairs);
        for leg in [Leg::Prefill, Leg::Decode, Leg::Regular] {
            let d = r
                .route(&RouteRequest { leg, ..keyed(&h) }, &s, T0, &mut rng)
                .unwrap();
            assert_eq!(d.branch, Some(Branch::Vacant), "{leg:?}");
        }
        assert_eq!(r.stats().pins, 3);
    }
}

#[test]
fn a_remembered_worker_serving_another_model_is_not_available() {
    let mut f = Fleet::new(2);
    f.models = vec![vec!["a"], vec!["b"]];
    let s = f.snap(&[]);
    let r = manual();
    let mut rng = Rng::seeded(1);
    let da = route_rid_header(&r, &s, "a", &mut rng);
    let db = route_rid_header(&r, &s, "b", &mut rng);
    assert_eq!(da.worker, WorkerId(0));
    assert_eq!(
        (db.worker, db.branch),
        (WorkerId(1), Some(Branch::OccupiedMiss))
    );
}

fn route_rid_header(r: &Router, s: &WorkerSnapshot, model: &str, rng: &mut Rng) -> Decision {
    let pairs = [("x-smg-routing-key", &b"shared"[..])];
    let h = HeaderList(&pairs);
    r.route(
        &RouteRequest {
            model: Some(model),
            ..keyed(&h)
        },
        s,
        T0,
        rng,
    )
    .unwrap()
}

#[test]
fn no_available_workers_is_an_error() {
    let f = Fleet::new(2);
    let s = f.snap(&[0, 1]);
    let mut rng = Rng::seeded(1);
    for r in [
        manual(),
        sticky_rr(),
        router(PolicyKind::Random, false, None),
    ] {
        let pairs = [("x-smg-routing-key", &b"k"[..])];
        let h = HeaderList(&pairs);
        assert_eq!(
            r.route(&keyed(&h), &s, T0, &mut rng).unwrap_err(),
            Error::NoAvailableWorkers
        );
    }
    // a model nobody serves has no candidates either
    let r = sticky_rr();
    let req = RouteRequest {
        model: Some("nope"),
        ..keyed(&NO_HEADERS)
    };
    assert_eq!(
        r.route(&req, &f.snap(&[]), T0, &mut rng).unwrap_err(),
        Error::NoAvailableWorkers
    );
}

#[test]
fn racing_first_requests_converge() {
    let f = Fleet::new(8);
    let s = Arc::new(f.snap(&[]));
    let r = Arc::new(manual());
    for round in 0..20 {
        let key = format!("race-{round}");
        let workers: Vec<WorkerId> = std::thread::scope(|scope| {
            let hs: Vec<_> = (0..4)
                .map(|t| {
                    let (r, s, key) = (r.clone(), s.clone(), key.clone());
                    scope.spawn(move || {
                        let mut rng = Rng::seeded(round * 10 + t);
                        route_key(&r, &s, &key, &mut rng).worker
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(workers.iter().all(|w| *w == workers[0]), "{workers:?}");
    }
}

#[test]
fn min_group_balances_keys() {
    let f = Fleet::new(4);
    let s = f.snap(&[]);
    let r = router(PolicyKind::Manual, false, Some(AssignmentMode::MinGroup));
    let mut rng = Rng::seeded(1);
    for i in 0..40 {
        drop(route_key(&r, &s, &format!("k{i}"), &mut rng));
    }
    assert!(f.stats.iter().all(|s| s.pinned_keys() == 10));
}

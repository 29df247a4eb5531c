use super::*;

#[test]
fn in_flight_threshold_moves_the_pin_to_a_less_busy_worker() {
    let f = Fleet::new(2);
    let s = f.snap(&[]);
    let r = router(PolicyKind::CacheAware, true, Some(AssignmentMode::MinLoad));
    let mut rng = Rng::seeded(7);
    let d1 = route_key(&r, &s, "k", &mut rng);
    let d2 = route_key(&r, &s, "k", &mut rng);
    assert_eq!(d2.worker, d1.worker);
    assert_eq!(d2.branch, Some(Branch::OccupiedHit));
    // 2 in flight on the pinned worker: the third is placed again (min_load: the other one)
    let d3 = route_key(&r, &s, "k", &mut rng);
    assert_eq!(d3.branch, Some(Branch::CapRespill));
    assert_ne!(d3.worker, d1.worker);
    // the pin moved: with the others finished, later turns follow the new worker
    drop((d1, d2, d3));
    let d4 = route_key(&r, &s, "k", &mut rng);
    assert_eq!(d4.branch, Some(Branch::OccupiedHit));
    let moved_to = d4.worker;
    assert_eq!(f.stats[moved_to.0 as usize].pinned_keys(), 1);
}

#[test]
fn in_flight_threshold_keeps_the_pin_when_placement_agrees() {
    // cache_aware delegate with the same text: the placement finds the prefix on the pinned worker
    let f = Fleet::new(3);
    let s = f.snap(&[]);
    let r = router(PolicyKind::CacheAware, true, None);
    let mut rng = Rng::seeded(7);
    let text = "You are a helpful assistant. ".repeat(40);
    let pairs = [("x-smg-routing-key", &b"k"[..])];
    let h = HeaderList(&pairs);
    let req = RouteRequest {
        text: Some(&text),
        ..keyed(&h)
    };
    let held: Vec<_> = (0..2)
        .map(|_| r.route(&req, &s, T0, &mut rng).unwrap())
        .collect();
    let third = r.route(&req, &s, T0, &mut rng).unwrap();
    assert_eq!(third.branch, Some(Branch::CapRespill));
    assert_eq!(
        third.worker, held[0].worker,
        "placement picked the pinned worker again"
    );
    // a fourth concurrent request is over the threshold too: more than 2 in flight is allowed
    let fourth = r.route(&req, &s, T0, &mut rng).unwrap();
    assert_eq!(
        (fourth.worker, fourth.branch),
        (held[0].worker, Some(Branch::CapRespill))
    );
}

#[test]
fn pin_moves_only_to_a_worker_under_the_threshold() {
    let f = Fleet::new(2);
    let s = f.snap(&[]);
    // the override on round_robin (delegate): placements alternate w0, w1, w0, ...
    let r = sticky_rr();
    let mut rng = Rng::seeded(1);
    let mut held = Vec::new();
    let mut go = |held: &mut Vec<Decision>| {
        let d = route_key(&r, &s, "k", &mut rng);
        let out = (d.worker.0, d.branch.unwrap());
        held.push(d);
        out
    };
    assert_eq!(go(&mut held), (0, Branch::Vacant)); // rr -> w0
    assert_eq!(go(&mut held), (0, Branch::OccupiedHit)); // 2 in flight on w0
    // threshold: rr -> w1, which has 0 of the key's requests: the pin moves to w1
    assert_eq!(go(&mut held), (1, Branch::CapRespill));
    assert_eq!(go(&mut held), (1, Branch::OccupiedHit)); // 2 in flight on w1
    // threshold on w1: rr -> w0, but w0 has 2 of the key's requests: the request goes
    // there, the pin stays on w1
    assert_eq!(go(&mut held), (0, Branch::CapRespill));
    // threshold on w1 again: rr -> w1 itself: no move
    assert_eq!(go(&mut held), (1, Branch::CapRespill));
    drop(held);
    let next = route_key(&r, &s, "k", &mut rng);
    assert_eq!((next.worker.0, next.branch), (1, Some(Branch::OccupiedHit)));
    assert_eq!((f.stats[0].pinned_keys(), f.stats[1].pinned_keys()), (0, 1));
}

#[test]
fn other_traffic_never_triggers_the_threshold() {
    let f = Fleet::new(2);
    let s = f.snap(&[]);
    let r = router(PolicyKind::CacheAware, true, Some(AssignmentMode::Random));
    let mut rng = Rng::seeded(2);
    let k = route_key(&r, &s, "k", &mut rng);
    // pile other keys' requests onto the same worker via their own pins
    let mut others = Vec::new();
    for i in 0..200 {
        let d = route_key(&r, &s, &format!("other-{i}"), &mut rng);
        if d.worker == k.worker {
            others.push(d);
        }
    }
    assert!(others.len() > 10);
    let again = route_key(&r, &s, "k", &mut rng);
    assert_eq!(
        (again.worker, again.branch),
        (k.worker, Some(Branch::OccupiedHit))
    );
}

#[test]
fn manual_has_no_threshold() {
    let f = Fleet::new(3);
    let s = f.snap(&[]);
    let r = router(PolicyKind::Manual, false, Some(AssignmentMode::MinLoad));
    let mut rng = Rng::seeded(2);
    let held: Vec<_> = (0..6).map(|_| route_key(&r, &s, "k", &mut rng)).collect();
    assert!(held.iter().all(|d| d.worker == held[0].worker));
    assert!(
        held[1..]
            .iter()
            .all(|d| d.branch == Some(Branch::OccupiedHit))
    );
}

#[test]
fn leases_release_in_flight_counts() {
    let f = Fleet::new(1);
    let s = f.snap(&[]);
    let r = sticky_rr();
    let mut rng = Rng::seeded(1);
    let d = route_key(&r, &s, "k", &mut rng);
    let d2 = route_key(&r, &s, "k", &mut rng);
    assert_eq!(f.stats[0].in_flight(), 2);
    drop(d);
    drop(d2);
    assert_eq!(f.stats[0].in_flight(), 0);
    // the key's count went back to 0 too: two more requests do not hit the threshold
    let d = route_key(&r, &s, "k", &mut rng);
    let d2 = route_key(&r, &s, "k", &mut rng);
    assert_eq!(d2.branch, Some(Branch::OccupiedHit));
    drop((d, d2));
}

#[test]
fn a_forgotten_workers_requests_still_count_when_the_pin_comes_back() {
    // The override on round_robin over three workers: placements go w0, w1, w2, w0, ...
    let f = Fleet::new(3);
    let s = f.snap(&[]);
    let r = sticky_rr();
    let mut rng = Rng::seeded(1);
    let mut held = Vec::new();
    let mut go = |held: &mut Vec<Decision>| {
        let d = route_key(&r, &s, "k", &mut rng);
        let out = (d.worker.0, d.branch.unwrap());
        held.push(d);
        out
    };
    assert_eq!(go(&mut held), (0, Branch::Vacant));
    assert_eq!(go(&mut held), (0, Branch::OccupiedHit)); // 2 on w0
    assert_eq!(go(&mut held), (1, Branch::CapRespill)); // pin -> w1, w0 kept behind
    assert_eq!(go(&mut held), (1, Branch::OccupiedHit)); // 2 on w1
    assert_eq!(go(&mut held), (2, Branch::CapRespill)); // pin -> w2; w0 (2 in flight) dropped
    assert_eq!(go(&mut held), (2, Branch::OccupiedHit)); // 2 on w2
    // Threshold on w2; round robin picks w0, which still has 2 of the key's requests in
    // flight: the request goes there, but the pin must stay on w2.
    assert_eq!(go(&mut held), (0, Branch::CapRespill));
    // Threshold on w2 again; rr picks w1, which has 2 of the key's requests too: no move.
    assert_eq!(go(&mut held), (1, Branch::CapRespill));
    // the request that went to w0 counts too, although w0 is no longer remembered
    let scoped = crate::sticky::scoped_key("k", Some("m"), Leg::Regular);
    assert_eq!(r.pins.orphaned(scoped, 0), 3);
    drop(held);
    assert_eq!(r.pins.orphans(), 0);
    let next = route_key(&r, &s, "k", &mut rng);
    assert_eq!(next.branch, Some(Branch::OccupiedHit));
    assert_eq!(f.stats[2].pinned_keys(), 1);
}

use super::*;

#[test]
fn failover_adds_behind_and_returns_to_the_earlier_worker() {
    let f = Fleet::new(4);
    let r = manual();
    let mut rng = Rng::seeded(5);
    let a = route_key(&r, &f.snap(&[]), "k", &mut rng).worker;
    // a goes down: placed again, added behind a
    let s1 = f.snap(&[a.0]);
    let b = route_key(&r, &s1, "k", &mut rng);
    assert_eq!(b.branch, Some(Branch::OccupiedMiss));
    assert_ne!(b.worker, a);
    // b is now remembered: the next request hits it while a is down
    let again = route_key(&r, &s1, "k", &mut rng);
    assert_eq!(
        (again.worker, again.branch),
        (b.worker, Some(Branch::OccupiedHit))
    );
    // a is back: the key returns to it
    let back = route_key(&r, &f.snap(&[]), "k", &mut rng);
    assert_eq!((back.worker, back.branch), (a, Some(Branch::OccupiedHit)));
    // both down: the older (a) is dropped, b stays first
    let s2 = f.snap(&[a.0, b.worker.0]);
    let c = route_key(&r, &s2, "k", &mut rng);
    assert_eq!(c.branch, Some(Branch::OccupiedMiss));
    assert!(c.worker != a && c.worker != b.worker);
    let s3 = f.snap(&[]);
    assert_eq!(route_key(&r, &s3, "k", &mut rng).worker, b.worker);
    // a is forgotten: with b and c down, a is only reachable as a new placement
    assert_eq!(f.stats[b.worker.0 as usize].pinned_keys(), 1);
    assert_eq!(f.stats[a.0 as usize].pinned_keys(), 0);
}

#[test]
fn override_delegate_failover_makes_the_policy_pick_primary() {
    let f = Fleet::new(3);
    let r = sticky_rr();
    assert_eq!(r.assignment_mode(), AssignmentMode::Delegate);
    let mut rng = Rng::seeded(5);
    let a = route_key(&r, &f.snap(&[]), "k", &mut rng).worker;
    let p = route_key(&r, &f.snap(&[a.0]), "k", &mut rng);
    assert_eq!(p.branch, Some(Branch::OccupiedMiss));
    // a is back, but p is the primary now; a is only the failover candidate
    assert_eq!(route_key(&r, &f.snap(&[]), "k", &mut rng).worker, p.worker);
    assert_eq!(
        route_key(&r, &f.snap(&[p.worker.0]), "k", &mut rng).worker,
        a
    );
    assert_eq!(f.stats[p.worker.0 as usize].pinned_keys(), 1);
    assert_eq!(f.stats[a.0 as usize].pinned_keys(), 0);
}

#[test]
fn non_delegate_modes_under_override_add_behind() {
    let f = Fleet::new(3);
    let r = router(PolicyKind::CacheAware, true, Some(AssignmentMode::MinLoad));
    let mut rng = Rng::seeded(5);
    let a = route_key(&r, &f.snap(&[]), "k", &mut rng).worker;
    let b = route_key(&r, &f.snap(&[a.0]), "k", &mut rng).worker;
    assert_ne!(a, b);
    assert_eq!(route_key(&r, &f.snap(&[]), "k", &mut rng).worker, a);
}

#[test]
fn excluded_workers_are_skipped_and_the_key_fails_over() {
    let f = Fleet::new(3);
    let s = f.snap(&[]);
    let r = manual();
    let mut rng = Rng::seeded(4);
    let a = route_key(&r, &s, "k", &mut rng).worker;
    let pairs = [("x-smg-routing-key", &b"k"[..])];
    let h = HeaderList(&pairs);
    let exclude = [a];
    let retry = r
        .route(
            &RouteRequest {
                exclude: &exclude,
                ..keyed(&h)
            },
            &s,
            T0,
            &mut rng,
        )
        .unwrap();
    assert_ne!(retry.worker, a);
    assert_eq!(retry.branch, Some(Branch::OccupiedMiss));
    // the earlier worker stays first
    assert_eq!(route_key(&r, &s, "k", &mut rng).worker, a);
}

#[test]
fn removed_workers_are_forgotten_and_counted() {
    let f = Fleet::new(3);
    let r = manual();
    let mut rng = Rng::seeded(9);
    let a = route_key(&r, &f.snap(&[]), "k", &mut rng).worker;
    let rest: Vec<u32> = (0..3).filter(|i| *i != a.0).collect();
    let s = f.snap_of(&rest, &[]);
    let d = route_key(&r, &s, "k", &mut rng);
    assert_ne!(d.worker, a);
    assert_eq!(r.stats().evicted_worker_removed, 1);
    // re-adding a (same id) does not bring the key back: it was forgotten
    assert_eq!(route_key(&r, &f.snap(&[]), "k", &mut rng).worker, d.worker);
}

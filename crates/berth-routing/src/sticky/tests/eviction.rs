use super::*;

#[test]
fn idle_pins_are_swept_and_reuse_refreshes() {
    let f = Fleet::new(2);
    let s = f.snap(&[]);
    let r = Router::new(&RouterOptions {
        policy: PolicyKind::Manual,
        max_idle_secs: 100,
        eviction_interval_secs: 10,
        ..RouterOptions::default()
    })
    .unwrap();
    assert_eq!(r.eviction_interval(), Some(Duration::from_secs(10)));
    let mut rng = Rng::seeded(1);
    let pairs_old = [("x-smg-routing-key", &b"old"[..])];
    let pairs_new = [("x-smg-routing-key", &b"fresh"[..])];
    let (ho, hn) = (HeaderList(&pairs_old), HeaderList(&pairs_new));
    let w_old = r
        .route(&keyed(&ho), &s, Duration::from_secs(0), &mut rng)
        .unwrap()
        .worker;
    r.route(&keyed(&hn), &s, Duration::from_secs(0), &mut rng)
        .unwrap();
    // "fresh" is reused at t=60 (refresh), "old" is not
    r.route(&keyed(&hn), &s, Duration::from_secs(60), &mut rng)
        .unwrap();
    let sweep = |at: u64| -> usize {
        let mut removed = 0;
        loop {
            let st = r.sweep_step(Duration::from_secs(at), &s);
            removed += st.removed_idle;
            if st.finished {
                return removed;
            }
        }
    };
    assert_eq!(sweep(99), 0);
    assert_eq!(sweep(100), 1);
    assert_eq!(r.stats().pins, 1);
    assert_eq!(r.stats().evicted_idle, 1);
    assert_eq!(
        f.stats[w_old.0 as usize].pinned_keys() + f.stats[1 - w_old.0 as usize].pinned_keys(),
        1
    );
    assert_eq!(sweep(160), 1);
    assert_eq!(r.stats().pins, 0);
    // an evicted key is placed like a new key
    let d = r
        .route(&keyed(&ho), &s, Duration::from_secs(200), &mut rng)
        .unwrap();
    assert_eq!(d.branch, Some(Branch::Vacant));
}

#[test]
fn pins_with_requests_in_flight_are_not_swept() {
    let f = Fleet::new(1);
    let s = f.snap(&[]);
    let r = Router::new(&RouterOptions {
        policy: PolicyKind::Manual,
        max_idle_secs: 1,
        ..RouterOptions::default()
    })
    .unwrap();
    let mut rng = Rng::seeded(1);
    let held = route_key(&r, &s, "k", &mut rng);
    while !r.sweep_step(Duration::from_secs(1000), &s).finished {}
    assert_eq!(r.stats().pins, 1);
    drop(held);
    while !r.sweep_step(Duration::from_secs(1000), &s).finished {}
    assert_eq!(r.stats().pins, 0);
}

#[test]
fn zero_disables_eviction() {
    let f = Fleet::new(1);
    let s = f.snap(&[]);
    for (idle, interval) in [(0, 120), (14_400, 0)] {
        let r = Router::new(&RouterOptions {
            policy: PolicyKind::Manual,
            max_idle_secs: idle,
            eviction_interval_secs: interval,
            ..RouterOptions::default()
        })
        .unwrap();
        assert_eq!(r.eviction_interval(), None);
        let mut rng = Rng::seeded(1);
        drop(route_key(&r, &s, "k", &mut rng));
        while !r
            .sweep_step(Duration::from_secs(u32::MAX as u64), &s)
            .finished
        {}
        assert_eq!(r.stats().pins, 1);
    }
}

#[test]
fn capacity_bound_evicts_least_recently_used() {
    let f = Fleet::new(2);
    let s = f.snap(&[]);
    let r = Router::new(&RouterOptions {
        policy: PolicyKind::Manual,
        max_sticky_keys: 100,
        ..Default::default()
    })
    .unwrap();
    let mut rng = Rng::seeded(1);
    for i in 0..1000 {
        let pairs = [("x-smg-routing-key", format!("k{i}").into_bytes())];
        let p2: Vec<(&str, &[u8])> = pairs.iter().map(|(n, v)| (*n, v.as_slice())).collect();
        let h = HeaderList(&p2);
        let now = Duration::from_secs(i);
        drop(r.route(&keyed(&h), &s, now, &mut rng).unwrap());
        assert!(r.stats().pins <= 100);
    }
    assert_eq!(r.stats().pins, 100);
    assert_eq!(r.stats().evicted_capacity, 900);
    let pinned: u32 = f.stats.iter().map(|s| s.pinned_keys()).sum();
    assert_eq!(pinned, 100);
}

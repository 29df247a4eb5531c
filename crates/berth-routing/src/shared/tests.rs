//! The shared-store hooks: naming, reading, installing and dropping a pin from outside.

use std::sync::Arc;
use std::time::Duration;

use crate::key::HeaderList;
use crate::sticky::tests::keyed;
use crate::{
    Branch, Leg, PolicyKind, Rng, Router, RouterOptions, WorkerEntry, WorkerId, WorkerSnapshot,
    WorkerStats,
};

const T0: Duration = Duration::from_secs(1);

fn snap(stats: &[Arc<WorkerStats>], down: &[u32]) -> WorkerSnapshot {
    WorkerSnapshot::new(
        (0..stats.len() as u32)
            .map(|i| WorkerEntry {
                id: WorkerId(i),
                url: format!("http://w{i}:8000").into(),
                models: vec![Arc::from("m")],
                available: !down.contains(&i),
                stats: stats[i as usize].clone(),
            })
            .collect(),
    )
}

fn router(policy: PolicyKind, override_on: bool) -> Router {
    Router::new(&RouterOptions {
        policy,
        routing_key_override: override_on,
        ..RouterOptions::default()
    })
    .unwrap()
}

fn route(r: &Router, key: &str, s: &WorkerSnapshot) -> (WorkerId, Option<Branch>) {
    let h = [("x-smg-routing-key", key.as_bytes())];
    let d = r
        .route(&keyed(&HeaderList(&h)), s, T0, &mut Rng::seeded(7))
        .unwrap();
    (d.worker, d.branch)
}

#[test]
fn the_hash_is_scoped_as_the_table_scopes_pins() {
    let over = router(PolicyKind::Random, true);
    let a = over.pin_hash("k", Some("a"), Leg::Regular).unwrap();
    assert_ne!(Some(a), over.pin_hash("k", Some("b"), Leg::Regular));
    assert_ne!(Some(a), over.pin_hash("k", Some("a"), Leg::Decode));
    let manual = router(PolicyKind::Manual, false);
    assert_eq!(
        manual.pin_hash("k", Some("a"), Leg::Regular),
        manual.pin_hash("k", Some("b"), Leg::Regular)
    );
    assert_eq!(
        router(PolicyKind::ConsistentHashing, true).pin_hash("k", None, Leg::Regular),
        None
    );
    // two routers with the same settings name a key alike (replicas agree on the store key)
    assert_eq!(
        router(PolicyKind::Random, true).pin_hash("k", Some("a"), Leg::Regular),
        Some(a)
    );
}

#[test]
fn an_installed_pin_is_what_the_next_request_uses() {
    let stats: Vec<Arc<WorkerStats>> = (0..4).map(|_| Arc::default()).collect();
    let s = snap(&stats, &[]);
    let r = router(PolicyKind::Manual, false);
    let h = r.pin_hash("k", None, Leg::Regular).unwrap();
    assert_eq!(r.pinned(h), None);
    assert!(r.install_pin(h, &[WorkerId(2), WorkerId(3)], T0, &s));
    assert_eq!(r.pinned(h), Some(vec![WorkerId(2), WorkerId(3)]));
    assert_eq!(stats[2].pinned_keys(), 1);
    assert_eq!(route(&r, "k", &s), (WorkerId(2), Some(Branch::OccupiedHit)));
    // replacing moves the pinned-key count with the primary
    assert!(r.install_pin(h, &[WorkerId(1)], T0, &s));
    assert_eq!(r.pinned(h), Some(vec![WorkerId(1)]));
    assert_eq!((stats[2].pinned_keys(), stats[1].pinned_keys()), (0, 1));
    assert_eq!(route(&r, "k", &s), (WorkerId(1), Some(Branch::OccupiedHit)));
    assert_eq!(r.stats().pins, 1);
}

#[test]
fn workers_not_in_the_fleet_are_skipped_and_none_means_no_change() {
    let stats: Vec<Arc<WorkerStats>> = (0..2).map(|_| Arc::default()).collect();
    let s = snap(&stats, &[]);
    let r = router(PolicyKind::Manual, false);
    let h = r.pin_hash("k", None, Leg::Regular).unwrap();
    assert!(!r.install_pin(h, &[WorkerId(9)], T0, &s));
    assert_eq!(r.pinned(h), None);
    assert!(r.install_pin(h, &[WorkerId(9), WorkerId(1), WorkerId(1)], T0, &s));
    assert_eq!(r.pinned(h), Some(vec![WorkerId(1)]));
}

#[test]
fn a_dropped_pin_is_placed_anew_and_in_flight_counts_survive() {
    let stats: Vec<Arc<WorkerStats>> = (0..3).map(|_| Arc::default()).collect();
    let s = snap(&stats, &[]);
    let r = router(PolicyKind::Random, true);
    let h = r.pin_hash("k", Some("m"), Leg::Regular).unwrap();
    assert!(r.install_pin(h, &[WorkerId(0)], T0, &s));
    let hh = [("x-smg-routing-key", &b"k"[..])];
    let d = r
        .route(&keyed(&HeaderList(&hh)), &s, T0, &mut Rng::seeded(1))
        .unwrap();
    assert_eq!(d.worker, WorkerId(0));
    assert!(r.drop_pin(h, &s));
    assert!(!r.drop_pin(h, &s));
    assert_eq!(
        (r.pinned(h), r.stats().pins, stats[0].pinned_keys()),
        (None, 0, 0)
    );
    // the request in flight still counts on worker 0 when the pin comes back there
    assert!(r.install_pin(h, &[WorkerId(0)], T0, &s));
    drop(d);
    assert_eq!(r.pins.orphans(), 0);
    let e = r.pins.entries();
    assert_eq!(e[0].in_flight, [0, 0]);
    assert_eq!(route(&r, "k", &s).1, Some(Branch::OccupiedHit));
}

#[test]
fn idle_timeouts_are_bounded_and_cleared_with_their_pins() {
    use crate::IdleTimeoutOutcome as O;
    let r = Router::new(&RouterOptions {
        policy: PolicyKind::Manual,
        max_sticky_keys: 2,
        ..RouterOptions::default()
    })
    .unwrap();
    let stats: Vec<_> = (0..2).map(|_| Arc::new(WorkerStats::default())).collect();
    let s = snap(&stats, &[]);
    let h = |k: &str| r.pin_hash(k, None, Leg::Regular).unwrap();
    assert_eq!(r.set_idle_timeout(h("a"), 30), O::NotPinned);
    route(&r, "a", &s);
    route(&r, "b", &s);
    assert_eq!(r.set_idle_timeout(h("a"), 30), O::Set);
    assert_eq!(r.set_idle_timeout(h("b"), 30), O::Set);
    assert_eq!(r.idle_timeouts(), 2);
    // A third key evicts a pin at the table's bound; its stale period is cleared when the
    // side map is full and another pin binds.
    route(&r, "c", &s);
    assert_eq!(r.stats().pins, 2);
    assert_eq!(r.set_idle_timeout(h("c"), 30), O::Set);
    assert_eq!(r.idle_timeouts(), 2);
    // Dropping a pin drops its period.
    assert!(r.drop_pin(h("c"), &s));
    assert_eq!(r.idle_timeouts(), 1);
    // The sweep honours the period (shorter than the default) and forgets it with the pin.
    let mut removed = 0;
    loop {
        let step = r.sweep_step(T0 + Duration::from_secs(31), &s);
        removed += step.removed_idle;
        if step.finished {
            break;
        }
    }
    assert_eq!(removed, 1);
    assert_eq!(r.idle_timeouts(), 0);
    assert_eq!(r.stats().pins, 0);
}

//! The pinned path, one SPEC.md section 2 sentence at a time.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;

use crate::key::HeaderList;
use crate::{
    AssignmentMode, Branch, Decision, Error, KeySource, Leg, PolicyKind, Rng, RouteRequest, Router,
    RouterOptions, WorkerEntry, WorkerId, WorkerSnapshot, WorkerStats,
};

const T0: Duration = Duration::from_secs(1);
const NO_HEADERS: HeaderList<'static> = HeaderList(&[]);

/// A fleet of `n` workers serving "m"; `down` are unavailable. Stats survive rebuilds.
struct Fleet {
    stats: Vec<Arc<WorkerStats>>,
    models: Vec<Vec<&'static str>>,
}

impl Fleet {
    fn new(n: usize) -> Self {
        Self {
            stats: (0..n).map(|_| Arc::default()).collect(),
            models: vec![vec!["m"]; n],
        }
    }
    fn snap(&self, down: &[u32]) -> WorkerSnapshot {
        self.snap_of(&(0..self.stats.len() as u32).collect::<Vec<_>>(), down)
    }
    /// Only the workers in `present` are in the fleet.
    fn snap_of(&self, present: &[u32], down: &[u32]) -> WorkerSnapshot {
        WorkerSnapshot::new(
            present
                .iter()
                .map(|&i| WorkerEntry {
                    id: WorkerId(i),
                    url: format!("http://w{i}:8000").into(),
                    models: self.models[i as usize]
                        .iter()
                        .map(|m| Arc::from(*m))
                        .collect(),
                    available: !down.contains(&i),
                    stats: self.stats[i as usize].clone(),
                })
                .collect(),
        )
    }
}

fn router(policy: PolicyKind, override_on: bool, mode: Option<AssignmentMode>) -> Router {
    Router::new(&RouterOptions {
        policy,
        routing_key_override: override_on,
        assignment_mode: mode,
        ..RouterOptions::default()
    })
    .unwrap()
}

fn manual() -> Router {
    router(PolicyKind::Manual, false, None)
}

fn sticky_rr() -> Router {
    // the override on round_robin: delegate placements are easy to predict
    router(PolicyKind::RoundRobin, true, None)
}

fn keyed<'a>(headers: &'a HeaderList<'a>) -> RouteRequest<'a> {
    RouteRequest {
        rid: None,
        headers,
        model: Some("m"),
        leg: Leg::Regular,
        text: None,
        tokens: None,
        exclude: &[],
    }
}

fn route_key(r: &Router, snap: &WorkerSnapshot, key: &str, rng: &mut Rng) -> Decision {
    let pairs = [("x-smg-routing-key", key.as_bytes())];
    let h = HeaderList(&pairs);
    r.route(&keyed(&h), snap, T0, rng).unwrap()
}

fn route_rid(r: &Router, snap: &WorkerSnapshot, rid: &str, model: &str, rng: &mut Rng) -> Decision {
    let req = RouteRequest {
        rid: Some(rid),
        model: Some(model),
        ..keyed(&NO_HEADERS)
    };
    r.route(&req, snap, T0, rng).unwrap()
}

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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn never_an_unavailable_worker(
        down in proptest::collection::vec(0u32..6, 0..6),
        keys in proptest::collection::vec(0u8..20, 1..60),
        policy in prop::sample::select(PolicyKind::ALL.to_vec()),
        override_on: bool,
        seed: u64,
    ) {
        let f = Fleet::new(6);
        let r = router(policy, override_on, None);
        let mut rng = Rng::seeded(seed);
        let mut held = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            // availability changes over time
            let d: Vec<u32> = if i % 2 == 0 { down.clone() } else { vec![] };
            let s = f.snap(&d);
            let key = format!("k{k}");
            let pairs = [("x-smg-routing-key", key.as_bytes())];
            let h = HeaderList(&pairs);
            match r.route(&keyed(&h), &s, T0, &mut rng) {
                Ok(dec) => {
                    prop_assert!(!d.contains(&dec.worker.0));
                    held.push(dec);
                }
                Err(e) => {
                    prop_assert_eq!(e, Error::NoAvailableWorkers);
                    prop_assert!((0..6).all(|w| d.contains(&w)));
                }
            }
        }
    }

    #[test]
    fn adding_workers_never_moves_a_pin(
        keys in proptest::collection::vec("[a-z]{1,8}", 1..40),
        sticky_override: bool,
        seed: u64,
    ) {
        let f = Fleet::new(8);
        let r = if sticky_override { sticky_rr() } else { manual() };
        let mut rng = Rng::seeded(seed);
        let small = f.snap_of(&[0, 1, 2], &[]);
        let before: Vec<WorkerId> = keys.iter().map(|k| route_key(&r, &small, k, &mut rng).worker).collect();
        let big = f.snap(&[]);
        for (k, w) in keys.iter().zip(before) {
            prop_assert_eq!(route_key(&r, &big, k, &mut rng).worker, w);
        }
    }
}

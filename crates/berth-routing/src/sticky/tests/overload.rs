//! Worker overload protection on the router: placement leaves out workers at or above SMG's
//! thresholds while another is under both; a pinned key still reaches its own worker; all over
//! places on the least-loaded worker or, with `--worker-overload-shed`, refuses.

use super::*;
use crate::{OverloadConfig, WorkerLoad, WorkerLoads};

fn loads(per_worker: &[(u32, u32, f64)]) -> WorkerLoads {
    WorkerLoads::new(
        per_worker
            .iter()
            .map(|&(w, waiting, usage)| {
                (
                    WorkerId(w),
                    WorkerLoad {
                        waiting_reqs: waiting,
                        token_usage: usage,
                        in_flight: 0,
                        awaiting: 0,
                    },
                )
            })
            .collect(),
    )
}

fn with_overload(policy: PolicyKind, overload: OverloadConfig) -> Router {
    Router::new(&RouterOptions {
        policy,
        overload,
        ..RouterOptions::default()
    })
    .unwrap()
}

fn route_loaded(
    r: &Router,
    snap: &WorkerSnapshot,
    key: Option<&str>,
    l: &WorkerLoads,
    rng: &mut Rng,
) -> Result<Decision, Error> {
    let pairs = key.map(|k| [("x-smg-routing-key", k.as_bytes())]);
    let h = HeaderList(pairs.as_ref().map_or(&[][..], |p| &p[..]));
    let req = RouteRequest {
        loads: Some(l),
        feedback_read: false,
        ..keyed(&h)
    };
    r.route(&req, snap, T0, rng)
}

#[test]
fn placement_leaves_out_an_overloaded_worker_while_another_is_under_both() {
    let fleet = Fleet::new(3);
    let snap = fleet.snap(&[]);
    let r = with_overload(PolicyKind::Random, OverloadConfig::default());
    let l = loads(&[(0, 8, 0.1), (1, 0, 0.8), (2, 7, 0.79)]);
    let mut rng = Rng::seeded(1);
    for _ in 0..50 {
        let d = route_loaded(&r, &snap, None, &l, &mut rng).unwrap();
        assert_eq!(d.worker, WorkerId(2));
    }
    assert_eq!(r.stats().overload_vetoes, 50);
    // without loads (nothing polled yet) every worker is used
    let mut seen = [false; 3];
    for _ in 0..60 {
        let d = r.route(&keyed(&NO_HEADERS), &snap, T0, &mut rng).unwrap();
        seen[d.worker.0 as usize] = true;
    }
    assert_eq!(seen, [true; 3]);
    // switched off: the overloaded workers take requests again
    let off = with_overload(
        PolicyKind::Random,
        OverloadConfig {
            enabled: false,
            ..OverloadConfig::default()
        },
    );
    let mut seen = [false; 3];
    for _ in 0..60 {
        let d = route_loaded(&off, &snap, None, &l, &mut rng).unwrap();
        seen[d.worker.0 as usize] = true;
    }
    assert_eq!(seen, [true; 3]);
    assert_eq!(off.stats().overload_vetoes, 0);
}

#[test]
fn a_pinned_key_keeps_its_overloaded_worker_and_new_keys_avoid_it() {
    let fleet = Fleet::new(2);
    let snap = fleet.snap(&[]);
    let r = with_overload(PolicyKind::Manual, OverloadConfig::default());
    let mut rng = Rng::seeded(2);
    let calm = loads(&[(0, 0, 0.1), (1, 0, 0.1)]);
    let first = route_loaded(&r, &snap, Some("k"), &calm, &mut rng).unwrap();
    drop(first.lease);
    let pinned = first.worker;
    let other = WorkerId(1 - pinned.0);
    let busy = loads(&[(pinned.0, 20, 0.9), (other.0, 0, 0.1)]);
    let again = route_loaded(&r, &snap, Some("k"), &busy, &mut rng).unwrap();
    assert_eq!(
        (again.worker, again.branch),
        (pinned, Some(Branch::OccupiedHit))
    );
    for i in 0..20 {
        let d = route_loaded(&r, &snap, Some(&format!("new{i}")), &busy, &mut rng).unwrap();
        assert_eq!((d.worker, d.branch), (other, Some(Branch::Vacant)));
    }
    assert_eq!(r.stats().overload_vetoes, 20, "the pinned hit is no veto");
}

#[test]
fn all_over_goes_to_the_least_loaded_worker_or_is_shed() {
    let fleet = Fleet::new(3);
    let snap = fleet.snap(&[]);
    let all_over = loads(&[(0, 9, 0.9), (1, 8, 0.2), (2, 0, 0.85)]);
    fleet.stats[0].begin();
    fleet.stats[2].begin();
    fleet.stats[2].begin();
    let r = with_overload(PolicyKind::Random, OverloadConfig::default());
    let mut rng = Rng::seeded(3);
    for _ in 0..20 {
        let d = route_loaded(&r, &snap, None, &all_over, &mut rng).unwrap();
        assert_eq!(d.worker, WorkerId(1), "fewest requests in flight");
    }
    assert_eq!(r.stats().overload_all_over, 20);
    let shed = with_overload(
        PolicyKind::Random,
        OverloadConfig {
            shed: true,
            ..OverloadConfig::default()
        },
    );
    let e = route_loaded(&shed, &snap, None, &all_over, &mut rng).unwrap_err();
    assert_eq!(e, Error::WorkerOverloadShed);
    // a pinned key is shed too: every worker it could use is over
    let e = route_loaded(&shed, &snap, Some("k"), &all_over, &mut rng).unwrap_err();
    assert_eq!(e, Error::WorkerOverloadShed);
    assert_eq!(shed.stats().overload_shed, 2);
    // one worker back under the thresholds takes everything
    let one_under = loads(&[(0, 9, 0.9), (1, 8, 0.2), (2, 0, 0.5)]);
    let d = route_loaded(&shed, &snap, None, &one_under, &mut rng).unwrap();
    assert_eq!(d.worker, WorkerId(2));
}

#[test]
fn a_ttft_pin_never_moves_onto_an_overloaded_worker() {
    // ttft_aware: a pinned key whose worker is clearly slower moves, but not to a worker the
    // protection left out; with every other worker over, it stays
    let fleet = Fleet::new(2);
    let snap = fleet.snap(&[]);
    let r = with_overload(PolicyKind::TtftAware, OverloadConfig::default());
    let mut rng = Rng::seeded(4);
    let text = "x".repeat(400);
    fn req<'a>(text: &'a str, l: &'a WorkerLoads, h: &'a HeaderList<'a>) -> RouteRequest<'a> {
        RouteRequest {
            text: Some(text),
            stream: Some(true),
            loads: Some(l),
            feedback_read: false,
            ..keyed(h)
        }
    }
    let calm = loads(&[(0, 0, 0.1), (1, 0, 0.1)]);
    let pairs = [("x-smg-routing-key", &b"k"[..])];
    let h = HeaderList(&pairs);
    let first = r
        .route(&req(&text, &calm, &h), &snap, T0, &mut rng)
        .unwrap();
    let pinned = first.worker;
    let other = WorkerId(1 - pinned.0);
    // pile unanswered prefill on the pinned worker so staying is predicted clearly slower
    let mut held = vec![first];
    for i in 0..40 {
        let big = "y".repeat(40_000 + i);
        let only = loads(&[(other.0, 9, 0.1)]);
        let d = r
            .route(
                &RouteRequest {
                    text: Some(&big),
                    stream: Some(true),
                    loads: Some(&only),
                    feedback_read: false,
                    ..keyed(&NO_HEADERS)
                },
                &snap,
                T0,
                &mut rng,
            )
            .unwrap();
        assert_eq!(d.worker, pinned, "the other worker is vetoed");
        held.push(d);
    }
    let other_over = loads(&[(other.0, 9, 0.1)]);
    let d = r
        .route(&req(&text, &other_over, &h), &snap, T0, &mut rng)
        .unwrap();
    assert_eq!((d.worker, d.branch), (pinned, Some(Branch::OccupiedHit)));
    // the same turn with the other worker under the thresholds moves
    let d = r
        .route(&req(&text, &calm, &h), &snap, T0, &mut rng)
        .unwrap();
    assert_eq!((d.worker, d.branch), (other, Some(Branch::TtftMove)));
}

#[test]
fn bad_thresholds_are_refused_naming_the_flag() {
    for (overload, flag) in [
        (
            OverloadConfig {
                waiting_requests: 0,
                ..OverloadConfig::default()
            },
            "--worker-overload-waiting-requests",
        ),
        (
            OverloadConfig {
                token_usage: 0.0,
                ..OverloadConfig::default()
            },
            "--worker-overload-token-usage",
        ),
        (
            OverloadConfig {
                token_usage: 1.5,
                ..OverloadConfig::default()
            },
            "--worker-overload-token-usage",
        ),
    ] {
        let e = Router::new(&RouterOptions {
            overload,
            ..RouterOptions::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains(flag), "{e}");
    }
}

#[test]
fn ttft_policies_screen_on_the_queue_only() {
    // KV usage over the threshold on worker 0 vetoes nothing under ttft_aware and agentic (they
    // price KV occupancy themselves); its waiting queue does
    for policy in [PolicyKind::TtftAware, PolicyKind::Agentic] {
        let fleet = Fleet::new(2);
        let snap = fleet.snap(&[]);
        let r = with_overload(policy, OverloadConfig::default());
        let mut rng = Rng::seeded(6);
        let full = loads(&[(0, 0, 1.0), (1, 0, 0.1)]);
        let mut seen = [0u32; 2];
        for i in 0..40 {
            let text = format!("{i} {}", "z".repeat(200));
            let req = RouteRequest {
                text: Some(&text),
                loads: Some(&full),
                feedback_read: false,
                ..keyed(&NO_HEADERS)
            };
            seen[r.route(&req, &snap, T0, &mut rng).unwrap().worker.0 as usize] += 1;
        }
        assert!(seen[0] > 0 && seen[1] > 0, "{policy:?}: {seen:?}");
        assert_eq!(r.stats().overload_vetoes, 0);
        let queued = loads(&[(0, 8, 0.1), (1, 0, 0.1)]);
        for i in 0..10 {
            let text = format!("q{i} {}", "z".repeat(200));
            let req = RouteRequest {
                text: Some(&text),
                loads: Some(&queued),
                feedback_read: false,
                ..keyed(&NO_HEADERS)
            };
            assert_eq!(
                r.route(&req, &snap, T0, &mut rng).unwrap().worker,
                WorkerId(1)
            );
        }
        assert_eq!(r.stats().overload_vetoes, 10);
    }
}

#[test]
fn a_worker_under_at_the_round_takes_only_a_queue_of_requests_until_the_next() {
    // the round: W0 under both thresholds, W1 over on KV usage, W2 on its queue; nothing in
    // flight through us then
    let fleet = Fleet::new(3);
    let snap = fleet.snap(&[]);
    let round = loads(&[(0, 0, 0.1), (1, 0, 0.9), (2, 9, 0.1)]);
    let r = with_overload(PolicyKind::CacheAware, OverloadConfig::default());
    let mut rng = Rng::seeded(4);
    let mut held = Vec::new();
    let mut per_worker = [0u32; 3];
    for _ in 0..24 {
        let d = route_loaded(&r, &snap, None, &round, &mut rng).unwrap();
        per_worker[d.worker.0 as usize] += 1;
        held.push(d.lease); // still in flight
    }
    // SMG's rule alone sent all 24 to W0 until the next round; the 8 sent since count as
    // its queue, then every worker is over and the fewest in flight take the rest
    // (W1 and W2 catch up to W0's 8 in flight first)
    assert_eq!(per_worker, [8, 8, 8]);
    assert_eq!(r.stats().overload_vetoes, 8);
    drop(held);
}

#[test]
fn requests_answering_since_the_round_do_not_make_a_worker_overloaded() {
    // a round taken before any traffic: every worker under, nothing in flight through us
    // (the first poll interval of every run); each request placed since has had its first
    // byte and is decoding, held in flight: no worker is queueing, so nothing is vetoed
    let fleet = Fleet::new(3);
    let snap = fleet.snap(&[]);
    let idle = loads(&[(0, 0, 0.1), (1, 0, 0.1), (2, 0, 0.1)]);
    let r = with_overload(PolicyKind::CacheAware, OverloadConfig::default());
    let mut rng = Rng::seeded(4);
    let mut held = Vec::new();
    for _ in 0..30 {
        let mut d = route_loaded(&r, &snap, None, &idle, &mut rng).unwrap();
        d.lease.first_byte(T0, true);
        held.push(d.lease);
    }
    assert_eq!(r.stats().overload_vetoes, 0);
    assert_eq!(r.stats().overload_all_over, 0);
    // the same 30 still awaiting their first byte are queued: 8 a worker, then all over
    let r = with_overload(PolicyKind::CacheAware, OverloadConfig::default());
    let mut waiting = Vec::new();
    for _ in 0..30 {
        waiting.push(
            route_loaded(&r, &snap, None, &idle, &mut rng)
                .unwrap()
                .lease,
        );
    }
    assert!(r.stats().overload_all_over > 0);
    drop((held, waiting));
}

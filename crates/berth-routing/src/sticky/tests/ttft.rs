//! `ttft_aware` as scripted sequences on the pure router: no clock, no IO. Prompts are text at
//! the default 4 characters per token; the prior is 10 ms + 0.1 ms per token + 0.5 ms per
//! decoding request, the move rule set to `stay > 1.5 x best other + 100 ms` (the defaults are
//! stricter) once per 30 s.

use super::*;
use crate::{BodyPath, TtftConfig};

fn ttft() -> Router {
    Router::new(&RouterOptions {
        policy: PolicyKind::TtftAware,
        ttft: TtftConfig {
            move_factor: 1.5,
            move_margin_ms: 100.0,
            ..TtftConfig::default()
        },
        ..RouterOptions::default()
    })
    .unwrap()
}

/// The `agentic` policy with its defaults (its scripted sequences are in `agentic*.rs`).
pub(super) fn agentic() -> Router {
    router(PolicyKind::Agentic, false, None)
}

/// What `r`'s time-to-first-token policy evaluates for a turn of session `key` at `now` on
/// workers 0 and 1.
pub(super) fn evaluate_key(
    r: &Router,
    snap: &WorkerSnapshot,
    key: &str,
    now: Duration,
) -> crate::policy::ttft::Evaluation {
    let pick = crate::policy::PickRequest {
        model: Some("m"),
        key: Some(key.as_bytes()),
        now,
        ..Default::default()
    };
    r.policy
        .ttft()
        .unwrap()
        .evaluate(&pick, snap, &[WorkerId(0), WorkerId(1)])
}

/// `tokens` tokens of text no other call shares (4 characters each, 32-byte aligned).
pub(super) fn fresh(tag: &str, tokens: usize) -> String {
    let unit = format!("{tag:<16}").replace(' ', "_");
    unit.repeat(tokens * 4 / unit.len() + 1)[..tokens * 4].to_owned()
}

pub(super) fn route(
    r: &Router,
    snap: &WorkerSnapshot,
    key: Option<&str>,
    text: &str,
    exclude: &[WorkerId],
    now: Duration,
    rng: &mut Rng,
) -> Decision {
    let pairs = key.map(|k| [("x-smg-routing-key", k.as_bytes())]);
    let h = HeaderList(pairs.as_ref().map_or(&[][..], |p| &p[..]));
    let req = RouteRequest {
        text: Some(text),
        exclude,
        stream: Some(true),
        loads: None,
        feedback_read: false,
        ..keyed(&h)
    };
    r.route(&req, snap, now, rng).unwrap()
}

/// Every worker but `w` (to force placements onto `w`).
pub(super) fn all_but(w: WorkerId, n: u32) -> Vec<WorkerId> {
    (0..n).map(WorkerId).filter(|x| *x != w).collect()
}

#[test]
fn an_idle_worker_gets_the_next_new_session() {
    for seed in 0..20 {
        let f = Fleet::new(4);
        let snap = f.snap(&[]);
        let r = ttft();
        let mut rng = Rng::seeded(seed);
        // three long sessions are prefilling, one per worker it lands on
        let held: Vec<Decision> = (0..3)
            .map(|i| {
                route(
                    &r,
                    &snap,
                    None,
                    &fresh(&format!("s{i}"), 2000),
                    &[],
                    T0,
                    &mut rng,
                )
            })
            .collect();
        let busy: Vec<WorkerId> = held.iter().map(|d| d.worker).collect();
        let mut distinct = busy.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 3, "seed {seed}: {busy:?}");
        let next = route(&r, &snap, None, &fresh("new", 500), &[], T0, &mut rng);
        assert!(!busy.contains(&next.worker), "seed {seed}");
        assert_eq!(next.branch, Some(Branch::NoRoutingId));
    }
}

#[test]
fn the_holder_of_a_prefix_wins_when_queues_are_equal() {
    for seed in 0..20 {
        let f = Fleet::new(4);
        let snap = f.snap(&[]);
        let r = ttft();
        let mut rng = Rng::seeded(seed);
        let system = fresh("system prompt", 1000);
        let mut d = route(&r, &snap, None, &system, &[], T0, &mut rng);
        let holder = d.worker;
        d.lease.first_byte(T0, false);
        drop(d);
        // every queue is empty again; a session starting with that prompt goes to its holder
        let session = format!("{system}{}", fresh("user asks", 100));
        assert_eq!(
            route(&r, &snap, None, &session, &[], T0, &mut rng).worker,
            holder
        );
    }
}

#[test]
fn ties_break_at_random_never_by_worker_order() {
    let f = Fleet::new(4);
    let snap = f.snap(&[]);
    let r = ttft();
    let mut rng = Rng::seeded(5);
    let mut seen = [0u32; 4];
    for i in 0..200 {
        let d = route(
            &r,
            &snap,
            None,
            &fresh(&format!("t{i}"), 50),
            &[],
            T0,
            &mut rng,
        );
        seen[d.worker.0 as usize] += 1;
    }
    assert!(seen.iter().all(|&n| n > 20), "{seen:?}");
}

#[test]
fn keys_are_pinned_and_keyless_requests_are_never_refused() {
    let f = Fleet::new(3);
    let snap = f.snap(&[]);
    let r = ttft();
    let mut rng = Rng::seeded(2);
    let first = route(&r, &snap, Some("conv"), &fresh("a", 100), &[], T0, &mut rng);
    assert_eq!(first.branch, Some(Branch::Vacant));
    let again = route(&r, &snap, Some("conv"), &fresh("a", 120), &[], T0, &mut rng);
    assert_eq!(
        (again.worker, again.branch),
        (first.worker, Some(Branch::OccupiedHit))
    );
    let req = RouteRequest {
        text: None,
        ..keyed(&NO_HEADERS)
    };
    assert!(r.route(&req, &snap, T0, &mut rng).is_ok());
}

/// Queues `n` held prefills of 1000 tokens on `w` (placements forced there).
fn load(
    r: &Router,
    snap: &WorkerSnapshot,
    w: WorkerId,
    n: usize,
    now: Duration,
    rng: &mut Rng,
) -> Vec<Decision> {
    (0..n)
        .map(|i| {
            static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let t = fresh(&format!("load {n} {i}"), 1000);
            let d = route(r, snap, None, &t, &all_but(w, 4), now, rng);
            assert_eq!(d.worker, w);
            d
        })
        .collect()
}

#[test]
fn a_pin_moves_only_past_the_margin_and_not_twice_within_the_interval() {
    let f = Fleet::new(4);
    let snap = f.snap(&[]);
    let r = ttft();
    let mut rng = Rng::seeded(7);
    // turn 1: 1000 tokens, pinned to `a`
    let t1 = fresh("conversation", 1000);
    let mut d = route(&r, &snap, Some("k"), &t1, &[], T0, &mut rng);
    let a = d.worker;
    d.lease.first_byte(T0, false);
    drop(d);
    // 2000 tokens queued on `a`: staying costs 10 + 0.1 x (2000 + 100) = 220 ms, moving
    // 10 + 0.1 x 1100 = 120 ms; 220 < 1.5 x 120 + 100 = 280, so the key stays
    let held_a = load(&r, &snap, a, 2, T0, &mut rng);
    let t2 = format!("{t1}{}", fresh("turn two", 100));
    let d = route(&r, &snap, Some("k"), &t2, &[], T0, &mut rng);
    assert_eq!((d.worker, d.branch), (a, Some(Branch::OccupiedHit)));
    drop(d);
    // 3000 queued: 10 + 0.1 x 3200 = 330 > 1.5 x (10 + 0.1 x 1200) + 100 = 295: it moves
    let mut held_a = held_a;
    held_a.extend(load(&r, &snap, a, 1, T0, &mut rng));
    let t3 = format!("{t2}{}", fresh("turn three", 100));
    let d = route(&r, &snap, Some("k"), &t3, &[], T0, &mut rng);
    let b = d.worker;
    assert_ne!(b, a);
    assert_eq!(d.branch, Some(Branch::TtftMove));
    drop(d);
    // the new worker is busier still, but the key moved less than 30 s ago: it stays
    let held_b = load(&r, &snap, b, 6, T0, &mut rng);
    let t4 = format!("{t3}{}", fresh("turn four", 100));
    let d = route(&r, &snap, Some("k"), &t4, &[], T0, &mut rng);
    assert_eq!((d.worker, d.branch), (b, Some(Branch::OccupiedHit)));
    drop(d);
    // 31 s later, with the same queue (sent then), it may move again
    drop(held_b);
    drop(held_a);
    let later = T0 + Duration::from_secs(31);
    let _held_b = load(&r, &snap, b, 6, later, &mut rng);
    let t5 = format!("{t4}{}", fresh("turn five", 100));
    let d = route(&r, &snap, Some("k"), &t5, &[], later, &mut rng);
    assert_ne!(d.worker, b);
    assert_eq!(d.branch, Some(Branch::TtftMove));
}

#[test]
fn a_moved_key_keeps_its_old_worker_as_failover() {
    let f = Fleet::new(2);
    let snap = f.snap(&[]);
    let r = ttft();
    let mut rng = Rng::seeded(3);
    let t1 = fresh("failover conversation", 1000);
    let d = route(&r, &snap, Some("k"), &t1, &[], T0, &mut rng);
    let a = d.worker;
    drop(d);
    let other = WorkerId(1 - a.0);
    let held: Vec<Decision> = (0..5)
        .map(|i| {
            let t = fresh(&format!("load {i}"), 1000);
            route(&r, &snap, None, &t, &[other], T0, &mut rng)
        })
        .collect();
    let t2 = format!("{t1}{}", fresh("next", 100));
    let d = route(&r, &snap, Some("k"), &t2, &[], T0, &mut rng);
    assert_eq!((d.worker, d.branch), (other, Some(Branch::TtftMove)));
    drop(d);
    drop(held);
    // the new primary goes down: the key returns to its old worker
    let down = f.snap(&[other.0]);
    let d = route(&r, &down, Some("k"), &t2, &[], T0, &mut rng);
    assert_eq!((d.worker, d.branch), (a, Some(Branch::OccupiedHit)));
}

#[test]
fn the_body_is_read_only_when_the_decision_needs_the_text() {
    let f = Fleet::new(3);
    let snap = f.snap(&[]);
    let r = ttft();
    let mut rng = Rng::seeded(1);
    let pairs = [("x-smg-routing-key", &b"conv"[..])];
    let h = HeaderList(&pairs);
    let path = |r: &Router| r.request_body_path(&h, false, false, &snap, T0);
    // a new key needs the text
    assert_eq!(path(&r), BodyPath::Buffered("ttft_text"));
    let d = route(&r, &snap, Some("conv"), &fresh("c", 500), &[], T0, &mut rng);
    let pinned = d.worker;
    drop(d);
    // pinned, its worker's queue no worse than the others': streamed unread
    assert_eq!(path(&r), BodyPath::Streamed("ttft_pinned"));
    // its worker's queue clearly worse: read it, the pin may move
    let _held = load(&r, &snap, pinned, 4, T0, &mut rng);
    assert_eq!(path(&r), BodyPath::Buffered("ttft_text"));
    // keyless requests need the text; a token hint or the override decide as for cache_aware
    assert_eq!(
        r.request_body_path(&NO_HEADERS, false, false, &snap, T0),
        BodyPath::Buffered("ttft_text")
    );
    assert_eq!(
        r.request_body_path(&h, true, false, &snap, T0),
        BodyPath::Streamed("routing_tokens_hint")
    );
    assert_eq!(
        r.request_body_path(&h, false, true, &snap, T0),
        BodyPath::Buffered("model_selection")
    );
    let over = Router::new(&RouterOptions {
        policy: PolicyKind::TtftAware,
        routing_key_override: true,
        ..RouterOptions::default()
    })
    .unwrap();
    assert_eq!(
        over.request_body_path(&h, false, false, &snap, T0),
        BodyPath::Buffered("routing_key_override")
    );
}

#[test]
fn a_request_routed_without_its_body_stays_on_its_pin() {
    let f = Fleet::new(3);
    let snap = f.snap(&[]);
    let r = ttft();
    let mut rng = Rng::seeded(4);
    let d = route(&r, &snap, Some("conv"), &fresh("c", 500), &[], T0, &mut rng);
    let pinned = d.worker;
    drop(d);
    let _held = load(&r, &snap, pinned, 8, T0, &mut rng);
    let pairs = [("x-smg-routing-key", &b"conv"[..])];
    let h = HeaderList(&pairs);
    let d = r.route(&keyed(&h), &snap, T0, &mut rng).unwrap();
    assert_eq!((d.worker, d.branch), (pinned, Some(Branch::OccupiedHit)));
}

#[test]
fn first_bytes_teach_the_worker_its_cost() {
    let f = Fleet::new(1);
    let snap = f.snap(&[]);
    let r = ttft();
    let mut rng = Rng::seeded(8);
    let prior = crate::TtftConfig::default().prior;
    for i in 0..100 {
        let tokens = 200 + (i * 97) % 2000;
        let mut d = route(
            &r,
            &snap,
            None,
            &fresh(&format!("p{i}"), tokens),
            &[],
            T0,
            &mut rng,
        );
        // the worker prefills at 0.4 ms a token, four times the prior
        let ttft = Duration::from_secs_f64((10.0 + 0.4 * tokens as f64) / 1000.0);
        d.lease.first_byte(T0 + ttft, true);
    }
    let fleet = r.stats().ttft_fleet.unwrap();
    assert!((fleet.per_token_ms - 0.4).abs() < 0.04, "{fleet:?}");
    let t = r.policy.ttft().unwrap();
    assert_eq!(t.state(&f.stats[0]).model(fleet), fleet);
    // a response that is not a stream teaches nothing
    let r2 = ttft();
    let mut d = route(&r2, &snap, None, &fresh("x", 1000), &[], T0, &mut rng);
    d.lease.first_byte(T0 + Duration::from_secs(5), false);
    assert_eq!(r2.stats().ttft_fleet, Some(prior));
    let t2 = r2.policy.ttft().unwrap();
    assert_eq!(t2.state(&f.stats[0]).pending(), 0);
}

#[test]
fn leases_leave_the_queue_on_every_ending() {
    let f = Fleet::new(2);
    let snap = f.snap(&[]);
    let r = ttft();
    let mut rng = Rng::seeded(6);
    let a = route(&r, &snap, Some("k1"), &fresh("a", 100), &[], T0, &mut rng);
    let mut b = route(&r, &snap, None, &fresh("b", 100), &[], T0, &mut rng);
    let t = r.policy.ttft().unwrap();
    let pending = || f.stats.iter().map(|s| t.state(s).pending()).sum::<usize>();
    assert_eq!(pending(), 2);
    b.lease.first_byte(T0, true);
    b.lease.first_byte(T0, true);
    assert_eq!(pending(), 1);
    drop(a);
    drop(b);
    assert_eq!(pending(), 0);
    assert!(f.stats.iter().all(|s| s.in_flight() == 0));
}

#[test]
fn move_records_are_forgotten_after_the_interval() {
    let mut m = crate::pin::slots::Moves::default();
    for k in 1..=100u128 {
        m.record(k, 0, 30);
    }
    assert!(m.recent(5, 29, 30));
    assert!(!m.recent(5, 30, 30));
    assert!(!m.recent(500, 1, 30));
    for k in 101..=200u128 {
        m.record(k, 100, 30);
    }
    // the old records were dropped when the map doubled: it does not grow with every move
    assert!(m.len() <= 100, "{}", m.len());
    assert!(m.recent(200, 100, 30));
}

#[test]
fn an_unmeasured_worker_predicts_with_the_fleets_model() {
    let f = Fleet::new(2);
    let snap = f.snap(&[]);
    let r = ttft();
    let mut rng = Rng::seeded(12);
    // worker 0 alone serves 50 streamed requests, each first byte after 1 ms: far faster than
    // the prior predicts
    for i in 0..50 {
        let mut d = route(
            &r,
            &snap,
            None,
            &fresh(&format!("m{i}"), 100),
            &[WorkerId(1)],
            T0,
            &mut rng,
        );
        d.lease.first_byte(T0 + Duration::from_millis(1), true);
    }
    // worker 1 was never measured, yet it is not shunned: it predicts with the pooled model
    let mut seen = [0u32; 2];
    for i in 0..100 {
        let mut d = route(
            &r,
            &snap,
            None,
            &fresh(&format!("n{i}"), 100),
            &[],
            T0,
            &mut rng,
        );
        seen[d.worker.0 as usize] += 1;
        d.lease.first_byte(T0, false);
    }
    assert!(seen.iter().all(|&n| n > 20), "{seen:?}");
}

#[test]
fn distinct_long_prompts_spread_over_an_idle_fleet() {
    for seed in 0..20 {
        let f = Fleet::new(4);
        let snap = f.snap(&[]);
        let r = ttft();
        let mut rng = Rng::seeded(seed);
        let mut holders = Vec::new();
        for p in 0..4 {
            // each prompt's first request is done before the next arrives: queues stay empty,
            // every prediction ties, and the least cached worker takes the new prompt
            let mut d = route(
                &r,
                &snap,
                None,
                &fresh(&format!("prompt {p}"), 2000),
                &[],
                T0,
                &mut rng,
            );
            d.lease.first_byte(T0, false);
            holders.push(d.worker);
        }
        holders.sort();
        holders.dedup();
        assert_eq!(holders.len(), 4, "seed {seed}");
    }
}

#[test]
fn a_new_session_follows_its_prompt_unless_the_holder_is_clearly_slower() {
    let f = Fleet::new(3);
    let snap = f.snap(&[]);
    let r = ttft();
    let mut rng = Rng::seeded(21);
    let system = fresh("shared system prompt", 2000);
    let mut d = route(&r, &snap, None, &system, &[], T0, &mut rng);
    let holder = d.worker;
    d.lease.first_byte(T0, false);
    drop(d);
    let session = |i: usize| format!("{system}{}", fresh(&format!("user {i}"), 100));
    // 3000 tokens queued on the holder: it predicts 10 + 0.1 x 3100 = 320 ms, an idle worker
    // 10 + 0.1 x 2100 = 220 ms; 320 <= 1.5 x 220 + 100, so the session still goes where its
    // prompt is cached (a copy would cost the fleet 2000 tokens of prefill)
    let mut held = load(&r, &snap, holder, 3, T0, &mut rng);
    let d = route(&r, &snap, Some("s1"), &session(1), &[], T0, &mut rng);
    assert_eq!((d.worker, d.branch), (holder, Some(Branch::Vacant)));
    drop(d);
    // 6000 queued: 610 ms > 430 ms, clearly slower: the fastest worker takes it
    held.extend(load(&r, &snap, holder, 3, T0, &mut rng));
    let d = route(&r, &snap, Some("s2"), &session(2), &[], T0, &mut rng);
    assert_ne!(d.worker, holder);
    // and keyless requests follow the same rule
    let d = route(&r, &snap, None, &session(3), &[], T0, &mut rng);
    assert_ne!(d.worker, holder);
}

#[test]
fn a_worker_is_not_believed_to_cache_more_than_its_kv_capacity() {
    let f = Fleet::new(2);
    f.stats[0].set_kv_capacity_tokens(1000);
    let snap = f.snap(&[]);
    let r = ttft();
    let mut rng = Rng::seeded(4);
    // 2000 tokens sent to worker 0, whose KV holds 1000
    let long = fresh("a long conversation", 2000);
    let mut d = route(&r, &snap, None, &long, &[WorkerId(1)], T0, &mut rng);
    d.lease.first_byte(T0, false);
    drop(d);
    let pick = crate::policy::PickRequest {
        model: Some("m"),
        text: Some(long.as_bytes()),
        now: T0,
        ..Default::default()
    };
    let t = r.policy.ttft().unwrap();
    let e = t.evaluate(&pick, &snap, &[WorkerId(0), WorkerId(1)]);
    // it keeps the prompt's first 1000 tokens, so at least 1000 must be prefilled again
    assert!(
        (e.estimates[0].own_tokens - 1000.0).abs() < 10.0,
        "{:?}",
        e.estimates[0]
    );
    assert_eq!(e.estimates[1].own_tokens, 2000.0);
}

//! Random sequences of routes, lease drops, availability changes, worker removals and
//! additions, sweeps and capacity evictions, checked against a recount of the table.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;
use crate::Rng;
use crate::pin::slots::NONE;
use crate::sticky::scoped_key;

const MAX_WORKERS: usize = 9;
const MAX_IDLE: u64 = 50;

#[derive(Debug, Clone)]
enum Op {
    Route {
        key: u8,
        model_n: bool,
        leg: u8,
        exclude: Option<u32>,
        hold: bool,
    },
    Drop(usize),
    Toggle(u32),
    Remove(u32),
    Add,
    SweepStep,
    SweepPass,
    Wait(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u8..8, any::<bool>(), 0u8..3, proptest::option::weighted(0.2, 0u32..9), any::<bool>())
            .prop_map(|(key, model_n, leg, exclude, hold)| Op::Route { key, model_n, leg, exclude, hold }),
        3 => any::<usize>().prop_map(Op::Drop),
        3 => (0u32..6).prop_map(Op::Toggle),
        1 => (0u32..6).prop_map(Op::Remove),
        1 => Just(Op::Add),
        1 => Just(Op::SweepStep),
        1 => Just(Op::SweepPass),
        2 => (0u64..40).prop_map(Op::Wait),
    ]
}

fn config() -> impl Strategy<Value = (PolicyKind, bool, Option<AssignmentMode>, usize)> {
    let policy = prop::sample::select(vec![
        (PolicyKind::Manual, false),
        (PolicyKind::Manual, true),
        (PolicyKind::RoundRobin, true),
        (PolicyKind::CacheAware, true),
        (PolicyKind::PowerOfTwo, true),
    ]);
    let mode = prop::sample::select(vec![
        None,
        Some(AssignmentMode::Random),
        Some(AssignmentMode::MinLoad),
        Some(AssignmentMode::MinGroup),
    ]);
    (policy, mode, prop::sample::select(vec![0usize, 3, 12]))
        .prop_map(|((p, o), m, cap)| (p, o, m, cap))
}

struct Held {
    scoped: u128,
    worker: WorkerId,
    _d: Decision,
}

/// Checks the table against a recount; `swept`: a full pass just ended at `now`.
fn check(r: &Router, f: &Fleet, present: &[u32], held: &[Held], now: u64, swept: bool) {
    let entries = r.pins.entries();
    assert_eq!(r.stats().pins, entries.len(), "pin count drifted");
    if r.cfg.max_sticky_keys > 0 {
        assert!(entries.len() <= r.cfg.max_sticky_keys);
    }
    for &w in present {
        let recount = entries.iter().filter(|e| e.workers[0] == w).count() as u32;
        assert_eq!(
            f.stats[w as usize].pinned_keys(),
            recount,
            "pinned keys of w{w}"
        );
    }
    if held.is_empty() {
        assert_eq!(
            r.pins.orphans(),
            0,
            "orphaned in-flight counts outlived their requests"
        );
    }
    let mut live: HashMap<(u128, u32), u16> = HashMap::new();
    for h in held {
        *live.entry((h.scoped, h.worker.0)).or_default() += 1;
    }
    // requests on a worker their key's entry does not remember are counted aside
    for (&(key, w), &n) in &live {
        let remembered = entries
            .iter()
            .any(|e| e.key == key && e.workers.contains(&w));
        if !remembered && present.contains(&w) {
            assert_eq!(r.pins.orphaned(key, w), n, "orphaned count of w{w}");
        }
    }
    for e in &entries {
        assert!(
            e.workers[1] == NONE || e.workers[0] != e.workers[1],
            "{e:?}"
        );
        for j in 0..2 {
            if e.workers[j] == NONE {
                assert_eq!(e.in_flight[j], 0, "{e:?}");
            } else {
                let n = live.get(&(e.key, e.workers[j])).copied().unwrap_or(0);
                assert_eq!(
                    e.in_flight[j], n,
                    "in-flight against the live leases: {e:?}"
                );
            }
        }
        if swept {
            assert_ne!(e.workers[0], NONE, "emptied entry survived a pass: {e:?}");
            for w in e.workers.into_iter().filter(|w| *w != NONE) {
                assert!(
                    present.contains(&w),
                    "removed worker survived a pass: {e:?}"
                );
            }
            let idle = e.in_flight == [0, 0] && now - u64::from(e.last_used) >= MAX_IDLE;
            assert!(!idle, "idle entry survived a pass at {now}: {e:?}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn table_and_counters_match_a_recount(
        (policy, override_on, mode, max_keys) in config(),
        ops in proptest::collection::vec(op(), 1..120),
        seed: u64,
    ) {
        let mut f = Fleet::new(MAX_WORKERS);
        f.models = vec![vec!["m", "n"]; MAX_WORKERS];
        let r = Router::new(&RouterOptions {
            policy,
            routing_key_override: override_on,
            assignment_mode: mode,
            max_sticky_keys: max_keys,
            max_idle_secs: MAX_IDLE,
            eviction_interval_secs: 10,
            ..RouterOptions::default()
        })
        .unwrap();
        let mut rng = Rng::seeded(seed);
        let mut present: Vec<u32> = (0..3).collect();
        let mut next_id = 3u32;
        let mut down: Vec<u32> = Vec::new();
        let mut held: Vec<Held> = Vec::new();
        let mut now = 1u64;
        for op in ops {
            let snap = f.snap_of(&present, &down);
            let mut swept = false;
            match op {
                Op::Route { key, model_n, leg, exclude, hold } => {
                    let key = format!("k{key}");
                    let model = if model_n { "n" } else { "m" };
                    let leg = [Leg::Regular, Leg::Prefill, Leg::Decode][leg as usize];
                    let pairs = [("x-smg-routing-key", key.as_bytes())];
                    let h = HeaderList(&pairs);
                    let ex: Vec<WorkerId> = exclude.map(WorkerId).into_iter().collect();
                    let req = RouteRequest { model: Some(model), leg, exclude: &ex, ..keyed(&h) };
                    match r.route(&req, &snap, Duration::from_secs(now), &mut rng) {
                        Ok(d) => {
                            let w = d.worker;
                            prop_assert!(present.contains(&w.0) && !down.contains(&w.0));
                            prop_assert!(!ex.contains(&w));
                            let scope = (r.cfg.stickiness == crate::options::Stickiness::Override)
                                .then_some(model);
                            let scoped = scoped_key(&key, scope, leg);
                            if hold {
                                held.push(Held { scoped, worker: w, _d: d });
                            }
                        }
                        Err(e) => {
                            prop_assert_eq!(e, Error::NoAvailableWorkers);
                            prop_assert!(present.iter().all(|w| down.contains(w) || ex.contains(&WorkerId(*w))));
                        }
                    }
                }
                Op::Drop(i) => {
                    if !held.is_empty() {
                        let i = i % held.len();
                        held.swap_remove(i);
                    }
                }
                Op::Toggle(w) => {
                    if let Some(i) = down.iter().position(|d| *d == w) {
                        down.swap_remove(i);
                    } else {
                        down.push(w);
                    }
                }
                Op::Remove(w) => present.retain(|p| *p != w),
                Op::Add => {
                    if (next_id as usize) < MAX_WORKERS {
                        present.push(next_id);
                        next_id += 1;
                    }
                }
                Op::SweepStep => {
                    r.sweep_step(Duration::from_secs(now), &snap);
                }
                Op::SweepPass => {
                    // finish the pass in progress, then one whole pass
                    while !r.sweep_step(Duration::from_secs(now), &snap).finished {}
                    while !r.sweep_step(Duration::from_secs(now), &snap).finished {}
                    swept = true;
                }
                Op::Wait(s) => now += s,
            }
            check(&r, &f, &present, &held, now, swept);
        }
    }
}

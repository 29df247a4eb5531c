//! The pinned decision against a reference model of SPEC.md section 2 (reuse, failover and
//! return, the in-flight threshold), under random availability, removals, exclusions and
//! concurrent requests. The router's placement is random; the model takes the worker it
//! returned and checks the branch and the remembered workers that must follow.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;
use crate::Rng;
use crate::options::Stickiness;
use crate::pin::slots::NONE;
use crate::sticky::scoped_key;

#[derive(Debug, Clone)]
enum Op {
    Route {
        key: u8,
        model_n: bool,
        exclude: Option<u32>,
        hold: bool,
    },
    Drop(usize),
    Toggle(u32),
    Remove(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u8..4, any::<bool>(), proptest::option::weighted(0.2, 0u32..5), any::<bool>())
            .prop_map(|(key, model_n, exclude, hold)| Op::Route { key, model_n, exclude, hold }),
        4 => any::<usize>().prop_map(Op::Drop),
        3 => (0u32..5).prop_map(Op::Toggle),
        1 => (0u32..5).prop_map(Op::Remove),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn decisions_follow_the_reference_model(
        (policy, override_on) in prop::sample::select(vec![
            (PolicyKind::Manual, false),
            (PolicyKind::RoundRobin, true),
            (PolicyKind::PowerOfTwo, true),
        ]),
        mode in prop::sample::select(vec![None, Some(AssignmentMode::Random), Some(AssignmentMode::MinLoad)]),
        ops in proptest::collection::vec(op(), 1..100),
        seed: u64,
    ) {
        let mut f = Fleet::new(5);
        f.models = vec![vec!["m", "n"]; 5];
        let r = router(policy, override_on, mode);
        let threshold = r.cfg.stickiness == Stickiness::Override;
        let delegate = threshold && r.cfg.mode == AssignmentMode::Delegate;
        let cap = r.cfg.inflight_cap;
        let mut rng = Rng::seeded(seed);
        let mut present: Vec<u32> = (0..5).collect();
        let mut down: Vec<u32> = Vec::new();
        let mut model: HashMap<u128, [u32; 2]> = HashMap::new();
        let mut held: Vec<(u128, u32, Decision)> = Vec::new();
        for op in ops {
            let snap = f.snap_of(&present, &down);
            match op {
                Op::Route { key, model_n, exclude, hold } => {
                    let key = format!("k{key}");
                    let m = if model_n { "n" } else { "m" };
                    let pairs = [("x-smg-routing-key", key.as_bytes())];
                    let h = HeaderList(&pairs);
                    let ex: Vec<WorkerId> = exclude.map(WorkerId).into_iter().collect();
                    let req = RouteRequest { model: Some(m), exclude: &ex, ..keyed(&h) };
                    let scoped = scoped_key(&key, threshold.then_some(m), Leg::Regular);
                    let Ok(d) = r.route(&req, &snap, T0, &mut rng) else {
                        continue;
                    };
                    let p = d.worker.0;
                    let avail = |w: u32| w != NONE && present.contains(&w) && !down.contains(&w)
                        && !ex.contains(&WorkerId(w));
                    let live = |w: u32| held.iter().filter(|(k, x, _)| *k == scoped && *x == w).count();
                    let (branch, after) = match model.get(&scoped).copied() {
                        None => (Branch::Vacant, [p, NONE]),
                        Some(mut w) => {
                            for s in &mut w {
                                if !present.contains(s) {
                                    *s = NONE;
                                }
                            }
                            if w[0] == NONE {
                                w = [w[1], NONE];
                            }
                            match (0..2).find(|&i| avail(w[i])) {
                                Some(i) if threshold && live(w[i]) >= usize::from(cap) => {
                                    let moved = p != w[i] && live(p) < usize::from(cap);
                                    (Branch::CapRespill, if moved { [p, w[i]] } else { w })
                                }
                                Some(i) => {
                                    prop_assert_eq!(p, w[i], "the first available remembered worker");
                                    (Branch::OccupiedHit, w)
                                }
                                None if delegate || w[0] == NONE => (Branch::OccupiedMiss, [p, w[0]]),
                                None if w[1] == NONE => (Branch::OccupiedMiss, [w[0], p]),
                                None => (Branch::OccupiedMiss, [w[1], p]),
                            }
                        }
                    };
                    prop_assert_eq!(d.branch, Some(branch));
                    model.insert(scoped, after);
                    let actual = r.pins.entries().into_iter().find(|e| e.key == scoped).map(|e| e.workers);
                    prop_assert_eq!(actual, Some(after), "remembered workers after {:?}", branch);
                    if hold {
                        held.push((scoped, p, d));
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
            }
        }
    }
}

/// A scoped key hashes the same bytes whichever buffer holds them (the short one, the 384-byte
/// one, the heap): `k`, the leg, the model's length, the model, the key.
#[test]
fn scoped_keys_hash_the_same_bytes_in_every_buffer() {
    for (model_len, key_len) in [
        (0, 1),
        (9, 11),
        (9, 49),
        (9, 50),
        (0, 58),
        (200, 178),
        (200, 179),
        (1000, 128),
    ] {
        let model = "m".repeat(model_len);
        let key = "k".repeat(key_len);
        for leg in [Leg::Regular, Leg::Prefill, Leg::Decode] {
            let mut bytes = vec![b'k', leg as u8];
            bytes.extend_from_slice(&(model_len as u32).to_le_bytes());
            bytes.extend_from_slice(model.as_bytes());
            bytes.extend_from_slice(key.as_bytes());
            let want = xxhash_rust::xxh3::xxh3_128(&bytes) | 1;
            let scope = (model_len > 0).then_some(model.as_str());
            assert_eq!(scoped_key(&key, scope, leg), want, "{model_len} {key_len}");
        }
    }
}

use std::sync::Arc;

use super::*;
use crate::WorkerStats;
use crate::policy::PrefixHashes;
use crate::worker::WorkerEntry;

fn fleet(loads: &[u32]) -> WorkerSnapshot {
    WorkerSnapshot::new(
        loads
            .iter()
            .enumerate()
            .map(|(i, &l)| {
                let stats = Arc::new(WorkerStats::default());
                for _ in 0..l {
                    stats.begin();
                }
                WorkerEntry {
                    id: WorkerId(i as u32),
                    url: format!("http://w{i}").into(),
                    models: vec![],
                    available: true,
                    stats,
                }
            })
            .collect(),
    )
}

fn ids(n: u32) -> Vec<WorkerId> {
    (0..n).map(WorkerId).collect()
}

fn text(seed: &str, len: usize) -> Vec<u8> {
    seed.bytes().cycle().take(len).collect()
}

#[test]
fn follows_the_prefix_above_threshold() {
    let ca = CacheAware::new(CacheAwareConfig::default());
    let snap = fleet(&[0, 0, 0, 0]);
    let mut rng = Rng::seeded(9);
    let convo = text("You are a helpful assistant. Conversation 42. ", 2000);
    let req = PickRequest {
        key: None,
        model: Some("m"),
        text: Some(&convo),
        ..Default::default()
    };
    let first = ca.pick(&req, &snap, &ids(4), &mut rng);
    for _ in 0..20 {
        assert_eq!(ca.pick(&req, &snap, &ids(4), &mut rng), first);
    }
    // another model has its own tree: no match there, least-loaded with random ties
    let other = PickRequest {
        model: Some("n"),
        ..req
    };
    let mut seen = std::collections::HashSet::new();
    for i in 0..40 {
        let t = text(&format!("fresh text {i} "), 400);
        seen.insert(ca.pick(
            &PickRequest {
                text: Some(&t),
                ..other
            },
            &snap,
            &ids(4),
            &mut rng,
        ));
    }
    assert!(
        seen.len() > 1,
        "unmatched requests spread over idle workers"
    );
}

/// Makes `w` a tenant of `t` in the policy's index for requests without a model.
fn hold(ca: &CacheAware, t: &[u8], w: u32) {
    let mut index = ca.index.lock();
    let model = index.model_named("");
    index.insert(model, &PrefixHashes::of(t), WorkerId(w), usize::MAX);
}

fn unkeyed(t: &[u8]) -> PickRequest<'_> {
    PickRequest {
        text: Some(t),
        ..Default::default()
    }
}

#[test]
fn below_threshold_goes_to_the_smallest_tree() {
    let ca = CacheAware::new(CacheAwareConfig::default());
    let mut rng = Rng::seeded(1);
    hold(&ca, &text("worker zero holds a lot ", 100 * CHUNK), 0);
    hold(&ca, &text("worker one holds a little ", 10 * CHUNK), 1);
    hold(&ca, &text("worker two holds some ", 50 * CHUNK), 2);
    // all idle, all loads equal: the smallest tree wins, whatever the order
    let snap = fleet(&[0, 0, 0]);
    let fresh = text("a prompt nobody has seen ", 20 * CHUNK);
    assert_eq!(
        ca.pick(&unkeyed(&fresh), &snap, &ids(3), &mut rng),
        WorkerId(1)
    );
    // a short shared prefix (8 of 60 chunks, below 0.3) does not decide either
    let mut mostly_new = text("worker zero holds a lot ", 8 * CHUNK);
    mostly_new.extend(text("and then something else ", 52 * CHUNK));
    let ca2 = CacheAware::new(CacheAwareConfig::default());
    hold(&ca2, &text("worker zero holds a lot ", 100 * CHUNK), 0);
    hold(&ca2, &text("worker one holds a little ", 10 * CHUNK), 1);
    assert_eq!(
        ca2.pick(&unkeyed(&mostly_new), &fleet(&[0, 0]), &ids(2), &mut rng),
        WorkerId(1)
    );
}

#[test]
fn an_idle_worker_with_the_smallest_tree_comes_first() {
    let ca = CacheAware::new(CacheAwareConfig::default());
    let mut rng = Rng::seeded(4);
    hold(&ca, &text("worker zero holds a lot ", 100 * CHUNK), 0);
    hold(&ca, &text("worker one holds a little ", 10 * CHUNK), 1);
    hold(&ca, &text("worker two holds some ", 50 * CHUNK), 2);
    // worker 1 has the smallest tree but is busy: the idle worker with the smallest tree wins
    let snap = fleet(&[0, 1, 0]);
    let fresh = text("a prompt nobody has seen ", 20 * CHUNK);
    assert_eq!(
        ca.pick(&unkeyed(&fresh), &snap, &ids(3), &mut rng),
        WorkerId(2)
    );
    // nobody idle: the smallest tree overall, even if it is not the least loaded
    let busy = fleet(&[1, 3, 2]);
    let fresh2 = text("another unseen prompt ", 20 * CHUNK);
    assert_eq!(
        ca.pick(&unkeyed(&fresh2), &busy, &ids(3), &mut rng),
        WorkerId(1)
    );
}

#[test]
fn smallest_tree_ties_break_at_random() {
    let snap = fleet(&[0, 0, 0, 0]);
    let mut seen = [0u32; 4];
    let mut rng = Rng::seeded(11);
    for i in 0..200 {
        let ca = CacheAware::new(CacheAwareConfig::default());
        let t = text(&format!("prompt {i} "), 10 * CHUNK);
        seen[ca.pick(&unkeyed(&t), &snap, &ids(4), &mut rng).0 as usize] += 1;
    }
    assert!(seen.iter().all(|&n| n > 20), "{seen:?}");
}

/// The starvation case of issue #8: four long shared system prompts, each followed by many
/// sessions. Each prompt's first request finds no match and goes to the smallest tree, so
/// every worker gets one prompt and its sessions.
#[test]
fn four_long_shared_prompts_use_all_four_workers() {
    for seed in 0..20 {
        let ca = CacheAware::new(CacheAwareConfig::default());
        let stats: Vec<Arc<WorkerStats>> = (0..4).map(|_| Arc::default()).collect();
        let snap = WorkerSnapshot::new(
            (0..4)
                .map(|i| WorkerEntry {
                    id: WorkerId(i),
                    url: format!("http://w{i}").into(),
                    models: vec![],
                    available: true,
                    stats: stats[i as usize].clone(),
                })
                .collect(),
        );
        let mut rng = Rng::seeded(seed);
        let mut served = [0u32; 4];
        let prompts: Vec<Vec<u8>> = (0..4)
            .map(|p| {
                text(
                    &format!("You are agent type {p}. Follow these rules. "),
                    4000,
                )
            })
            .collect();
        for session in 0..40 {
            let p = &prompts[session % 4];
            let mut t = p.clone();
            t.extend(text(&format!("session {session} asks something "), 300));
            let w = ca.pick(&unkeyed(&t), &snap, &ids(4), &mut rng);
            served[w.0 as usize] += 1;
            // a few requests stay in flight, as in a live fleet
            if session % 3 == 0 {
                stats[w.0 as usize].begin();
            }
        }
        assert!(served.iter().all(|&n| n > 0), "seed {seed}: {served:?}");
    }
}

#[test]
fn imbalance_needs_both_conditions() {
    let cfg = CacheAwareConfig {
        balance_abs_threshold: 4,
        balance_rel_threshold: 1.5,
        ..Default::default()
    };
    let t = text("shared prefix for the imbalance test ", 600);
    let mut rng = Rng::seeded(2);
    let held_by_0 = || {
        let ca = CacheAware::new(cfg);
        hold(&ca, &t, 0);
        ca
    };
    // 10 - 0 > 4 and 10 > 0 x 1.5: imbalanced, the least loaded takes it despite the prefix
    assert_eq!(
        held_by_0().pick(&unkeyed(&t), &fleet(&[10, 0]), &ids(2), &mut rng),
        WorkerId(1)
    );
    // 10 - 8 = 2, not > 4: balanced, the prefix decides
    assert_eq!(
        held_by_0().pick(&unkeyed(&t), &fleet(&[10, 8]), &ids(2), &mut rng),
        WorkerId(0)
    );
    // 30 - 24 = 6 > 4, but 30 is not > 24 x 1.5 = 36: balanced
    assert_eq!(
        held_by_0().pick(&unkeyed(&t), &fleet(&[30, 24]), &ids(2), &mut rng),
        WorkerId(0)
    );
    // 30 - 10 > 4 and 30 > 15: imbalanced
    assert_eq!(
        held_by_0().pick(&unkeyed(&t), &fleet(&[30, 10]), &ids(2), &mut rng),
        WorkerId(1)
    );
    // the holder being the least loaded one keeps it, imbalanced or not
    assert_eq!(
        held_by_0().pick(&unkeyed(&t), &fleet(&[0, 30]), &ids(2), &mut rng),
        WorkerId(0)
    );
    // the chosen worker becomes a tenant even when the imbalance decided
    let ca = held_by_0();
    ca.pick(&unkeyed(&t), &fleet(&[10, 0]), &ids(2), &mut rng);
    let mut index = ca.index.lock();
    let model = index.model_named("");
    let (_, holders) = index.longest_match(model, &PrefixHashes::of(&t), &ids(2));
    assert_eq!(holders.len(), 2);
}

#[test]
fn a_repeated_long_request_follows_its_worker() {
    let ca = CacheAware::new(CacheAwareConfig {
        max_tree_size: 1024,
        ..CacheAwareConfig::default()
    });
    let snap = fleet(&[0, 0, 0, 0]);
    let mut rng = Rng::seeded(3);
    let convo = text("You are a helpful assistant. Conversation 7. ", 2048);
    let req = PickRequest {
        key: None,
        model: None,
        text: Some(&convo),
        ..Default::default()
    };
    let first = ca.pick(&req, &snap, &ids(4), &mut rng);
    for _ in 0..20 {
        assert_eq!(ca.pick(&req, &snap, &ids(4), &mut rng), first);
    }
}

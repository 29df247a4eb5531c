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
        let snap = fleet(&[0; 4]);
        let stats: Vec<Arc<WorkerStats>> = snap.entries().iter().map(|e| e.stats.clone()).collect();
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
fn the_spill_gate_compares_with_the_mean_and_caps_the_margin() {
    // mean 5, margin min(64, max(4, 2 sqrt 5 = 4.47)) = 4.47: 10 > 9.47 and 10 > 7.5
    assert!(spills([10, 0].into_iter(), 10, 64, 1.5));
    // mean 9, margin 6: 10 is not > 15
    assert!(!spills([10, 8].into_iter(), 10, 64, 1.5));
    // mean 20, margin 8.9: 30 > 28.9 but not > 20 x 1.5: both conditions are needed
    assert!(!spills([30, 10].into_iter(), 30, 64, 1.5));
    // mean 18, margin 8.5: 30 > 26.5 and 30 > 27
    assert!(spills([30, 6].into_iter(), 30, 64, 1.5));
    // the old max-min > 64 rule would never trip here: 24 requests on one of four workers
    assert!(spills([24, 0, 0, 0].into_iter(), 24, 64, 1.5));
    // a flag under 4 is the margin: mean 3.5, margin 2, 6 > 5.5 and 6 > 5.25
    assert!(spills([6, 1].into_iter(), 6, 2, 1.5));
    assert!(
        !spills([6, 1].into_iter(), 6, 4, 1.5),
        "margin 4: 6 is not > 7.5"
    );
    // at a large mean the margin is two standard deviations: mean 80, margin 17.9
    assert!(spills([140, 60, 60, 60].into_iter(), 140, 64, 1.5));
    // mean 76.75, margin 17.5 (not 64): 97 > 94.3 spills, 93 (mean 75.75, 93.2) does not
    assert!(spills([97, 70, 70, 70].into_iter(), 97, 64, 1.0));
    assert!(!spills([93, 70, 70, 70].into_iter(), 93, 64, 1.0));
    assert!(!spills(std::iter::empty(), 5, 64, 1.5));
}

#[test]
fn a_spilled_match_goes_to_the_least_loaded_worker() {
    let t = text("shared prefix for the spill test ", 600);
    let mut rng = Rng::seeded(2);
    let held_by_0 = || {
        let ca = CacheAware::new(CacheAwareConfig::default());
        hold(&ca, &t, 0);
        ca
    };
    // mean 5: the holder spills, the least loaded takes it despite the prefix
    assert_eq!(
        held_by_0().pick(&unkeyed(&t), &fleet(&[10, 0]), &ids(2), &mut rng),
        WorkerId(1)
    );
    // within the margin: the prefix decides
    assert_eq!(
        held_by_0().pick(&unkeyed(&t), &fleet(&[10, 8]), &ids(2), &mut rng),
        WorkerId(0)
    );
    assert_eq!(
        held_by_0().pick(&unkeyed(&t), &fleet(&[30, 10]), &ids(2), &mut rng),
        WorkerId(0)
    );
    // the holder being the least loaded one keeps it
    assert_eq!(
        held_by_0().pick(&unkeyed(&t), &fleet(&[0, 30]), &ids(2), &mut rng),
        WorkerId(0)
    );
    // the chosen worker becomes a tenant even when the gate decided
    let ca = held_by_0();
    ca.pick(&unkeyed(&t), &fleet(&[10, 0]), &ids(2), &mut rng);
    let mut index = ca.index.lock();
    let model = index.model_named("");
    let (_, holders) = index.longest_match(model, &PrefixHashes::of(&t), &ids(2));
    assert_eq!(holders.len(), 2);
}

/// Issue #21's herd: every session of a coding agent opens with the same long prefix (system
/// prompt and tools), so every new session matches it above the threshold on whichever worker
/// first held it. Under the old max-min > 64 rule one worker took all of them; under SMG 1.13's
/// spill gate no worker goes past the mean plus the margin (`max(4, 2 sqrt(mean))`), the
/// spilled-to workers become holders too, and a session's later turns still follow its own
/// history. (The gate bounds the herd at the natural swing; it does not balance: with 16 in
/// flight on 4 workers, two workers at 8 each are within it.)
#[test]
fn the_universal_prefix_does_not_herd() {
    for seed in 0..10 {
        let ca = CacheAware::new(CacheAwareConfig::default());
        let snap = fleet(&[0; 4]);
        let stats: Vec<Arc<WorkerStats>> = snap.entries().iter().map(|e| e.stats.clone()).collect();
        let mut rng = Rng::seeded(seed);
        let shared = text("You are a coding agent. Tools: read, edit, run. ", 6000);
        let mut histories: Vec<Vec<u8>> = Vec::new();
        let mut home: Vec<Option<WorkerId>> = Vec::new();
        let mut in_flight: std::collections::VecDeque<WorkerId> = Default::default();
        let (mut served, mut followed, mut later) = ([0u32; 4], 0u32, 0u32);
        // 32 sessions open one after another, then take turns; 16 requests stay in flight
        for step in 0..160usize {
            let s = if step < 32 { step } else { step % 32 };
            if s == histories.len() {
                let mut h = shared.clone();
                h.extend(text(&format!("session {s} task: fix bug {s}. "), 1500));
                histories.push(h);
                home.push(None);
            } else {
                let turn = text(&format!("turn {step} of session {s}, tool output. "), 400);
                histories[s].extend(turn);
            }
            let w = ca.pick(&unkeyed(&histories[s]), &snap, &ids(4), &mut rng);
            served[w.0 as usize] += 1;
            if let Some(prev) = home[s] {
                later += 1;
                followed += u32::from(prev == w);
            }
            home[s] = Some(w);
            stats[w.0 as usize].begin();
            in_flight.push_back(w);
            if in_flight.len() > 16 {
                let done = in_flight.pop_front().unwrap();
                stats[done.0 as usize].end();
            }
            // 17 in flight now, mean 4.25, margin 4.12: nobody past 8.4 + the one just sent
            let most = stats.iter().map(|s| s.in_flight()).max().unwrap();
            assert!(
                most <= 9,
                "seed {seed} step {step}: {most} in flight on one worker"
            );
        }
        assert!(
            served.iter().filter(|&&n| n > 0).count() >= 2,
            "seed {seed}: {served:?}"
        );
        assert!(
            f64::from(followed) / f64::from(later) > 0.7,
            "seed {seed}: turns follow their session ({followed} of {later})"
        );
    }
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

//! `agentic`: a sub-agent stays with its parent's conversation (issue #21, session 12), as
//! scripted sequences on the pure router: no clock, no IO. Prompts are text at 4 characters
//! per token; the prior is 10 ms + 0.1 ms per token + 0.5 ms per decoding request, and the
//! move rule the default `stay > 2 x cost elsewhere + 200 ms` (the factor falling towards 1
//! with the share of the prompt the worker lacks).
//!
//! A sub-agent started with its parent's conversation has a key of its own, so no pin knows
//! it; its prompt is the parent's (system prompt and first turn), the parent's answer and its
//! own task. Two workers hold the 2000-token system prompt; the parent's first turn (100
//! tokens past the prompt) went to worker 0. Then worker 0 falls behind by `queued` tokens of
//! prefill, and the parent's sub-agents arrive.

use super::agentic::queue_on;
use super::ttft::{agentic, all_but, fresh, route};
use super::*;
use crate::{WorkerLoad, WorkerLoads};

struct Family {
    r: Router,
    snap: WorkerSnapshot,
    system: String,
    parent: String,
    _queued: Vec<Decision>,
}

/// The fleet above with `queued` thousand tokens of prefill queued on worker 0 (of 2).
fn family(queued: usize) -> Family {
    let f = Fleet::with_kv(2, 100_000);
    let snap = f.snap(&[]);
    let r = agentic();
    let system = fresh("system prompt", 2000);
    for w in 0..2 {
        let mut rng = Rng::seeded(0);
        let mut d = route(
            &r,
            &snap,
            None,
            &system,
            &all_but(WorkerId(w), 2),
            T0,
            &mut rng,
        );
        d.lease.first_byte(T0, false);
    }
    let parent = format!("{system}{}", fresh("the parent's first turn", 100));
    let mut rng = Rng::seeded(0);
    let mut d = route(
        &r,
        &snap,
        Some("parent"),
        &parent,
        &all_but(WorkerId(0), 2),
        T0,
        &mut rng,
    );
    assert_eq!(d.worker, WorkerId(0));
    d.lease.first_byte(T0, false);
    let queued = queue_on(&r, &snap, 0, queued, "queued");
    Family {
        r,
        snap,
        system,
        parent,
        _queued: queued,
    }
}

impl Family {
    /// Where a new session `key` with `text` goes.
    fn place(&self, key: &str, text: &str, exclude: &[WorkerId], seed: u64) -> WorkerId {
        let mut rng = Rng::seeded(seed);
        route(&self.r, &self.snap, Some(key), text, exclude, T0, &mut rng).worker
    }

    /// Sub-agent `k`'s first prompt: the parent's conversation and its own task.
    fn child(&self, k: u32) -> String {
        format!(
            "{}{}{}",
            self.parent,
            fresh("the parent's answer", 40),
            fresh(&format!("sub-agent task {k}"), 100)
        )
    }
}

/// With 2000 tokens queued on worker 0, the sub-agent's first turn costs about 10 + 0.1 x
/// (2000 + 140) = 224 ms there against 10 + 0.1 x 240 = 34 ms on worker 1, which holds the
/// system prompt too: placement, which prices a new session's first turn, sends a new session
/// to worker 1 (a session of its own, as the second check shows). A sub-agent continues its
/// parent's conversation: staying is not clearly worse than the copy elsewhere (224 ms under
/// about 1.9 x 34 + 200 ms), so both sub-agents go to worker 0, where the conversation is
/// (before the rule they went to worker 1: on the demo's agentic set 2-4 sub-agents a run
/// copied the system prompt and the parent's conversation to another worker).
#[test]
fn sub_agents_go_to_their_parents_worker_unless_it_is_clearly_worse() {
    for seed in 0..10 {
        let fam = family(2);
        for k in 0..2 {
            let w = fam.place(&format!("child {k}"), &fam.child(k), &[], seed);
            assert_eq!(w, WorkerId(0), "seed {seed}, sub-agent {k}");
        }
        let other = format!("{}{}", fam.system, fresh("another root session", 280));
        assert_eq!(
            fam.place("root", &other, &[], seed),
            WorkerId(1),
            "seed {seed}: a session of its own is placed by price"
        );
    }
}

/// What the parent's worker cannot take goes elsewhere: with 7000 tokens queued on worker 0 a
/// sub-agent's turn costs about 724 ms there, clearly worse than a copy to worker 1 (the move
/// rule: over 1.9 x 34 + 200 ms); a parent's worker that is not a candidate (down, or
/// excluded after a failure) leaves the sub-agent to placement.
#[test]
fn a_sub_agent_leaves_a_parent_worker_that_cannot_take_it() {
    let fam = family(7);
    assert_eq!(fam.place("child 0", &fam.child(0), &[], 1), WorkerId(1));
    let fam = family(0);
    assert_eq!(
        fam.place("child 0", &fam.child(0), &[WorkerId(0)], 1),
        WorkerId(1)
    );
}

/// A tip new sessions go on from with different text is a prefix they share, not a
/// conversation. The first session of a group sent the group's 2000-token prompt alone (no
/// worker held it: its last chunk became the session's tip); the group's second session goes
/// on from it and is taken for a sub-agent (it goes to worker 0, as placement would send it
/// anyway: 60 ms there against a 260 ms copy to worker 1). The third goes on with other text:
/// the tip is split, and the session is placed by price. With 3000 tokens queued on worker 0
/// that is worker 1 (360 ms against 260); taken for a sub-agent it would have stayed on worker
/// 0 (360 ms is not clearly worse than 1.8 x 260 + 200 ms), and so would every later session
/// of the group: a herd on the first session's worker.
#[test]
fn a_prefix_new_sessions_go_on_from_differently_makes_no_parent() {
    for seed in 0..10 {
        let f = Fleet::with_kv(2, 100_000);
        let snap = f.snap(&[]);
        let r = agentic();
        let group = fresh("group prompt", 2000);
        let mut rng = Rng::seeded(seed);
        let first = all_but(WorkerId(0), 2);
        let mut d = route(&r, &snap, Some("first"), &group, &first, T0, &mut rng);
        d.lease.first_byte(T0, false);
        let a = format!("{group}{}", fresh("session a", 500));
        let mut d = route(&r, &snap, Some("a"), &a, &[], T0, &mut rng);
        assert_eq!(d.worker, WorkerId(0), "seed {seed}");
        d.lease.first_byte(T0, false);
        let _queued = queue_on(&r, &snap, 0, 3, "queued");
        let b = format!("{group}{}", fresh("session b", 500));
        let d = route(&r, &snap, Some("b"), &b, &[], T0, &mut rng);
        assert_eq!(d.worker, WorkerId(1), "seed {seed}");
    }
}

/// Overload protection leaves a worker whose engine queues 8 requests or more out of
/// placement, but a pinned turn still reaches its worker, and so does a sub-agent its parent's
/// (the move rule decides, as for the parent's own turn); that is no veto. A session of its
/// own is placed on the other worker (a veto). Before, the veto sent the sub-agents of a busy
/// parent's worker elsewhere: most of the copies left after the placement rule on the demo's
/// agentic set (seed 2: 14 vetoes a run, 5 sub-agents off their parent's worker).
#[test]
fn a_sub_agent_reaches_its_parents_worker_over_the_overload_threshold() {
    let fam = family(0);
    let loads = WorkerLoads::new(
        [(0, 8), (1, 0)]
            .into_iter()
            .map(|(w, waiting)| {
                let load = WorkerLoad {
                    waiting_reqs: waiting,
                    token_usage: 0.1,
                    in_flight: 0,
                    awaiting: 0,
                };
                (WorkerId(w), load)
            })
            .collect(),
    );
    let place = |key: &str, text: &str| {
        let pairs = [("x-smg-routing-key", key.as_bytes())];
        let h = HeaderList(&pairs);
        let req = RouteRequest {
            text: Some(text),
            stream: Some(true),
            loads: Some(&loads),
            ..keyed(&h)
        };
        fam.r
            .route(&req, &fam.snap, T0, &mut Rng::seeded(2))
            .unwrap()
            .worker
    };
    assert_eq!(place("child 0", &fam.child(0)), WorkerId(0));
    assert_eq!(fam.r.stats().overload_vetoes, 0);
    let other = format!("{}{}", fam.system, fresh("another root session", 280));
    assert_eq!(place("root", &other), WorkerId(1));
    assert_eq!(fam.r.stats().overload_vetoes, 1);
}

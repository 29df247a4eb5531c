//! `agentic`'s copy pricing by the fleet's load and its session count at placement (issue #21,
//! session 5), as scripted sequences on the pure router: no clock, no IO. Prompts are text at 4
//! characters per token; the prior is 10 ms + 0.1 ms per token, the move rule the default
//! `stay > 2 x cost elsewhere + 200 ms`.

use super::agentic::queue_on;
use super::ttft::{agentic, all_but, fresh, route};
use super::*;

/// A fleet of `n` workers with room for everything in their KV.
fn roomy(n: usize) -> Fleet {
    Fleet::with_kv(n, 1_000_000)
}

/// A group of sessions shares a 2000-token prefix that worker 0 holds (a repository's
/// instructions: held by some workers, not all). A new member costs 500 tokens of prefill on
/// worker 0 and 2500 (the copy) on worker 1.
///
/// - Worker 1 idle, 3000 tokens queued on 0: 10 + 0.1 x 3500 = 360 ms on 0 against 260 ms on
///   worker 1. A copy onto an idle worker delays nobody else: it goes to 1 (where
///   `ttft_aware`'s holder rule keeps it on 0: 360 < 2 x 260 + 200).
/// - 1000 tokens queued on 1 as well (4000 on 0): every worker has a backlog, 100 ms on the
///   shorter one, about four typical turns (a typical turn's prefill is about 26 ms here), so
///   the fleet's load reads q / (q + 1) = 0.8 and the copy's 2000 extra tokens are priced at
///   1 + 0.8 / 0.2 = about 5 times their prefill: 360 + 3.9 x 200 = 1134 ms on 1 against 460
///   on 0, which keeps its group.
/// - 16,000 tokens queued on 0: 1660 ms there, clearly behind; the copy pays even at that
///   price and the member goes to 1.
#[test]
fn a_copy_costs_the_prefill_it_delays_others_by_once_every_worker_is_busy() {
    let group = fresh("repository instructions", 2000);
    let scenario = |on_0: usize, on_1: usize| {
        let f = roomy(2);
        let snap = f.snap(&[]);
        let r = agentic();
        let mut rng = Rng::seeded(4);
        let mut d = route(&r, &snap, None, &group, &[WorkerId(1)], T0, &mut rng);
        d.lease.first_byte(T0, false);
        let _q0 = queue_on(&r, &snap, 0, on_0, "zero");
        let _q1 = queue_on(&r, &snap, 1, on_1, "one");
        let t = format!("{group}{}", fresh("a new member", 500));
        route(&r, &snap, Some("member"), &t, &[], T0, &mut rng).worker
    };
    assert_eq!(scenario(3, 0), WorkerId(1), "an idle worker takes the copy");
    assert_eq!(scenario(4, 1), WorkerId(0), "a busy fleet keeps the group");
    assert_eq!(
        scenario(16, 1),
        WorkerId(1),
        "unless its worker is far behind"
    );
}

/// The same pricing holds a pinned session in place. Its 3000-token history is on worker 0;
/// each turn adds 100 tokens. With worker 1 idle a move costs its re-prefill, 10 + 0.1 x 3100
/// = 320 ms, and the bar is 2 x 320 + 200 = 840 ms (the factor a hair under 2: the history's
/// last turn is not held yet): 6000 tokens queued on 0 (620 ms) stay, 12,000 (1220 ms) move.
/// With 1000 tokens queued on worker 1 too (420 ms there), staying at 12,000 queued would still
/// pass `ttft_aware`'s bar (2 x 420 + 200 = 1040 ms), but every worker is busy (a backlog of
/// about three typical turns, load 0.73) and the 3000-token copy counts 1 + 2.7 times: the
/// bar is about 2 x 1230 + 200, and the session stays until its worker is far behind (30,000
/// tokens queued: the copy's price falls as the typical turn grows with the queued prefills).
#[test]
fn a_pinned_session_on_a_busy_fleet_moves_only_past_the_copy_priced_by_the_load() {
    let scenario = |on_0: usize, on_1: usize| {
        let f = roomy(2);
        let snap = f.snap(&[]);
        let r = agentic();
        let mut rng = Rng::seeded(6);
        let mut history = fresh("a long agentic session", 3000);
        let mut d = route(&r, &snap, Some("k"), &history, &[WorkerId(1)], T0, &mut rng);
        d.lease.first_byte(T0, false);
        let _q0 = queue_on(&r, &snap, 0, on_0, "zero");
        let _q1 = queue_on(&r, &snap, 1, on_1, "one");
        history.push_str(&fresh("next turn", 100));
        let d = route(&r, &snap, Some("k"), &history, &[], T0, &mut rng);
        (d.worker, d.branch.unwrap())
    };
    assert_eq!(scenario(6, 0), (WorkerId(0), Branch::OccupiedHit));
    assert_eq!(scenario(12, 0), (WorkerId(1), Branch::TtftMove));
    assert_eq!(scenario(12, 1), (WorkerId(0), Branch::OccupiedHit));
    assert_eq!(scenario(30, 1), (WorkerId(1), Branch::TtftMove));
}

/// Before any turn rate is known (a burst of first turns), the live sessions a worker carries
/// stand in for the turns it will send: three short sessions on worker 0 and one long one on
/// worker 1, every queue empty, and a new session that nobody holds costs the same on both. By
/// working set it would go to worker 0 (900 tokens against 3000); three sessions will send
/// three times the turns, so it goes to worker 1.
#[test]
fn before_turn_rates_are_known_a_new_session_goes_where_fewer_sessions_live() {
    for seed in 0..10 {
        let f = roomy(2);
        let snap = f.snap(&[]);
        let r = agentic();
        let mut rng = Rng::seeded(seed);
        for (key, w, tokens) in [("a", 0, 300), ("b", 0, 300), ("c", 0, 300), ("d", 1, 3000)] {
            let t = fresh(&format!("session {key}"), tokens);
            let mut d = route(
                &r,
                &snap,
                Some(key),
                &t,
                &all_but(WorkerId(w), 2),
                T0,
                &mut rng,
            );
            d.lease.first_byte(T0, false);
        }
        let t = fresh("a new session", 500);
        let d = route(&r, &snap, Some("new"), &t, &[], T0, &mut rng);
        assert_eq!(d.worker, WorkerId(1), "seed {seed}");
    }
}

/// The turn-boundary rebalance (session 6): a session of a worker over its share of turns moves
/// only when that costs the fleet no more than staying costs this turn, its copy priced by the
/// load as placement prices one. Three sessions on worker 0 and one on worker 1 take a turn
/// every second; after eight turns worker 0 sends three of the four turns a second, and session
/// "short"'s history (1300 tokens: 130 ms of prefill) is the cheap one to move.
///
/// - Every queue empty: staying costs 15 ms, moving 145 ms plus the copy's delay to others.
///   It stays (the rule before moved it: the copy was under the 200 ms margin and the move
///   within the margin of staying; on the open-arrivals trace such moves were 22-46 a run, and
///   the cache they cost was the run's TTFT tail).
/// - 1000-token prefills queued on worker 0 (sent at 1 s, so by 9 s the first is done): 2000
///   tokens left there, worker 1 idle. Staying costs 215 ms, moving 145 ms plus a copy priced
///   at a light load (the sessions' turns: load 0.07). It moves.
/// - 4000 tokens left on 0 and 2000 on 1 (every worker busy: the shorter queue is about five
///   typical turns long, load at its cap of 0.8): staying costs 415 ms, moving 345 ms plus the
///   130 ms copy counted 5 times. It stays (unpriced, 345 ms was within the margin of staying
///   and the copy under it: it moved).
#[test]
fn a_rebalance_move_costs_the_fleet_no_more_than_staying() {
    let scenario = |on_0: usize, on_1: usize| {
        let f = roomy(2);
        let snap = f.snap(&[]);
        let r = agentic();
        let mut rng = Rng::seeded(11);
        let mut sessions: Vec<(&str, u32, String)> = vec![
            ("long-a", 0, fresh("long session a", 5000)),
            ("short", 0, fresh("short session", 900)),
            ("long-c", 0, fresh("long session c", 5000)),
            ("d", 1, fresh("session d", 900)),
        ];
        for secs in 1..=8 {
            let now = Duration::from_secs(secs);
            for (key, w, text) in &mut sessions {
                text.push_str(&fresh(&format!("{key} turn {secs}"), 50));
                let exclude = all_but(WorkerId(*w), 2);
                let mut d = route(&r, &snap, Some(key), text, &exclude, now, &mut rng);
                d.lease.first_byte(now, false);
            }
        }
        let now = Duration::from_secs(9);
        let _q0 = queue_on(&r, &snap, 0, on_0, "zero");
        let _q1 = queue_on(&r, &snap, 1, on_1, "one");
        let text = &mut sessions[1].2;
        text.push_str(&fresh("short turn 9", 50));
        let d = route(&r, &snap, Some("short"), text, &[], now, &mut rng);
        (d.worker, d.branch.unwrap())
    };
    assert_eq!(scenario(0, 0), (WorkerId(0), Branch::OccupiedHit), "quiet");
    assert_eq!(scenario(3, 0), (WorkerId(1), Branch::TtftMove), "behind");
    assert_eq!(scenario(5, 3), (WorkerId(0), Branch::OccupiedHit), "busy");
}

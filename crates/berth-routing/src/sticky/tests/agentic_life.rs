//! `agentic`'s placement by a session's life (issue #21, session 7), as scripted sequences on
//! the pure router: no clock, no IO. Prompts are text at 4 characters per token; the prior is
//! 10 ms + 0.1 ms per token.

use super::ttft::{agentic, all_but, evaluate_key, fresh, route};
use super::*;
use crate::policy::Report;

/// Two workers with room for everything; worker 0 holds a 2000-token prefix every session
/// opens with (the trace's shared tools and instructions, before any other worker has it)
/// and carries four live sessions, which take `turns` turns a second apart, each adding 1000
/// tokens (every first byte arrives at once: the queues are empty between turns). Then a new
/// session with the prefix arrives (`Some(key)`), or a keyless request with it (`None`).
fn after_turns(turns: u64, key: Option<&str>) -> WorkerId {
    let f = Fleet::with_kv(2, 1_000_000);
    let snap = f.snap(&[]);
    let r = agentic();
    let mut rng = Rng::seeded(7);
    let prefix = fresh("tools and instructions", 2000);
    let mut sessions: Vec<(String, String)> =
        (0..4).map(|i| (format!("s{i}"), prefix.clone())).collect();
    for secs in 0..turns {
        let now = Duration::from_secs(secs);
        for (k, text) in &mut sessions {
            text.push_str(&fresh(&format!("{k} turn {secs}"), 1000));
            let mut d = route(
                &r,
                &snap,
                Some(k),
                text,
                &all_but(WorkerId(0), 2),
                now,
                &mut rng,
            );
            d.lease.first_byte(now, false);
        }
    }
    let t = format!("{prefix}{}", fresh("a new session", 500));
    let now = Duration::from_secs(turns);
    route(&r, &snap, key, &t, &[], now, &mut rng).worker
}

/// Placement weighs what a new session's life costs: worker 0 holds the prefix (on worker 1
/// the new session's first turn costs a 2000-token copy: 10 + 0.1 x 2500 = 260 ms against 60
/// ms on worker 0), but worker 0 carries every live session.
///
/// - Each of its sessions has taken one turn: no turn rate is known and a session is expected
///   to take one turn, so nothing is coming after this one and the holder wins.
/// - Each has taken eight (a session is expected to take eight: seven more after this one):
///   worker 0 sends four turns a second of about 110 ms of prefill each, worker 1 none; each
///   of the new session's seven coming turns would wait about 80 ms behind them on worker 0
///   (the fleet's load 0.22, worker 0's share of it twice that), more than the copy costs
///   once. It goes to worker 1 (before the rule it stayed with the holder: the copy was
///   outside the band of one typical turn and the band's turn-rate rule never saw worker 1).
/// - A keyless request has no coming turns: the holder wins either way.
#[test]
fn a_new_session_takes_a_copy_to_an_idle_worker_when_its_life_on_the_holder_costs_more() {
    assert_eq!(after_turns(1, Some("new")), WorkerId(0), "one turn each");
    assert_eq!(after_turns(8, Some("new")), WorkerId(1), "eight turns each");
    assert_eq!(after_turns(8, None), WorkerId(0), "keyless");
}

/// The band of one typical turn buys balance, not copies. Worker 0 holds a 2000-token system
/// prompt and two sessions that use it; worker 1 holds another prompt and one session. The
/// sessions' turns are long and ten seconds apart (each adds 3000 tokens: a typical turn's
/// prefill is about 300 ms; the fleet's load is light, about 0.05), so the copy of the first
/// prompt to worker 1 (200 ms, about 210 with its load weight) falls inside the band, and
/// worker 1's sessions send fewer turns. A keyless request with the first prompt (no coming turns, so
/// the price is this turn's alone) stays with the worker holding its prompt: 60 ms there
/// against 260 ms (before the rule, the band's turn-rate rule sent it to worker 1 and the
/// prompt was copied).
#[test]
fn a_calmer_worker_within_the_band_does_not_win_a_copy() {
    for seed in 0..10 {
        let f = Fleet::with_kv(2, 1_000_000);
        let snap = f.snap(&[]);
        let r = agentic();
        let mut rng = Rng::seeded(seed);
        let first = fresh("first system prompt", 2000);
        let second = fresh("second system prompt", 2000);
        let mut sessions = [
            ("a", 0, first.clone()),
            ("b", 0, first.clone()),
            ("c", 1, second.clone()),
        ];
        for turn in 0..8 {
            let now = Duration::from_secs(10 * turn);
            for (k, w, text) in &mut sessions {
                text.push_str(&fresh(&format!("{k} turn {turn}"), 3000));
                let ex = all_but(WorkerId(*w), 2);
                let mut d = route(&r, &snap, Some(k), text, &ex, now, &mut rng);
                d.lease.first_byte(now, false);
            }
        }
        let t = format!("{first}{}", fresh("a keyless request", 500));
        let d = route(&r, &snap, None, &t, &[], Duration::from_secs(80), &mut rng);
        assert_eq!(d.worker, WorkerId(0), "seed {seed}");
    }
}

/// The typical turn is a continuing turn's, from what the engines report. A session's first
/// turn (3000 tokens) is read; its next turns stream unread (no text: the gateway does not
/// know their size). Until an answer reports one, an unread turn counts as the worker's mean
/// of read placements (5% of the first turn's 3000 tokens after one sample: the mean starts at
/// 0) and the typical turn is the first turn's 3000 tokens (310 ms); once the unread turns'
/// answers report 300 uncached tokens each (each turn adding 300 to the prompt), both are 300
/// tokens (40 ms).
#[test]
fn the_typical_turn_is_the_continuing_turn_the_engines_report() {
    let f = Fleet::new(2);
    let snap = f.snap(&[]);
    let r = agentic();
    let mut rng = Rng::seeded(2);
    let first = fresh("a session's first turn", 3000);
    let mut d = route(&r, &snap, Some("k"), &first, &[WorkerId(1)], T0, &mut rng);
    d.lease.first_byte(T0, false);
    let unread = |r: &Router, rng: &mut Rng| {
        let pairs = [("x-smg-routing-key", &b"k"[..])];
        let h = HeaderList(&pairs);
        let req = RouteRequest {
            stream: Some(true),
            ..keyed(&h)
        };
        let mut d = r.route(&req, &snap, T0, rng).unwrap();
        assert_eq!(d.worker, WorkerId(0));
        d.lease.first_byte(T0, false);
        d.lease.take_ticket().unwrap()
    };
    let sized = |r: &Router| {
        let e = evaluate_key(r, &snap, "k", T0);
        (e.estimates[0].own_tokens.round(), e.turn_ms.round())
    };
    let t = unread(&r, &mut rng);
    assert_eq!(sized(&r), (150.0, 310.0), "before any report");
    // each turn adds 300 tokens to the prompt and finds the rest cached
    let report = |turn: u64| Report {
        cached_tokens: 3000 + 300 * turn,
        prompt_tokens: Some(3300 + 300 * turn),
    };
    r.observe_reported(t, report(0), &snap);
    for turn in 1..4 {
        let t = unread(&r, &mut rng);
        r.observe_reported(t, report(turn), &snap);
    }
    assert_eq!(sized(&r), (300.0, 40.0), "after the reports");
}

//! `agentic`'s typical turn from what the engines report (issue #17, session 9), as scripted
//! sequences on the pure router: no clock, no IO. Prompts are text at 4 characters per token;
//! the prior is 10 ms + 0.1 ms per token.

use super::ttft::{agentic, all_but, evaluate_key, fresh, route};
use super::*;
use crate::policy::{Report, Ticket};

/// A turn of pinned session `key` that streams unread (no text), answered at `now`: its ticket.
fn unread_turn(r: &Router, snap: &WorkerSnapshot, key: &str, now: Duration) -> Ticket {
    let pairs = [("x-smg-routing-key", key.as_bytes())];
    let h = HeaderList(&pairs);
    let req = RouteRequest {
        stream: Some(true),
        ..keyed(&h)
    };
    let mut d = r.route(&req, snap, now, &mut Rng::seeded(1)).unwrap();
    d.lease.first_byte(now, false);
    d.lease.take_ticket().unwrap()
}

/// Opens `keys` as sessions of `group` on worker `on` (the only candidate), each with a
/// 3000-token first task, the engine reporting 5000 prompt tokens: none cached for the first
/// session, the group's 2000-token prompt for the others.
fn open_group(
    r: &Router,
    snap: &WorkerSnapshot,
    rng: &mut Rng,
    group: &str,
    keys: &[&str],
    on: WorkerId,
    fleet: u32,
) {
    for (i, k) in keys.iter().enumerate() {
        let t = format!("{group}{}", fresh(&format!("{k} first task"), 3000));
        let mut d = route(r, snap, Some(k), &t, &all_but(on, fleet), T0, rng);
        assert_eq!(d.worker, on);
        d.lease.first_byte(T0, false);
        let report = Report {
            cached_tokens: if i == 0 { 0 } else { 2000 },
            prompt_tokens: Some(5000),
        };
        r.observe_reported(d.lease.take_ticket().unwrap(), report, snap);
    }
}

/// Turns `turns` of every session in `groups` (group `w`'s keys, pinned to worker `w`), each at
/// `at(turn)` and streaming unread, the engine reporting `5000 + growth x turn` prompt tokens
/// with only the group's 2000-token prompt cached: each turn re-prefilled its history.
fn report_turns(
    r: &Router,
    snap: &WorkerSnapshot,
    groups: &[&[&str]],
    turns: std::ops::RangeInclusive<u64>,
    at: impl Fn(u64) -> Duration,
    growth: u64,
) {
    for turn in turns {
        let now = at(turn);
        for (w, keys) in groups.iter().enumerate() {
            for k in keys.iter() {
                let t = unread_turn(r, snap, k, now);
                assert_eq!(t.worker(), WorkerId(w as u32));
                let report = Report {
                    cached_tokens: 2000,
                    prompt_tokens: Some(5000 + growth * turn),
                };
                r.observe_reported(t, report, snap);
            }
        }
    }
}

/// Worker 0 holds a group's 2000-token prompt and four of its sessions, each opened with a
/// 3000-token task and taking a turn every 10 s that adds 100 tokens; worker 1 is idle. The
/// engine reports each continuing turn with only the group's prompt cached: it re-prefilled
/// the session's history (evicted between turns, or never kept), 3000-3700 tokens, although
/// the turn added 100. Then a new session of the group arrives.
///
/// On worker 0 its first turn costs 10 + 0.1 x 200 = 30 ms, on worker 1 the prompt's copy,
/// 230 ms. Priced with the re-prefills as the typical turn (about 360 ms), worker 0's four
/// sessions read as a load of 0.07 with worker 0 sending all of it, and the new session's
/// seven coming turns as 7 x 360 x 0.14 / 0.86, about 420 ms of waiting there: it took the
/// copy to worker 1, whose KV would then hold the group's prompt twice over the fleet (under
/// KV pressure each such copy evicts other sessions' histories, whose re-prefills made the
/// next copy look cheaper still: docs/benchmarks.md, #17 session 9). With the typical turn
/// what a turn adds (100 tokens, 20 ms) the waiting is about 1 ms and it stays with the group.
/// An unread turn still counts for what it cost in a worker's queue.
#[test]
fn a_re_prefilled_history_does_not_make_a_new_session_copy_its_groups_prompt() {
    let f = Fleet::with_kv(2, 1_000_000);
    let snap = f.snap(&[]);
    let r = agentic();
    let mut rng = Rng::seeded(5);
    let group = fresh("group prompt", 2000);
    let keys = ["s0", "s1", "s2", "s3"];
    open_group(&r, &snap, &mut rng, &group, &keys, WorkerId(0), 2);
    report_turns(
        &r,
        &snap,
        &[&keys],
        1..=7,
        |t| Duration::from_secs(10 * t),
        100,
    );
    let e = evaluate_key(&r, &snap, "s0", Duration::from_secs(80));
    assert_eq!(
        e.turn_ms.round(),
        20.0,
        "the typical turn: what a turn adds"
    );
    assert!(
        e.estimates[0].own_tokens > 3000.0,
        "an unread turn counts for what it cost: {}",
        e.estimates[0].own_tokens
    );
    let t = format!("{group}{}", fresh("a new session", 200));
    let d = route(
        &r,
        &snap,
        Some("new"),
        &t,
        &[],
        Duration::from_secs(80),
        &mut rng,
    );
    assert_eq!(d.worker, WorkerId(0));
}

/// Two groups, each with a 2000-token prompt on its own worker and four sessions there,
/// opened with 3000-token tasks; each session takes a turn every second that adds 100
/// tokens, and the engine reports every continuing turn with only its group's prompt cached:
/// each re-prefilled its history, 3100-3700 tokens. Then 3000 tokens queue on worker 0 and a
/// new session of group A (200 tokens of its own) arrives.
///
/// On worker 0 its first turn costs 10 + 0.1 x 3200 = 330 ms; on worker 1 the group's prompt
/// must be copied, 230 ms, plus the copy's 2000 extra tokens priced by the fleet's load. Both
/// workers' sessions send the same turns, so the session's coming turns wait alike on either
/// (they decide nothing here). The workers are busy with what the turns *cost*: 8 turns a
/// second of about 330 ms each over two workers, a load past `LOAD_MAX` (0.8), so the copy
/// counts 4 times its 200 ms of prefill for the requests queued behind it: 1030 ms, and the
/// session stays with its group. Priced by what the turns *add* (20 ms each), the load read
/// 0.08 and the copy 247 ms: it went to worker 1, holding the group's prompt twice over the
/// fleet (under KV pressure each such copy evicts other sessions' histories: docs/benchmarks.md,
/// #17 sessions 13 and 14). The coming turns stay priced by what they add (`turn_ms`).
#[test]
fn the_fleets_load_counts_what_the_turns_cost_so_a_busy_fleet_keeps_a_group_together() {
    let f = Fleet::with_kv(2, 1_000_000);
    let snap = f.snap(&[]);
    let r = agentic();
    let mut rng = Rng::seeded(7);
    let groups = [fresh("group A prompt", 2000), fresh("group B prompt", 2000)];
    let keys = [["a0", "a1", "a2", "a3"], ["b0", "b1", "b2", "b3"]];
    for (w, (group, keys)) in groups.iter().zip(keys).enumerate() {
        open_group(&r, &snap, &mut rng, group, &keys, WorkerId(w as u32), 2);
    }
    let groups_keys = [&keys[0][..], &keys[1][..]];
    report_turns(
        &r,
        &snap,
        &groups_keys,
        1..=7,
        |t| T0 + Duration::from_secs(t),
        100,
    );
    let now = T0 + Duration::from_secs(8);
    let e = evaluate_key(&r, &snap, "a0", now);
    assert_eq!(e.turn_ms.round(), 20.0, "coming turns: what a turn adds");
    assert!(
        e.turn_cost_ms > 300.0,
        "the load's unit: what a turn cost, {}",
        e.turn_cost_ms
    );
    let _queued: Vec<Decision> = (0..3)
        .map(|i| {
            let t = fresh(&format!("backlog {i}"), 1000);
            route(&r, &snap, None, &t, &all_but(WorkerId(0), 2), now, &mut rng)
        })
        .collect();
    let t = format!("{}{}", groups[0], fresh("a new session of A", 200));
    let d = route(&r, &snap, Some("new"), &t, &[], now, &mut rng);
    assert_eq!(d.worker, WorkerId(0), "the copy costs the busy fleet more");
}

/// Under KV pressure (issue #17 session 15): group A's 2000-token prompt is on worker 0 with
/// eight sessions, group B's on worker 1 with one; every session takes a turn a second that
/// adds 200 tokens, and the engines report each continuing turn with only its group's prompt
/// cached: it re-prefilled its history (3200-5000 tokens for 200 added), so the fleet's KV
/// no longer holds its sessions' histories. Then a new session of group A (200 tokens of its
/// own) arrives.
///
/// Worker 0 sends eight of the nine turns a second, so the new session's ten coming turns
/// (the live sessions' mean so far, less this one) are priced as waiting there about
/// 10 x 30 ms x 7 = 2.1 s and about 0.06 s on worker 1; the copy of the group's prompt to
/// worker 1 costs 10 + 0.1 x 2200 = 230 ms plus four times its 2000 extra tokens' prefill for
/// the requests behind it (the load at `LOAD_MAX`), about 1.1 s: without the rule the session
/// took the copy to worker 1, whose KV then had to hold two groups' prompts (in
/// `kvpressure` such copies, from a burst of one group's sessions, evicted the other group's
/// prompt there and tipped runs from 0.78 to 0.45-0.65 cached: docs/benchmarks.md). Under KV
/// pressure it stays with the holder of its prompt unless staying there is clearly worse by
/// the move rule (30 ms on worker 0 against about 1.9 x 1030 + 200 ms): it goes to worker 0;
/// with 25,000 tokens queued on worker 0 (2.5 s) it is, and the copy goes to worker 1.
#[test]
fn under_kv_pressure_a_new_session_stays_with_its_prompt_unless_staying_is_clearly_worse() {
    let scenario = |backlog: usize| {
        let f = Fleet::with_kv(2, 1_000_000);
        let snap = f.snap(&[]);
        let r = agentic();
        let mut rng = Rng::seeded(11);
        let groups = [fresh("group A prompt", 2000), fresh("group B prompt", 2000)];
        let a: Vec<String> = (0..8).map(|i| format!("a{i}")).collect();
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let keys = [a, vec!["b0"]];
        for (w, (group, keys)) in groups.iter().zip(&keys).enumerate() {
            open_group(&r, &snap, &mut rng, group, keys, WorkerId(w as u32), 2);
        }
        let groups_keys = [&keys[0][..], &keys[1][..]];
        report_turns(
            &r,
            &snap,
            &groups_keys,
            1..=10,
            |t| T0 + Duration::from_secs(t),
            200,
        );
        let now = T0 + Duration::from_secs(11);
        let e = evaluate_key(&r, &snap, "a0", now);
        assert!(e.kv_pressure, "continuing turns re-prefill their histories");
        let _queued: Vec<Decision> = (0..backlog)
            .map(|i| {
                let t = fresh(&format!("backlog {i}"), 1000);
                route(&r, &snap, None, &t, &all_but(WorkerId(0), 2), now, &mut rng)
            })
            .collect();
        let t = format!("{}{}", groups[0], fresh("a new session of A", 200));
        route(&r, &snap, Some("new"), &t, &[], now, &mut rng).worker
    };
    assert_eq!(
        scenario(0),
        WorkerId(0),
        "the session stays with its prompt"
    );
    assert_eq!(
        scenario(25),
        WorkerId(1),
        "unless staying there is clearly worse"
    );
}

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
    for (i, k) in keys.iter().enumerate() {
        let t = format!("{group}{}", fresh(&format!("{k} first task"), 3000));
        let mut d = route(
            &r,
            &snap,
            Some(k),
            &t,
            &all_but(WorkerId(0), 2),
            T0,
            &mut rng,
        );
        d.lease.first_byte(T0, false);
        let report = Report {
            cached_tokens: if i == 0 { 0 } else { 2000 },
            prompt_tokens: Some(5000),
        };
        r.observe_reported(d.lease.take_ticket().unwrap(), report, &snap);
    }
    for turn in 1..8u64 {
        let now = Duration::from_secs(10 * turn);
        for k in keys {
            let t = unread_turn(&r, &snap, k, now);
            assert_eq!(t.worker(), WorkerId(0));
            let report = Report {
                cached_tokens: 2000,
                prompt_tokens: Some(5000 + 100 * turn),
            };
            r.observe_reported(t, report, &snap);
        }
    }
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

//! `agentic`'s KV room (issue #21 session 17): placement reads what each worker's live sessions
//! hold by the engines' reports, not by the prompts it read (their first turns), as scripted
//! sequences on the pure router: no clock, no IO. Prompts are text at 4 characters per token;
//! the prior is 10 ms + 0.1 ms per token.

use super::ttft::{agentic, all_but, evaluate_key, fresh, route};
use super::*;
use crate::policy::Report;

/// Opens session `key` on worker `on` with a 1000-token first prompt of its own, reported
/// uncached.
fn open(r: &Router, snap: &WorkerSnapshot, rng: &mut Rng, key: &str, on: WorkerId) {
    let t = fresh(&format!("{key} first task"), 1000);
    let mut d = route(r, snap, Some(key), &t, &all_but(on, 2), T0, rng);
    assert_eq!(d.worker, on);
    d.lease.first_byte(T0, false);
    let report = Report {
        cached_tokens: 0,
        prompt_tokens: Some(1000),
    };
    r.observe_reported(d.lease.take_ticket().unwrap(), report, snap);
}

/// A turn of pinned session `key` that streams unread at `now`, the engine reporting `prompt`
/// tokens with all but the last 100 cached.
fn turn(r: &Router, snap: &WorkerSnapshot, key: &str, now: Duration, prompt: u64) -> WorkerId {
    let pairs = [("x-smg-routing-key", key.as_bytes())];
    let h = HeaderList(&pairs);
    let req = RouteRequest {
        stream: Some(true),
        ..keyed(&h)
    };
    let mut d = r.route(&req, snap, now, &mut Rng::seeded(1)).unwrap();
    d.lease.first_byte(now, false);
    let report = Report {
        cached_tokens: prompt - 100,
        prompt_tokens: Some(prompt),
    };
    r.observe_reported(d.lease.take_ticket().unwrap(), report, snap);
    d.worker
}

/// Two workers with 20,000 tokens of KV each. Worker 0 carries three coding-agent sessions
/// whose histories grew from a 1000-token first prompt to 6500 tokens (a turn every 2 s,
/// streamed unread, the engine reporting the growing prompt, all of it cached but the turn's
/// own 100 tokens: the worker still holds them); worker 1 three sessions that stayed near
/// 1000 tokens but take a turn every second. Then a new session (1000 tokens of its own)
/// arrives.
///
/// Worker 0's live sessions send half of worker 1's turns, so by the turn rates it is the
/// calmer worker, and by the prompts the router read (the first turns, 1000 tokens each) it has
/// room. But by what the engine reported its sessions hold 19,500 tokens, past 90% of its KV
/// (`KV_ROOM`): the new session's 1000 tokens there evict 2500 tokens of its sessions'
/// histories, which their next turns must prefill again (250 ms at 0.1 ms per token, more
/// for the requests queued behind them). It goes to worker 1, which has room. Read by the
/// working set alone (the prompts read) it went to worker 0.
#[test]
fn a_new_session_goes_where_the_live_sessions_leave_room_by_the_engines_reports() {
    let f = Fleet::with_kv(2, 20_000);
    let snap = f.snap(&[]);
    let r = agentic();
    let mut rng = Rng::seeded(3);
    for k in ["a0", "a1", "a2"] {
        open(&r, &snap, &mut rng, k, WorkerId(0));
    }
    for k in ["b0", "b1", "b2"] {
        open(&r, &snap, &mut rng, k, WorkerId(1));
    }
    for s in 1..=10u64 {
        let now = T0 + Duration::from_secs(s);
        for k in ["b0", "b1", "b2"] {
            assert_eq!(turn(&r, &snap, k, now, 1000 + 10 * s), WorkerId(1));
        }
        if s % 2 == 0 {
            for k in ["a0", "a1", "a2"] {
                assert_eq!(turn(&r, &snap, k, now, 1000 + 550 * s), WorkerId(0));
            }
        }
    }
    let now = T0 + Duration::from_millis(10_500);
    let e = evaluate_key(&r, &snap, "new", now);
    let (w0, w1) = (&e.estimates[0], &e.estimates[1]);
    assert_eq!(w0.kv_set, 3000.0, "the working set: the prompts read");
    assert_eq!(w0.kv_live, 19_500.0, "the live KV: the engine's reports");
    assert!(
        w0.turn_rate < w1.turn_rate,
        "{} vs {}",
        w0.turn_rate,
        w1.turn_rate
    );
    let t = fresh("a new session", 1000);
    let d = route(&r, &snap, Some("new"), &t, &[], now, &mut rng);
    assert_eq!(d.worker, WorkerId(1), "worker 0's sessions leave no room");
}

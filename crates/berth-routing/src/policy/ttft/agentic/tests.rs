//! The pinned worker's credit (module docs, "The pinned worker's credit") as scripted
//! decisions on the pure policy: evaluations built by hand, no clock, no IO. The cost model is
//! the prior's, 10 ms + 0.1 ms per token; no turn rates are known, so the fleet's load is 0
//! and a copy costs only its own prefill.

use super::*;
use crate::policy::ttft::cost::Prediction;

const KV: f64 = 32_768.0;
/// A session's 5100-token prompt, of which every worker holds the 1000-token shared prefix.
const PROMPT: f64 = 5100.0;
const COMMON: f64 = 1000.0;

/// Worker `w` with `queued` tokens of prefill ahead, `own` of the prompt uncached (by the
/// prefix index) and `live` tokens of live sessions (the ledger's live set).
fn est(w: u32, queued: f64, own: f64, live: f64) -> Estimate {
    Estimate {
        worker: WorkerId(w),
        own_tokens: own,
        prediction: Prediction {
            ttft_ms: 10.0 + 0.1 * (queued + own),
            ahead_tokens: queued,
            decoding: 0.0,
        },
        cached_chars: 0,
        kv_set: 0.0,
        kv_live: live,
        turn_rate: 0.0,
        sessions: 1,
        kv_cap: KV,
        per_token_ms: 0.1,
    }
}

/// A read turn of a session pinned to worker 0, whose engine last reported its prompt at 5000
/// tokens there (the turns since streamed unread: the prefix index knows only the session's
/// first 1000 tokens, the shared prefix, so it reads 4100 of them as uncached on worker 0).
fn turn(estimates: Vec<Estimate>) -> Evaluation {
    Evaluation {
        with_text: true,
        prompt_tokens: PROMPT,
        common_tokens: COMMON,
        session_rate: (0.0, 0),
        reported: Some((WorkerId(0), 5000.0)),
        future_turns: 0.0,
        parent: None,
        tip: None,
        turn_ms: 0.0,
        turn_cost_ms: 0.0,
        estimates,
    }
}

fn moves(eval: &Evaluation) -> Vec<Option<WorkerId>> {
    let cfg = TtftConfig::default();
    (0..10)
        .map(|seed| move_target(&cfg, eval, WorkerId(0), &mut Rng::seeded(seed)))
        .collect()
}

/// Worker 0's live sessions (20,000 tokens by their reports) fit its 32,768 tokens of KV, and
/// it has 500 ms of prefill queued; worker 1 is idle. Worker 0 keeps the credit: it holds the
/// 5000 tokens its engine reported, staying costs 10 + 0.1 x (5000 + 100) = 520 ms against a
/// re-prefill of the history on worker 1, 10 + 0.1 x 4100 = 420 ms, within the move factor:
/// it stays. Priced from the prefix index alone (4100 tokens to recompute on worker 0, 920 ms,
/// and the move factor near 1 with the share "lost") it moved, re-prefilling a history its
/// worker still held.
#[test]
fn a_session_stays_while_its_workers_sessions_fit_its_kv() {
    let eval = turn(vec![
        est(0, 5000.0, PROMPT - COMMON, 20_000.0),
        est(1, 0.0, PROMPT - COMMON, 5000.0),
    ]);
    assert_eq!(moves(&eval), vec![None; 10]);
}

/// The same, but worker 0's live sessions have outgrown its KV (40,000 tokens by their
/// reports): no credit, the turn is priced as the prefix index says, a re-prefill of its
/// history there (920 ms), and worker 1, with room for it, re-prefills it in 420 ms: it moves. Crediting worker 0 regardless kept
/// the session where its history was being evicted (session 14: lost histories rose in place
/// of the moves).
#[test]
fn a_session_moves_when_its_worker_is_over_its_kv_and_another_has_room() {
    let eval = turn(vec![
        est(0, 5000.0, PROMPT - COMMON, 40_000.0),
        est(1, 0.0, PROMPT - COMMON, 5000.0),
    ]);
    assert_eq!(moves(&eval), vec![Some(WorkerId(1)); 10]);
}

/// Worker 0 is over its KV as above. Worker 1 is idle but over its KV as well (31,000 live
/// tokens: the history's 4100 would evict 2,332 of its sessions' tokens); worker 2 has 100 ms
/// of prefill queued and room (5,000 live tokens). The move goes to worker 2 (10 + 0.1 x
/// (1000 + 4100) = 520 ms, still clearly less than staying's 920), not to the idle worker
/// whose sessions the copy would evict.
#[test]
fn a_session_does_not_move_onto_a_worker_that_is_itself_over_its_kv() {
    let eval = turn(vec![
        est(0, 5000.0, PROMPT - COMMON, 40_000.0),
        est(1, 0.0, PROMPT - COMMON, 31_000.0),
        est(2, 1000.0, PROMPT - COMMON, 5000.0),
    ]);
    assert_eq!(moves(&eval), vec![Some(WorkerId(2)); 10]);
}

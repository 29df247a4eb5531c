//! The turns that stream unread (`ttft_aware`'s pinned hot path): their answers credit the
//! session's prefix in the index without their bodies.

use super::*;

/// Worker 0 holds two 2,048-character prompts but not three; session `k1`'s first turn is
/// read, a keyless prompt follows, then `k1`'s unread turn is answered, then a third prompt
/// comes. Returns what the index then predicts worker 0 holds of `k1`'s prompt.
fn after_an_unread_turn(mode: FeedbackMode) -> usize {
    let stats: Vec<Arc<WorkerStats>> = (0..2).map(|_| Arc::default()).collect();
    stats[0].set_kv_capacity_tokens(1_100);
    let snap = fleet(&stats);
    let r = router(PolicyKind::TtftAware, mode);
    let (p1, p2, p3) = (
        text("session one's prompt ", 2048),
        text("another client's prompt ", 2048),
        text("a third prompt ", 2048),
    );
    let t1 = send(&r, &snap, &p1, Some("k1")).unwrap();
    let key = t1.session;
    assert!(key.is_some());
    r.observe_reported(t1, report(0, &p1), &snap);
    let t2 = send(&r, &snap, &p2, None).unwrap();
    r.observe_reported(t2, report(0, &p2), &snap);
    // k1's next turn streamed unread: only the session's previous answer predicts it
    let unread = Ticket {
        worker: W0,
        expectation: None,
        session: key,
    };
    let o = r
        .observe_reported(unread, report(2048, &p1), &snap)
        .unwrap();
    assert!(o.from_session);
    assert_eq!(o.verdict, Verdict::Confirmed);
    let t3 = send(&r, &snap, &p3, None).unwrap();
    r.observe_reported(t3, report(0, &p3), &snap);
    send(&r, &snap, &p1, None)
        .unwrap()
        .expectation
        .unwrap()
        .predicted_bytes()
}

#[test]
fn an_unread_turns_answer_keeps_its_sessions_prefix_recent() {
    // `on`: the unread turn touched k1's prefix, so the third prompt evicted the other
    // client's (least recently used), as the engine's LRU does
    assert_eq!(after_an_unread_turn(FeedbackMode::On), 2048);
    // `measure` leaves the index alone: it evicts k1's prefix, which the worker just used
    assert_eq!(after_an_unread_turn(FeedbackMode::Measure), 0);
}

/// Worker 0 (KV for 1,300 tokens: 5,200 index bytes) holds a shared system prompt (2,048
/// characters) and session `k1` of another prompt (2,048) pinned there; `k1`'s unread turn
/// falls short, and its next turn (its history grown to 4,096 characters) is routed as the
/// gateway routes it. Returns that turn's body path and what the index then predicts worker 0
/// holds of a new session of the system prompt.
fn a_short_session_next_to_a_shared_prompt(policy: PolicyKind) -> (BodyPath, usize) {
    let stats: Vec<Arc<WorkerStats>> = (0..2).map(|_| Arc::default()).collect();
    stats[0].set_kv_capacity_tokens(1_300);
    let snap = fleet(&stats);
    let r = router(policy, FeedbackMode::On);
    let system = text("a shared system prompt ", 2048);
    let t0 = send(&r, &snap, &cat(&system, b"first task"), Some("k0")).unwrap();
    r.observe_reported(t0, report(0, &system), &snap);
    let p1 = text("another agent's first turn ", 2048);
    let t1 = send(&r, &snap, &p1, Some("k1")).unwrap();
    let key = t1.session.unwrap();
    r.observe_reported(t1, report(0, &p1), &snap);
    // k1's next turn streamed unread and fell short
    let unread = Ticket {
        worker: W0,
        expectation: None,
        session: Some(key),
    };
    r.observe_reported(unread, report(0, &p1), &snap);
    let p2 = cat(&p1, &text("and its history since ", 2048));
    let (path, _) = route_as_gateway(&r, &snap, &p2, Some("k1"), Prompt::HashesWhenRead);
    let held = send(&r, &snap, &cat(&system, b"another task"), Some("k2"))
        .unwrap()
        .expectation
        .unwrap()
        .predicted_bytes();
    (path, held)
}

#[test]
fn agentic_does_not_reread_a_short_session_and_keeps_the_shared_prompt() {
    // read, the turn added k1's whole history to worker 0's share of the index (bounded by its
    // KV), which evicted the system prompt the engine still held: the next session of that
    // prompt saw no holder (0 bytes predicted) and, under KV pressure, copied it elsewhere
    let (path, held) = a_short_session_next_to_a_shared_prompt(PolicyKind::Agentic);
    assert_eq!(held, 2048, "the shared prompt stays in the index");
    assert_eq!(path, BodyPath::Streamed("ttft_pinned"));
    // `ttft_aware` re-reads it (it decides the turn with its text and may move it)
    let (path, _) = a_short_session_next_to_a_shared_prompt(PolicyKind::TtftAware);
    assert_eq!(path, BodyPath::FEEDBACK_REREAD);
}

#[test]
fn ttft_aware_decides_a_turn_read_for_the_feedback_with_its_text() {
    // the queue's estimate learns a turn's uncached tokens from turns decided with text
    let learned = |policy| {
        let stats: Vec<Arc<WorkerStats>> = (0..2).map(|_| Arc::default()).collect();
        let snap = fleet(&stats);
        let r = router(policy, FeedbackMode::On);
        let p1 = text("a session's first turn ", 2048);
        let t1 = send_as(&r, &snap, &p1, Some("k1"), Prompt::Hashes).unwrap();
        let key = t1.session.unwrap();
        r.observe_reported(t1, report(0, &p1), &snap);
        let unread = Ticket {
            worker: W0,
            expectation: None,
            session: Some(key),
        };
        r.observe_reported(unread, report(0, &p1), &snap);
        let mean = || r.policy.ttft().unwrap().state(&stats[0]).mean_own_tokens();
        let before = mean();
        let p2 = cat(&p1, &text("and a long history since ", 4096));
        send_as(&r, &snap, &p2, Some("k1"), Prompt::Hashes).unwrap();
        mean() - before
    };
    assert!(learned(PolicyKind::TtftAware) > 0.0);
}

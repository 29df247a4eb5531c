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

#[test]
fn a_turn_read_for_the_feedback_is_decided_as_an_unread_one() {
    read_for_the_feedback(Prompt::Text);
    // the gateway hands the router the prompt's hashes, not its text (this case was missed:
    // the re-read turns were routed as read ones in the gateway, docs/benchmarks.md session 5)
    read_for_the_feedback(Prompt::Hashes);
}

fn read_for_the_feedback(how: Prompt) {
    let send = |r: &Router, snap: &WorkerSnapshot, t: &[u8], key: Option<&str>| {
        send_as(r, snap, t, key, how)
    };
    let stats: Vec<Arc<WorkerStats>> = (0..2).map(|_| Arc::default()).collect();
    let snap = fleet(&stats);
    let r = router(PolicyKind::Agentic, FeedbackMode::On);
    let ledger = |r: &Router| r.policy.ttft().unwrap().working_set_of(W0);
    let p1 = text("an agent's first turn ", 2048);
    let t1 = send(&r, &snap, &p1, Some("k1")).unwrap();
    let key = t1.session.unwrap();
    r.observe_reported(t1, report(0, &p1), &snap);
    let size = ledger(&r);
    assert!(size > 0);
    let path = |r: &Router| {
        let headers = HeaderList(&[("x-smg-routing-key", b"k1")]);
        r.request_body_path(&headers, false, false, &snap, Duration::from_secs(1))
    };
    assert_eq!(path(&r), BodyPath::Streamed("ttft_pinned"));
    // its next turn streamed unread and fell short: the turn after it is read
    let unread = Ticket {
        worker: W0,
        expectation: None,
        session: Some(key),
    };
    r.observe_reported(unread, report(0, &p1), &snap);
    assert!(r.feedback.session_short(key));
    assert_eq!(path(&r), BodyPath::FEEDBACK_REREAD);
    let p2 = cat(&p1, &text("and a long history since ", 4096));
    let t2 = send(&r, &snap, &p2, Some("k1")).unwrap();
    // the index predicted it (the answer is compared with the index) ...
    assert_eq!(t2.expectation.unwrap().predicted_bytes(), 2048);
    // ... and the session ledger kept the size an unread turn leaves
    assert_eq!(ledger(&r), size, "{how:?}");
    // a turn read for its own sake (not short any more) records its size
    let t3 = send(&r, &snap, &p2, Some("k1")).unwrap();
    r.observe_reported(t3, report(p2.len(), &p2), &snap);
    let p3 = cat(&p2, b"more");
    send(&r, &snap, &p3, Some("k1")).unwrap();
    assert!(ledger(&r) > size, "{} vs {size}", ledger(&r));
}

#[test]
fn ttft_aware_decides_a_turn_read_for_the_feedback_with_its_text() {
    // the queue's estimate learns a turn's uncached tokens only from turns decided with text
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
    assert_eq!(learned(PolicyKind::Agentic), 0.0);
}

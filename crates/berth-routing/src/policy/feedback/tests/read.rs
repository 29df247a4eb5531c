//! The turns whose bodies were read (the index predicted their cached tokens): under `on`
//! their confirmed answers refresh the prompt's recency in the index.

use super::*;

/// Worker 0 holds two 2,048-character prompts but not three; `p1` and then `p2` are sent
/// (read), `p2`'s answer comes back first, then `p1`'s (so the engine used `p1` last), then a
/// third prompt is sent. Returns what the index then predicts worker 0 holds of `p1` (of `p2`
/// when `second`).
fn answers_out_of_order(mode: FeedbackMode, second: bool) -> usize {
    let stats: Vec<Arc<WorkerStats>> = (0..2).map(|_| Arc::default()).collect();
    stats[0].set_kv_capacity_tokens(1_100);
    let snap = fleet(&stats);
    let r = router(PolicyKind::TtftAware, mode);
    let (p1, p2, p3) = (
        text("a long first prompt ", 2048),
        text("a second prompt sent after it ", 2048),
        text("a third prompt ", 2048),
    );
    let t1 = send(&r, &snap, &p1, None).unwrap();
    let t2 = send(&r, &snap, &p2, None).unwrap();
    r.observe_reported(t2, report(0, &p2), &snap);
    let o = r.observe_reported(t1, report(0, &p1), &snap).unwrap();
    assert_eq!(o.verdict, Verdict::Confirmed);
    assert!(!o.from_session);
    let t3 = send(&r, &snap, &p3, None).unwrap();
    r.observe_reported(t3, report(0, &p3), &snap);
    send(&r, &snap, if second { &p2 } else { &p1 }, None)
        .unwrap()
        .expectation
        .unwrap()
        .predicted_bytes()
}

#[test]
fn a_read_turns_confirmed_answer_keeps_its_prompt_recent() {
    // `on`: p1's answer touched it after p2's, so the third prompt evicted p2 (least recently
    // used by the engine), as the engine's LRU does
    assert_eq!(answers_out_of_order(FeedbackMode::On, false), 2048);
    assert_eq!(answers_out_of_order(FeedbackMode::On, true), 0);
    // `measure` leaves the index's order as the sends stamped it: p1 goes, though the worker
    // used it last
    assert_eq!(answers_out_of_order(FeedbackMode::Measure, false), 0);
    assert_eq!(answers_out_of_order(FeedbackMode::Measure, true), 2048);
}

/// Worker 0 is sent S (answered), then S+B, then S+A; S+B's answer (S cached, as predicted) comes back,
/// then S+A's reports only the first half of S cached. Returns what the index then predicts
/// worker 0 holds of S+B (S is 1,024 characters, B 1,024).
fn a_branch_answered_before_a_loss(policy: PolicyKind, mode: FeedbackMode) -> usize {
    let stats: Vec<Arc<WorkerStats>> = (0..2).map(|_| Arc::default()).collect();
    stats[0].set_kv_capacity_tokens(100_000);
    let snap = fleet(&stats);
    let r = router(policy, mode);
    let s = text("a shared system prompt ", 1024);
    let (sb, sa) = (
        cat(&s, &text("bravo's task ", 1024)),
        cat(&s, &text("alpha's task ", 1024)),
    );
    let ts = send(&r, &snap, &s, None).unwrap();
    r.observe_reported(ts, report(0, &s), &snap);
    let tb = send(&r, &snap, &sb, None).unwrap();
    let ta = send(&r, &snap, &sa, None).unwrap();
    let o = r.observe_reported(tb, report(1024, &sb), &snap).unwrap();
    assert_eq!(o.verdict, Verdict::Confirmed);
    let o = r.observe_reported(ta, report(512, &sa), &snap).unwrap();
    assert_eq!(o.verdict, Verdict::Shortfall);
    send(&r, &snap, &sb, None)
        .unwrap()
        .expectation
        .unwrap()
        .predicted_bytes()
}

#[test]
fn an_answer_does_not_spare_its_branch_from_a_later_requests_loss() {
    // S+B's answer showed B held when S+B started; S+A, sent after S+B and started after it
    // ended, found S half gone, so B (hanging below the lost part) was gone too. The answer's
    // refresh must not count as a use by a request sent after S+A: that spared B, and
    // `cache_aware` kept sending S+B's sessions to a worker that had lost them
    for policy in [PolicyKind::CacheAware, PolicyKind::TtftAware] {
        assert_eq!(
            a_branch_answered_before_a_loss(policy, FeedbackMode::On),
            1024,
            "{policy:?}"
        );
        assert_eq!(
            a_branch_answered_before_a_loss(policy, FeedbackMode::Measure),
            2048,
            "{policy:?}"
        );
    }
}

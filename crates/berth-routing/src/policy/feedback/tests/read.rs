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

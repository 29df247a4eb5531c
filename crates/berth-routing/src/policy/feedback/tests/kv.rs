//! The learned KV estimate moves only on evidence about eviction.

use super::*;

#[test]
fn only_an_eviction_of_an_answered_prefix_moves_the_kv_estimate() {
    let stats: Vec<Arc<WorkerStats>> = (0..2).map(|_| Arc::default()).collect();
    stats[0].set_kv_capacity_tokens(100_000);
    let snap = fleet(&stats);
    let r = router(PolicyKind::TtftAware, FeedbackMode::On);
    let observe = |t: Ticket, cached: usize, p: &[u8]| {
        r.observe_reported(t, report(cached, p), &snap)
            .unwrap()
            .verdict
    };
    // the same prompt sent twice before any answer: the second's prediction is a guess the
    // worker never had a chance to meet (both were computed side by side)
    let p = text("a long conversation ", 8192);
    let first = send(&r, &snap, &p, None).unwrap();
    let second = send(&r, &snap, &p, None).unwrap();
    assert_eq!(observe(first, 0, &p), Verdict::Confirmed);
    assert_eq!(observe(second, 0, &p), Verdict::Shortfall);
    assert_eq!(stats[0].learned_kv_tokens(), None, "a guess is no eviction");
    // shown held now: its next turn keeps it (the prior, the reported capacity)
    let p2 = cat(&p, &text("its second turn ", 1024));
    assert_eq!(
        observe(send(&r, &snap, &p2, None).unwrap(), 8192, &p2),
        Verdict::Confirmed
    );
    assert_eq!(stats[0].learned_kv_tokens(), Some(100_000));
    // another conversation, shown held too
    let q = text("another conversation ", 4096);
    observe(send(&r, &snap, &q, None).unwrap(), 0, &q);
    // a flush: the next turn finds nothing cached; no capacity change
    let p3 = cat(&p2, &text("its third turn ", 1024));
    assert_eq!(
        observe(send(&r, &snap, &p3, None).unwrap(), 0, &p3),
        Verdict::Shortfall
    );
    assert_eq!(stats[0].learned_kv_tokens(), Some(100_000), "a flush");
    // nor when the other conversation, shown held before the flush, turns out half gone
    let q2 = cat(&q, &text("its second turn ", 1024));
    assert_eq!(
        observe(send(&r, &snap, &q2, None).unwrap(), 2048, &q2),
        Verdict::Shortfall
    );
    assert_eq!(stats[0].learned_kv_tokens(), Some(100_000), "after a flush");
    // a turn shown held since, then its tail lost while its head stayed: an eviction
    let p4 = cat(&p3, &text("its fourth turn ", 2048));
    assert_eq!(
        observe(send(&r, &snap, &p4, None).unwrap(), p3.len(), &p4),
        Verdict::Confirmed
    );
    let p5 = cat(&p4, &text("its fifth turn ", 512));
    assert_eq!(
        observe(send(&r, &snap, &p5, None).unwrap(), p3.len(), &p5),
        Verdict::Shortfall
    );
    let learned = stats[0].learned_kv_tokens().unwrap();
    assert!((25_000..100_000).contains(&learned), "{learned}");
    // the reported capacity still bounds the index
    assert_eq!(stats[0].effective_kv_tokens(), Some(100_000));
}

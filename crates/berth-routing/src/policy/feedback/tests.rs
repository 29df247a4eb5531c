//! Feedback as scripted sequences on the pure index and router: no clock, no IO.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::key::HeaderList;
use crate::policy::prefix_index::Index;
use crate::{
    PolicyKind, Rng, RouteRequest, Router, RouterOptions, WorkerEntry, WorkerSnapshot, WorkerStats,
};

fn text(seed: &str, len: usize) -> Vec<u8> {
    seed.bytes().cycle().take(len).collect()
}

fn cat(a: &[u8], b: &[u8]) -> Vec<u8> {
    [a, b].concat()
}

fn h(t: &[u8]) -> PrefixHashes {
    PrefixHashes::of(t)
}

const W0: WorkerId = WorkerId(0);

#[test]
fn a_difference_counts_only_past_the_slack() {
    assert_eq!(verdict(1000.0, 980.0), Verdict::Confirmed);
    assert_eq!(verdict(1000.0, 500.0), Verdict::Shortfall);
    assert_eq!(verdict(0.0, 500.0), Verdict::Surplus);
    // 64 tokens + 5% of the prediction: a 16-token block boundary is no shortfall
    assert_eq!(verdict(100.0, 40.0), Verdict::Confirmed);
    assert_eq!(verdict(100.0, 30.0), Verdict::Shortfall);
    assert_eq!(verdict(10_000.0, 9_500.0), Verdict::Confirmed);
    assert_eq!(verdict(10_000.0, 9_000.0), Verdict::Shortfall);
}

#[test]
fn the_kv_estimate_follows_shortfalls_within_its_bounds() {
    let cap = Some(100_000);
    // the prior is the reported capacity; a shortfall moves halfway to what was left
    let e = next_kv_estimate(cap, 0, None, Verdict::Shortfall, 80_000.0, 40_000.0);
    assert_eq!(e, Some(70_000));
    // a sample above the estimate does not raise it
    assert_eq!(
        next_kv_estimate(cap, 0, e, Verdict::Shortfall, 90_000.0, 1_000.0),
        e
    );
    // repeated total losses stop at capacity / 16
    let mut e = e;
    for _ in 0..50 {
        e = next_kv_estimate(cap, 0, e, Verdict::Shortfall, 0.0, 1_000.0);
    }
    assert_eq!(e, Some(6_250));
    // confirmations climb back toward the capacity, never past it
    let before = e.unwrap();
    let up = next_kv_estimate(cap, 0, e, Verdict::Confirmed, 0.0, 0.0).unwrap();
    assert!(up > before, "{up}");
    let mut e = Some(up);
    for _ in 0..500 {
        e = next_kv_estimate(cap, 0, e, Verdict::Surplus, 0.0, 0.0);
    }
    assert_eq!(e, Some(100_000));
    // no capacity: nothing until a shortfall, then within the ceiling
    assert_eq!(
        next_kv_estimate(None, 64_000, None, Verdict::Confirmed, 5.0, 0.0),
        None
    );
    assert_eq!(
        next_kv_estimate(None, 64_000, None, Verdict::Shortfall, 30_000.0, 10_000.0),
        Some(20_000)
    );
    assert_eq!(
        next_kv_estimate(None, 64_000, None, Verdict::Shortfall, 100.0, 100.0),
        Some(4_000)
    );
}

/// S is shared; B (oldest), then S+A, then S+C on worker 0.
fn three_prompts() -> (Index, u32, [Vec<u8>; 3]) {
    let mut idx = Index::new(1 << 20, usize::MAX);
    let m = idx.model_named("");
    let s = text("shared system prompt ", 1024);
    let b = text("bravo conversation ", 2048);
    let a = cat(&s, &text("alpha turn one ", 1024));
    let c = cat(&s, &text("charlie turn one ", 1024));
    for t in [&b, &a, &c] {
        idx.insert(m, &h(t), W0, usize::MAX);
    }
    (idx, m, [b, a, c])
}

fn held(idx: &Index, m: u32, t: &[u8]) -> usize {
    idx.match_per_worker(m, &h(t), &[W0])[0]
}

#[test]
fn a_shortfall_drops_the_lost_part_and_what_was_used_before_it() {
    let (mut idx, m, [b, a, c]) = three_prompts();
    // A's second turn, then D (sharing S) after it
    let a2 = cat(&a, &text("alpha turn two ", 512));
    idx.insert(m, &h(&a2), W0, usize::MAX);
    let d = cat(&a[..1024], &text("delta turn one ", 1024));
    idx.insert(m, &h(&d), W0, usize::MAX);
    let a3 = cat(&a2, &text("alpha turn three ", 512));
    let prior = idx.prior(m, &h(&a3), W0);
    assert_eq!(prior.bytes(), 2560);
    assert_eq!(prior.path.len(), 2, "{prior:?}");
    idx.insert(m, &h(&a3), W0, usize::MAX);
    // the worker kept the shared 1,024 bytes, not A's own part
    let dropped = idx.correct(&h(&a3), W0, &prior, 1024 / 32);
    assert!(dropped > 0);
    assert_eq!(held(&idx, m, &a3), 1024);
    // B and C were last used before A's second turn: an LRU engine lost them first (C's
    // shared part excepted)
    assert_eq!(held(&idx, m, &b), 0);
    assert_eq!(held(&idx, m, &c), 1024);
    // D was used after it: kept
    assert_eq!(held(&idx, m, &d), 2048);
    assert_eq!(idx.stats().evicted_chunks[3] as usize, dropped);
    assert_eq!(idx.stats().chunks, 64, "S and D's own part");
    // nothing to drop twice
    assert_eq!(idx.correct(&h(&a3), W0, &prior, 1024 / 32), 0);
    // no prediction past the reported length: nothing to correct
    let (mut idx, m, [_, a, _]) = three_prompts();
    let p = idx.prior(m, &h(&a), W0);
    assert_eq!(idx.correct(&h(&a), W0, &p, p.chunks), 0);
    assert_eq!(held(&idx, m, &a), 2048);
}

#[test]
fn nothing_cached_drops_everything_used_before_the_prompt() {
    let (mut idx, m, [b, a, c]) = three_prompts();
    // the most recent prompt found nothing: a flush or a restart
    let c2 = cat(&c, &text("charlie turn two ", 256));
    let prior = idx.prior(m, &h(&c2), W0);
    idx.insert(m, &h(&c2), W0, usize::MAX);
    idx.correct(&h(&c2), W0, &prior, 0);
    for t in [&b, &a, &c] {
        assert_eq!(held(&idx, m, t), 0);
    }
    assert_eq!(idx.stats().chunks, 0);
    // a branch added below the lost part after the prediction goes too (no stranded child)
    let (mut idx, m, [_, a, _]) = three_prompts();
    let prior = idx.prior(m, &h(&a), W0);
    let late = cat(&a, &text("late branch ", 256));
    idx.insert(m, &h(&late), W0, usize::MAX);
    idx.correct(&h(&a), W0, &prior, 1024 / 32);
    assert_eq!(held(&idx, m, &late), 1024);
    // C hangs from the kept part: kept; B too (no segment of A starts past the cut, so
    // nothing bounds when the lost chunk was last used)
    assert_eq!(held(&idx, m, &c), 2048);
    assert_eq!(held(&idx, m, &b), 2048);
    assert_eq!(idx.stats().chunks, 32 + 32 + 64);
}

fn fleet(stats: &[Arc<WorkerStats>]) -> WorkerSnapshot {
    WorkerSnapshot::new(
        stats
            .iter()
            .enumerate()
            .map(|(i, s)| WorkerEntry {
                id: WorkerId(i as u32),
                url: format!("http://w{i}").into(),
                models: vec![Arc::from("m")],
                available: true,
                stats: s.clone(),
            })
            .collect(),
    )
}

fn router(policy: PolicyKind, mode: FeedbackMode) -> Router {
    Router::new(&RouterOptions {
        policy,
        cache_feedback: mode,
        ..RouterOptions::default()
    })
    .unwrap()
}

/// Routes `t` keyless (or with `key`) to worker 0 (the others excluded) and returns its ticket.
fn send(r: &Router, snap: &WorkerSnapshot, t: &[u8], key: Option<&str>) -> Option<Ticket> {
    let pairs = key.map(|k| [("x-smg-routing-key", k.as_bytes())]);
    let headers = HeaderList(pairs.as_ref().map_or(&[][..], |p| &p[..]));
    let others: Vec<WorkerId> = (1..snap.entries().len() as u32).map(WorkerId).collect();
    let text = std::str::from_utf8(t).unwrap();
    let req = RouteRequest {
        rid: None,
        headers: &headers,
        body: None,
        model: Some("m"),
        leg: crate::Leg::Regular,
        text: Some(text),
        tokens: None,
        prefix: None,
        exclude: &others,
        stream: Some(false),
    };
    let mut d = r
        .route(&req, snap, Duration::from_secs(1), &mut Rng::seeded(3))
        .unwrap();
    assert_eq!(d.worker, W0);
    d.lease.take_ticket()
}

fn report(cached_chars: usize, prompt: &[u8]) -> Report {
    // 4 characters a token, as the router's default estimate
    Report {
        cached_tokens: (cached_chars / 4) as u64,
        prompt_tokens: Some((prompt.len() / 4) as u64),
    }
}

#[test]
fn an_evicted_prompt_stops_counting_after_one_answer() {
    for policy in [PolicyKind::TtftAware, PolicyKind::CacheAware] {
        let stats: Vec<Arc<WorkerStats>> = (0..2).map(|_| Arc::default()).collect();
        stats[0].set_kv_capacity_tokens(100_000);
        let snap = fleet(&stats);
        let r = router(policy, FeedbackMode::On);
        let p1 = text("first long conversation ", 8192);
        let p2 = text("second long conversation ", 8192);
        for p in [&p1, &p2] {
            let t = send(&r, &snap, p, None).unwrap();
            assert_eq!(t.expectation.as_ref().unwrap().predicted_bytes(), 0);
            let o = r.observe_reported(t, report(0, p), &snap).unwrap();
            assert_eq!(o.verdict, Verdict::Confirmed, "{policy:?}");
        }
        // P2's second turn finds its first cached
        let p2a = cat(&p2, &text("and its second turn ", 1024));
        let t = send(&r, &snap, &p2a, None).unwrap();
        assert_eq!(t.expectation.as_ref().unwrap().predicted_bytes(), 8192);
        let o = r.observe_reported(t, report(8192, &p2a), &snap).unwrap();
        assert_eq!(o.verdict, Verdict::Confirmed, "{policy:?}");
        // the worker evicted both; P2's third turn finds only 100 tokens cached
        let p2b = cat(&p2a, &text("and its third turn ", 1024));
        let t = send(&r, &snap, &p2b, None).unwrap();
        assert_eq!(t.expectation.as_ref().unwrap().predicted_bytes(), p2a.len());
        let o = r.observe_reported(t, report(400, &p2b), &snap).unwrap();
        assert_eq!(o.verdict, Verdict::Shortfall, "{policy:?}");
        assert!(o.corrected_chunks > 0);
        assert_eq!(o.reported_tokens, 100);
        // P1 (used before P2) no longer counts as cached there; P2's new turn does (the worker
        // just computed it)
        let t = send(&r, &snap, &cat(&p1, b"more"), None).unwrap();
        assert_eq!(t.expectation.unwrap().predicted_bytes(), 0, "{policy:?}");
        let t = send(&r, &snap, &cat(&p2b, b"more"), None).unwrap();
        assert_eq!(
            t.expectation.unwrap().predicted_bytes(),
            p2b.len() / 32 * 32
        );
        // the worker's effective KV estimate came down from its capacity
        let learned = stats[0].learned_kv_tokens().unwrap();
        assert!(learned < 100_000, "{learned}");
        assert_eq!(stats[0].effective_kv_tokens(), Some(learned));
    }
}

#[test]
fn measure_compares_without_correcting_and_off_reads_nothing() {
    let stats: Vec<Arc<WorkerStats>> = (0..2).map(|_| Arc::default()).collect();
    let snap = fleet(&stats);
    let r = router(PolicyKind::TtftAware, FeedbackMode::Measure);
    let p = text("a conversation ", 4096);
    let t = send(&r, &snap, &p, None).unwrap();
    r.observe_reported(t, report(0, &p), &snap);
    let t = send(&r, &snap, &p, None).unwrap();
    let o = r.observe_reported(t, report(0, &p), &snap).unwrap();
    assert_eq!((o.verdict, o.corrected_chunks), (Verdict::Shortfall, 0));
    let t = send(&r, &snap, &p, None).unwrap();
    assert_eq!(t.expectation.unwrap().predicted_bytes(), 4096);
    assert_eq!(stats[0].learned_kv_tokens(), None);
    // off, or a policy without an index: no ticket at all
    let off = router(PolicyKind::TtftAware, FeedbackMode::Off);
    assert!(send(&off, &snap, &p, None).is_none());
    assert!(!off.reads_reports());
    let rr = router(PolicyKind::RoundRobin, FeedbackMode::On);
    assert!(!rr.reads_reports());
}

#[test]
fn a_pinned_session_is_compared_with_its_previous_answer() {
    let stats: Vec<Arc<WorkerStats>> = (0..2).map(|_| Arc::default()).collect();
    let snap = fleet(&stats);
    let r = router(PolicyKind::TtftAware, FeedbackMode::On);
    let p = text("a pinned session ", 4096);
    let t = send(&r, &snap, &p, Some("k1")).unwrap();
    assert!(t.session.is_some());
    r.observe_reported(t, report(0, &p), &snap);
    // a turn whose body was not read: no index prediction, only the session's
    let key = send(&r, &snap, &p, Some("k1")).unwrap().session;
    let unread = Ticket {
        worker: W0,
        expectation: None,
        session: key,
    };
    let o = r
        .observe_reported(unread.clone(), report(4096, &p), &snap)
        .unwrap();
    assert!(o.from_session);
    assert_eq!(
        (o.predicted_tokens, o.verdict),
        (1024.0, Verdict::Confirmed)
    );
    assert!(!r.feedback.session_short(key.unwrap()));
    let o = r.observe_reported(unread, report(0, &p), &snap).unwrap();
    assert_eq!(o.verdict, Verdict::Shortfall);
    // its next turn is read again
    assert!(r.feedback.session_short(key.unwrap()));
}

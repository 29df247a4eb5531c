//! Feedback as scripted sequences on the pure index and router: no clock, no IO.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::key::HeaderList;
use crate::policy::prefix_index::{Correction, Index, Prior};
use crate::{
    BodyPath, PolicyKind, Rng, RouteRequest, Router, RouterOptions, WorkerEntry, WorkerSnapshot,
    WorkerStats,
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
fn the_kv_estimate_follows_evictions_within_its_bounds() {
    let cap = Some(100_000);
    let evicted = |room| KvEvidence::Evicted { room };
    // the prior is the reported capacity; an eviction moves a quarter of the way to its room
    let e = next_kv_estimate(cap, 0, None, evicted(60_000.0));
    assert_eq!(e, Some(90_000));
    // room above the estimate does not raise it
    assert_eq!(next_kv_estimate(cap, 0, e, evicted(95_000.0)), e);
    // repeated total losses stop at capacity / 4
    let mut e = e;
    for _ in 0..100 {
        e = next_kv_estimate(cap, 0, e, evicted(0.0));
    }
    assert_eq!(e, Some(25_000));
    // kept prefixes climb back toward the capacity, never past it
    let before = e.unwrap();
    let up = next_kv_estimate(cap, 0, e, KvEvidence::Kept).unwrap();
    assert!(up > before, "{up}");
    let mut e = Some(up);
    for _ in 0..500 {
        e = next_kv_estimate(cap, 0, e, KvEvidence::Kept);
    }
    assert_eq!(e, Some(100_000));
    // no capacity: nothing until an eviction, then within [ceiling / 4, ceiling]
    assert_eq!(next_kv_estimate(None, 64_000, None, KvEvidence::Kept), None);
    assert_eq!(
        next_kv_estimate(None, 64_000, None, evicted(20_000.0)),
        Some(20_000)
    );
    assert_eq!(
        next_kv_estimate(None, 64_000, None, evicted(100.0)),
        Some(16_000)
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
fn a_shortfall_drops_what_hangs_below_the_lost_part() {
    let (mut idx, m, [b, a, c]) = three_prompts();
    // A's second turn, a branch of it (a sub-agent), then D (sharing S)
    let a2 = cat(&a, &text("alpha turn two ", 512));
    idx.insert(m, &h(&a2), W0, usize::MAX);
    let branch = cat(&a, &text("alpha's sub-agent ", 512));
    idx.insert(m, &h(&branch), W0, usize::MAX);
    let d = cat(&a[..1024], &text("delta turn one ", 1024));
    idx.insert(m, &h(&d), W0, usize::MAX);
    let a3 = cat(&a2, &text("alpha turn three ", 512));
    let prior = sent(&mut idx, m, &a3);
    assert_eq!(prior.bytes(), 2560);
    assert_eq!(prior.path.len(), 2, "{prior:?}");
    // the worker kept the shared 1,024 bytes, not A's own part
    let c3 = idx.correct(&h(&a3), W0, &prior, 1024 / 32);
    assert_eq!(c3.dropped, 512 / 32);
    // the prompt's own path stays (its prefill has just recomputed it)
    assert_eq!(held(&idx, m, &a3), a3.len());
    // the branch hung below the lost part: gone
    assert_eq!(held(&idx, m, &branch), 2048);
    // C and D hang from the kept part, B from elsewhere: kept
    assert_eq!(held(&idx, m, &b), 2048);
    assert_eq!(held(&idx, m, &c), 2048);
    assert_eq!(held(&idx, m, &d), 2048);
    assert_eq!(idx.stats().evicted_chunks[3] as usize, c3.dropped);
    // used after A's second turn, off the prompt's path: D's own part
    assert_eq!(c3.newer_bytes, Some(1024));
    // nothing to drop twice
    assert_eq!(idx.correct(&h(&a3), W0, &prior, 1024 / 32).dropped, 0);
    // no prediction past the reported length: nothing to correct
    let (mut idx, m, [_, a, _]) = three_prompts();
    let p = idx.prior(m, &h(&a), W0);
    assert_eq!(idx.correct(&h(&a), W0, &p, p.chunks), Correction::default());
    assert_eq!(held(&idx, m, &a), 2048);
}

#[test]
fn nothing_cached_drops_every_branch_below_the_prompts_start() {
    let (mut idx, m, [b, a, c]) = three_prompts();
    let sub = cat(&c, &text("charlie's sub-agent ", 256));
    idx.insert(m, &h(&sub), W0, usize::MAX);
    let d = cat(&a[..1024], &text("delta turn one ", 1024));
    idx.insert(m, &h(&d), W0, usize::MAX);
    // C's next turn found nothing (a flush, a restart, or its root was evicted)
    let c2 = cat(&c, &text("charlie turn two ", 256));
    let prior = sent(&mut idx, m, &c2);
    let c0 = idx.correct(&h(&c2), W0, &prior, 0);
    // its path stays; D and C's sub-agent hung below its start: gone
    assert_eq!(held(&idx, m, &c2), c2.len());
    assert_eq!(held(&idx, m, &sub), c.len());
    assert_eq!(held(&idx, m, &d), 1024);
    // A's own part is in the segment S was first recorded in (recency is per segment)
    assert_eq!(held(&idx, m, &a), 2048);
    // B shares nothing with it: its own answer will tell
    assert_eq!(held(&idx, m, &b), 2048);
    assert_eq!(c0.dropped, (256 + 1024) / 32);
    assert_eq!(c0.newer_bytes, Some(0));
    // no path segment starts past the cut: nothing bounds when the lost chunk was used
    let (mut idx, m, [_, a, _]) = three_prompts();
    let prior = sent(&mut idx, m, &a);
    assert_eq!(idx.correct(&h(&a), W0, &prior, 1024 / 32).newer_bytes, None);
}

#[test]
fn what_requests_sent_later_used_is_not_dropped() {
    // A's second turn is sent; before its answer (reporting only S cached) comes back, a
    // branch of A and a new session E on S are sent to the same worker: they find what the
    // turn's prefill recomputed. An older branch of A, not used since, is gone.
    let (mut idx, m, [b, a, c]) = three_prompts();
    let old = cat(&a, &text("old branch ", 256));
    idx.insert(m, &h(&old), W0, usize::MAX);
    let a2 = cat(&a, &text("alpha turn two ", 512));
    let prior = sent(&mut idx, m, &a2);
    let late = cat(&a, &text("late branch ", 256));
    idx.insert(m, &h(&late), W0, usize::MAX);
    let e = cat(&a[..1024], &text("echo turn one ", 512));
    idx.insert(m, &h(&e), W0, usize::MAX);
    let cut = idx.correct(&h(&a2), W0, &prior, 1024 / 32);
    assert_eq!(cut.dropped, 256 / 32);
    assert_eq!(held(&idx, m, &old), 2048);
    assert_eq!(held(&idx, m, &late), late.len());
    assert_eq!(held(&idx, m, &e), e.len());
    assert_eq!(held(&idx, m, &a2), a2.len());
    assert_eq!(held(&idx, m, &c), 2048, "C hangs from the kept part");
    assert_eq!(held(&idx, m, &b), 2048);
    // a cut at the prompt's start: what the later request used stays, C (not used since) goes
    let (mut idx, m, [_, a, c]) = three_prompts();
    let prior = sent(&mut idx, m, &a);
    let e = cat(&a[..1024], &text("echo turn one ", 512));
    idx.insert(m, &h(&e), W0, usize::MAX);
    idx.correct(&h(&a), W0, &prior, 0);
    assert_eq!(held(&idx, m, &e), e.len());
    assert_eq!(held(&idx, m, &c), 1024, "C's own part was not used since");
    assert_eq!(held(&idx, m, &a), 2048);
}

/// Records `t` on worker 0 as a request sent now, returning what the index predicted for it.
fn sent(idx: &mut Index, m: u32, t: &[u8]) -> Prior {
    let cell = std::cell::OnceCell::new();
    idx.insert_with_prior(m, &h(t), W0, usize::MAX, Some(&cell));
    cell.into_inner().unwrap()
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
    send_as(r, snap, t, key, Prompt::Text)
}

/// How a routed request carries its prompt.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Prompt {
    /// As text (the router hashes it).
    Text,
    /// As the chunk hashes the caller computed, without the text (what the gateway does).
    Hashes,
    /// As [`Prompt::Hashes`] when the body path reads the body; nothing when it streams unread
    /// (a turn on the hot path).
    HashesWhenRead,
}

/// [`send`], with the prompt carried as `how`.
fn send_as(
    r: &Router,
    snap: &WorkerSnapshot,
    t: &[u8],
    key: Option<&str>,
    how: Prompt,
) -> Option<Ticket> {
    route_as_gateway(r, snap, t, key, how).1
}

/// Routes `t` to worker 0 as the gateway does: the body path first (a turn read only for the
/// feedback is flagged), then the prompt carried as `how`. Returns the body path and the
/// decision's ticket.
fn route_as_gateway(
    r: &Router,
    snap: &WorkerSnapshot,
    t: &[u8],
    key: Option<&str>,
    how: Prompt,
) -> (BodyPath, Option<Ticket>) {
    let hashed = h(t);
    let pairs = key.map(|k| [("x-smg-routing-key", k.as_bytes())]);
    let headers = HeaderList(pairs.as_ref().map_or(&[][..], |p| &p[..]));
    let others: Vec<WorkerId> = (1..snap.entries().len() as u32).map(WorkerId).collect();
    let text = std::str::from_utf8(t).unwrap();
    let now = Duration::from_secs(1);
    let path = r.request_body_path(&headers, false, false, snap, now);
    let hashes = match how {
        Prompt::Text => false,
        Prompt::Hashes => true,
        Prompt::HashesWhenRead => !matches!(path, BodyPath::Streamed(_)),
    };
    let req = RouteRequest {
        rid: None,
        headers: &headers,
        body: None,
        model: Some("m"),
        leg: crate::Leg::Regular,
        text: (how == Prompt::Text).then_some(text),
        tokens: None,
        prefix: hashes.then_some(&hashed),
        exclude: &others,
        stream: Some(false),
        loads: None,
        feedback_read: path == BodyPath::FEEDBACK_REREAD,
    };
    let mut d = r.route(&req, snap, now, &mut Rng::seeded(3)).unwrap();
    assert_eq!(d.worker, W0);
    (path, d.lease.take_ticket())
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
        let p = text("a long conversation ", 8192);
        let t = send(&r, &snap, &p, None).unwrap();
        assert_eq!(t.expectation.as_ref().unwrap().predicted_bytes(), 0);
        let o = r.observe_reported(t, report(0, &p), &snap).unwrap();
        assert_eq!(o.verdict, Verdict::Confirmed, "{policy:?}");
        // a sub-agent extending it, and its second turn, find it cached
        let sub = cat(&p, &text("a sub-agent's task ", 4096));
        let p2 = cat(&p, &text("and its second turn ", 1024));
        for q in [&sub, &p2] {
            let t = send(&r, &snap, q, None).unwrap();
            assert_eq!(t.expectation.as_ref().unwrap().predicted_bytes(), 8192);
            let o = r.observe_reported(t, report(8192, q), &snap).unwrap();
            assert_eq!(o.verdict, Verdict::Confirmed, "{policy:?}");
        }
        // the worker evicted it; the third turn finds only 100 tokens cached
        let p3 = cat(&p2, &text("and its third turn ", 1024));
        let t = send(&r, &snap, &p3, None).unwrap();
        assert_eq!(t.expectation.as_ref().unwrap().predicted_bytes(), p2.len());
        let o = r.observe_reported(t, report(400, &p3), &snap).unwrap();
        assert_eq!(o.verdict, Verdict::Shortfall, "{policy:?}");
        assert!(o.corrected_chunks > 0);
        assert_eq!(o.reported_tokens, 100);
        // the sub-agent's part no longer counts as cached there; the conversation does (the
        // worker just computed it)
        let t = send(&r, &snap, &cat(&sub, b"more"), None).unwrap();
        assert_eq!(t.expectation.unwrap().predicted_bytes(), 8192, "{policy:?}");
        let t = send(&r, &snap, &cat(&p3, b"more"), None).unwrap();
        assert_eq!(t.expectation.unwrap().predicted_bytes(), p3.len() / 32 * 32);
        // the worker's learned KV estimate came down from its capacity, within its bounds; the
        // reported capacity still bounds the index
        let learned = stats[0].learned_kv_tokens().unwrap();
        assert!((25_000..100_000).contains(&learned), "{learned}");
        assert_eq!(stats[0].effective_kv_tokens(), Some(100_000));
    }
}

#[test]
fn a_report_one_block_short_of_a_shared_prompts_end_keeps_the_other_sessions_on_it() {
    // S, a system prompt of 250 tokens (1,000 characters, not a whole number of 16-token
    // blocks), shared by sessions A and B on worker 0; A has an older sub-agent Y. A sub-agent
    // X of A finds only S cached: A's own part was evicted, and an engine caching 16-token
    // blocks reports S's last whole block, 240 tokens. B still hangs from S there.
    for policy in [
        PolicyKind::TtftAware,
        PolicyKind::CacheAware,
        PolicyKind::Agentic,
    ] {
        let stats: Vec<Arc<WorkerStats>> = (0..2).map(|_| Arc::default()).collect();
        stats[0].set_kv_capacity_tokens(100_000);
        let snap = fleet(&stats);
        let r = router(policy, FeedbackMode::On);
        let s = text("shared system prompt ", 1000);
        let a = cat(&s, &text("alpha turn one ", 1024));
        let b = cat(&s, &text("bravo turn one ", 1024));
        let y = cat(&a, &text("alpha's first sub-agent ", 512));
        for (p, cached) in [(&a, 0), (&b, 960), (&y, a.len())] {
            let t = send(&r, &snap, p, None).unwrap();
            let o = r.observe_reported(t, report(cached, p), &snap).unwrap();
            assert_eq!(o.verdict, Verdict::Confirmed, "{policy:?}");
        }
        let x = cat(&a, &text("alpha's second sub-agent ", 512));
        let t = send(&r, &snap, &x, None).unwrap();
        assert_eq!(
            t.expectation.as_ref().unwrap().predicted_bytes(),
            a.len() / 32 * 32
        );
        let o = r.observe_reported(t, report(960, &x), &snap).unwrap();
        assert_eq!(o.verdict, Verdict::Shortfall, "{policy:?}");
        // Y's own part hung below A's lost part: gone (A's part is X's path, just recomputed)
        assert!(o.corrected_chunks >= 512 / 32 - 1, "{policy:?}");
        let t = send(&r, &snap, &cat(&y, b"more"), None).unwrap();
        assert_eq!(
            t.expectation.unwrap().predicted_bytes(),
            a.len() / 32 * 32,
            "{policy:?}"
        );
        // B branched off S after its last whole block: still held
        let t = send(&r, &snap, &cat(&b, b"more"), None).unwrap();
        assert_eq!(
            t.expectation.unwrap().predicted_bytes(),
            b.len() / 32 * 32,
            "{policy:?}"
        );
        // a loss well inside S (120 tokens cached) still drops every branch below it
        let c = cat(&s, &text("charlie turn one ", 1024));
        let t = send(&r, &snap, &c, None).unwrap();
        assert_eq!(t.expectation.as_ref().unwrap().predicted_bytes(), 992);
        let o = r.observe_reported(t, report(480, &c), &snap).unwrap();
        assert_eq!(o.verdict, Verdict::Shortfall, "{policy:?}");
        let t = send(&r, &snap, &cat(&b, b"more"), None).unwrap();
        assert_eq!(t.expectation.unwrap().predicted_bytes(), 992, "{policy:?}");
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

mod kv;
mod unread;

use std::sync::Arc;

use super::*;
use crate::worker::WorkerEntry;
use crate::{WorkerId, WorkerSnapshot};

fn ids(n: u32) -> Vec<WorkerId> {
    (0..n).map(WorkerId).collect()
}

fn text(seed: &str, len: usize) -> Vec<u8> {
    seed.bytes().cycle().take(len).collect()
}

fn h(t: &[u8]) -> PrefixHashes {
    PrefixHashes::of(t)
}

/// An index (budget, per-tenant bound) and its id for requests without a model.
fn index(budget: usize, max_chars: usize) -> (Index, u32) {
    let mut i = Index::new(budget, max_chars);
    let m = i.model_named("");
    (i, m)
}

fn fleet(workers: &[u32], models: &[&str]) -> WorkerSnapshot {
    WorkerSnapshot::new(
        workers
            .iter()
            .map(|&i| WorkerEntry {
                id: WorkerId(i),
                url: format!("http://w{i}").into(),
                models: models.iter().map(|m| Arc::from(*m)).collect(),
                available: true,
                stats: Arc::default(),
            })
            .collect(),
    )
}

#[test]
fn pieces_hash_like_the_whole() {
    let t = text("a prompt cut anywhere hashes the same. ", 1000);
    for cuts in [
        vec![0, 1000],
        vec![3, 40, 41, 500],
        vec![31, 32, 33, 64, 999],
    ] {
        let mut hs = PrefixHasher::new();
        let mut at = 0;
        for c in cuts {
            hs.write(&t[at..c]);
            at = c;
        }
        hs.write(&t[at..]);
        assert_eq!(hs.finish(), h(&t));
    }
    assert_eq!(h(&t).chunks().len(), 1000 / CHUNK);
    assert_eq!(h(&t).text_len(), 1000);
    // a chunk hash names its whole prefix: the same chunk after different text differs
    let a = h(b"0123456789abcdef0123456789abcdefSAMESAMESAMESAMESAMESAMESAMESAME");
    let b = h(b"X123456789abcdef0123456789abcdefSAMESAMESAMESAMESAMESAMESAMESAME");
    assert_ne!(a.chunks()[1], b.chunks()[1]);
}

#[test]
fn longest_match_counts_whole_chunks() {
    let (mut idx, m) = index(1 << 20, 1 << 20);
    let a = text("system prompt one. ", 100);
    idx.insert(m, &h(&a), WorkerId(1), usize::MAX);
    let (n, holders) = idx.longest_match(m, &h(&a), &ids(3));
    assert_eq!(n, 96); // 3 whole chunks of 32
    assert_eq!(holders, [WorkerId(1)]);
    // a longer text sharing the prefix matches the shared whole chunks only
    let mut b = a[..40].to_vec();
    b.extend(text("different tail ", 60));
    assert_eq!(idx.longest_match(m, &h(&b), &ids(3)).0, 32);
    // non-candidates do not count
    let (n, hs) = idx.longest_match(m, &h(&a), &[WorkerId(0), WorkerId(2)]);
    assert_eq!((n, hs.len()), (0, 0));
}

#[test]
fn match_per_worker_reports_each_candidates_prefix() {
    let (mut idx, m) = index(1 << 20, 1 << 20);
    let sys = text("shared system prompt ", 10 * CHUNK);
    let mut a = sys.clone();
    a.extend(text("conversation a ", 20 * CHUNK));
    idx.insert(m, &h(&a), WorkerId(0), usize::MAX);
    idx.insert(m, &h(&sys), WorkerId(2), usize::MAX);
    assert_eq!(
        idx.match_per_worker(m, &h(&a), &ids(3)),
        [30 * CHUNK, 0, 10 * CHUNK]
    );
    assert_eq!(
        idx.match_per_worker(m, &h(&a), &[WorkerId(1), WorkerId(2)]),
        [0, 10 * CHUNK]
    );
    assert_eq!(idx.match_per_worker(m, &h(b""), &ids(3)), [0, 0, 0]);
    // a conversation growing turn by turn: each turn adds only its new chunks
    let mut convo = a.clone();
    for turn in 0..5 {
        convo.extend(text(&format!("turn {turn} "), 7 * CHUNK));
        let before = idx.tenant_chars(m, WorkerId(0));
        idx.insert(m, &h(&convo), WorkerId(0), usize::MAX);
        assert_eq!(idx.tenant_chars(m, WorkerId(0)), before + 7 * CHUNK);
        assert_eq!(idx.longest_match(m, &h(&convo), &ids(3)).0, convo.len());
    }
}

#[test]
fn a_tenants_least_recent_branch_goes_first_and_shared_prefixes_stay() {
    let (mut idx, m) = index(1 << 20, 64 * CHUNK);
    let a = text("conversation a ", 32 * CHUNK);
    let mut b = a[..16 * CHUNK].to_vec();
    b.extend(text("branch b ", 16 * CHUNK));
    let c = text("another conversation ", 32 * CHUNK);
    idx.insert(m, &h(&a), WorkerId(0), usize::MAX);
    idx.insert(m, &h(&b), WorkerId(0), usize::MAX);
    assert_eq!(idx.tenant_chars(m, WorkerId(0)), 48 * CHUNK);
    // 80 chunks > 64: b's own branch was least recently used (its prefix, a's first
    // segment, was touched after it), so it goes and a stays whole
    idx.insert(m, &h(&c), WorkerId(0), usize::MAX);
    assert_eq!(idx.tenant_chars(m, WorkerId(0)), 64 * CHUNK);
    assert_eq!(idx.longest_match(m, &h(&a), &ids(1)).0, 32 * CHUNK);
    assert_eq!(idx.longest_match(m, &h(&b), &ids(1)).0, 16 * CHUNK);
    assert_eq!(idx.longest_match(m, &h(&c), &ids(1)).0, 32 * CHUNK);
    // other tenants are unaffected by one tenant's bound
    idx.insert(m, &h(&a), WorkerId(1), usize::MAX);
    assert_eq!(idx.tenant_chars(m, WorkerId(1)), 32 * CHUNK);
    assert_eq!(idx.tenant_chars(m, WorkerId(0)), 64 * CHUNK);
    assert_eq!(idx.stats().evicted_chunks, [0, 16, 0, 0]);
}

#[test]
fn repeated_touches_do_not_grow_the_queue_without_bound() {
    let (mut idx, m) = index(1 << 20, 1 << 20);
    let mut t = text("same text ", 64 * CHUNK);
    for i in 0..300 {
        if i % 10 == 0 {
            t.extend(text(&format!("more {i} "), CHUNK));
        }
        idx.insert(m, &h(&t), WorkerId(0), usize::MAX);
    }
    let q = idx.queue_len(m, WorkerId(0));
    assert!(q <= 2 * 31 + 64 + 31, "{q}");
    assert_eq!(idx.tenant_chars(m, WorkerId(0)), t.len() / CHUNK * CHUNK);
}

#[test]
fn a_text_longer_than_the_bound_keeps_its_prefix() {
    let (mut idx, m) = index(1 << 20, 32 * CHUNK);
    let t = text("long system prompt ", 64 * CHUNK);
    idx.insert(m, &h(&t), WorkerId(0), usize::MAX);
    assert_eq!(idx.tenant_chars(m, WorkerId(0)), 32 * CHUNK);
    assert_eq!(idx.longest_match(m, &h(&t), &ids(1)).0, 32 * CHUNK);
    idx.insert(m, &h(&t), WorkerId(0), usize::MAX);
    assert_eq!(idx.longest_match(m, &h(&t), &ids(1)).0, 32 * CHUNK);
    // a tighter per-insert bound (a worker's KV capacity) holds less
    idx.insert(m, &h(&t), WorkerId(1), 10 * CHUNK);
    assert_eq!(idx.longest_match(m, &h(&t), &[WorkerId(1)]).0, 10 * CHUNK);
}

#[test]
fn one_budget_bounds_every_model_and_worker_least_recent_first() {
    let budget = 256 << 10;
    let mut idx = Index::new(budget, 1 << 30);
    let models: Vec<u32> = ["a", "b", "c"].iter().map(|n| idx.model_named(n)).collect();
    let mut last = Vec::new();
    for i in 0..300u32 {
        let t = text(&format!("conversation {i} of many "), 100 * CHUNK);
        let m = models[i as usize % 3];
        idx.insert(m, &h(&t), WorkerId(i % 4), usize::MAX);
        let s = idx.stats();
        assert!(s.bytes <= budget, "{i}: {} bytes", s.bytes);
        last.push((m, t, WorkerId(i % 4)));
    }
    let s = idx.stats();
    assert!(s.evicted_chunks[0] > 0, "{s:?}");
    // the newest texts are whole, the oldest are gone, every match is a whole text or nothing
    // (segments are evicted whole, and never before the segments hanging from them)
    for (m, t, w) in last.iter().rev().take(20) {
        assert_eq!(idx.longest_match(*m, &h(t), &[*w]).0, t.len());
    }
    let (m, t, w) = &last[0];
    assert_eq!(idx.longest_match(*m, &h(t), &[*w]).0, 0);
    // compact: at most 16 bytes per chunk held, everything counted
    assert!(s.bytes <= 16 * s.chunks, "{s:?}");
}

#[test]
fn the_index_is_compact_while_it_grows() {
    let mut idx = Index::new(1 << 30, 1 << 30);
    let m = idx.model_named("");
    for i in 0..400u32 {
        let t = text(&format!("session {i}: "), 250 * CHUNK);
        idx.insert(m, &h(&t), WorkerId(i % 8), usize::MAX);
        let s = idx.stats();
        if s.chunks > 10_000 {
            assert!(s.bytes <= 16 * s.chunks, "{i}: {s:?}");
        }
    }
    assert_eq!(idx.stats().evicted_chunks, [0, 0, 0, 0]);
}

#[test]
fn removed_workers_and_unserved_models_are_purged() {
    let mut idx = Index::new(1 << 20, 1 << 20);
    let snap = fleet(&[0, 1], &["llama", "qwen"]);
    // models no worker serves get no index
    assert_eq!(idx.model(Some("made-up"), &snap), None);
    let llama = idx.model(Some("llama"), &snap).unwrap();
    let qwen = idx.model(Some("qwen"), &snap).unwrap();
    assert_ne!(llama, qwen);
    let t = text("a conversation ", 20 * CHUNK);
    for w in ids(2) {
        idx.insert(llama, &h(&t), w, usize::MAX);
        idx.insert(qwen, &h(&t), w, usize::MAX);
    }
    // worker 1 leaves and qwen is no longer served: their entries go
    let after = fleet(&[0], &["llama"]);
    assert_eq!(idx.model(Some("llama"), &after), Some(llama));
    assert_eq!(idx.tenant_chars(llama, WorkerId(0)), 20 * CHUNK);
    assert_eq!(idx.tenant_chars(llama, WorkerId(1)), 0);
    assert_eq!(idx.tenant_chars(qwen, WorkerId(0)), 0);
    assert_eq!(idx.stats().chunks, 20);
    assert_eq!(idx.stats().evicted_chunks, [0, 0, 60, 0]);
    // a fleet that declares no models shares one index whatever the request names
    let bare = fleet(&[0], &[]);
    assert_eq!(idx.model(Some("x"), &bare), idx.model(Some("y"), &bare));
}

#[test]
fn long_prompts_are_indexed_coarser_past_the_fine_part() {
    assert_eq!(chunks_in_bytes(FINE_BYTES), FINE_BYTES / CHUNK);
    assert_eq!(
        chunks_in_bytes(FINE_BYTES + 3 * COARSE_CHUNK + 5),
        FINE_BYTES / CHUNK + 3
    );
    for c in [0, 1, 511, 512, 513, 2000] {
        assert_eq!(chunks_in_bytes(bytes_of_chunks(c)), c);
    }
    let t: Vec<u8> = (0..100_000u32).map(|i| b'a' + (i * 7 % 26) as u8).collect();
    let hs = h(&t);
    assert_eq!(hs.chunks().len(), chunks_in_bytes(t.len()));
    let mut piecewise = PrefixHasher::new();
    for piece in t.chunks(1000) {
        piecewise.write(piece);
    }
    assert_eq!(piecewise.finish(), hs);
    // matches, bounds and sizes count bytes of prompt, whatever the chunk size
    let (mut idx, m) = index(1 << 24, 1 << 30);
    idx.insert(m, &hs, WorkerId(0), usize::MAX);
    assert_eq!(
        idx.tenant_chars(m, WorkerId(0)),
        bytes_of_chunks(hs.chunks().len())
    );
    let mut other = t[..50_000].to_vec();
    other.extend(text("then something else ", 10_000));
    let matched = idx.longest_match(m, &h(&other), &ids(1)).0;
    assert!(
        (50_000 - COARSE_CHUNK..=50_000).contains(&matched),
        "{matched}"
    );
    idx.insert(m, &hs, WorkerId(1), 30_000);
    assert_eq!(
        idx.tenant_chars(m, WorkerId(1)),
        bytes_of_chunks(chunks_in_bytes(30_000))
    );
}

#[test]
fn an_unread_answer_touches_the_path_only_as_deep_as_it_reported() {
    // a tenant bounded to 64 chunks holds a system prompt (16 chunks) with a first session's
    // turn (one segment) and two more sessions' turns below it (16 chunks each), session 1's
    // older than session 2's
    let (mut idx, m) = index(1 << 20, 64 * CHUNK);
    let sys = text("system prompt ", 16 * CHUNK);
    let with = |tail: &str| {
        let mut t = sys.clone();
        t.extend(text(tail, 16 * CHUNK));
        t
    };
    let (s0, s1, s2) = (
        with("first one "),
        with("session one "),
        with("session two "),
    );
    for s in [&s0, &s1, &s2] {
        idx.insert(m, &h(s), WorkerId(0), usize::MAX);
    }
    // session 1's next (unread) turn reports only the system prompt cached: the worker lost
    // session 1's history, so only the path above it is touched
    let h1 = h(&s1);
    assert!(idx.touch_held(m, WorkerId(0), 32, h1.chunks()[31], 16));
    // a new 16-chunk prompt: 80 chunks > 64, the least recent branch goes: session 1's turn,
    // not session 2's (which the worker may still hold)
    idx.insert(
        m,
        &h(&text("another prompt ", 16 * CHUNK)),
        WorkerId(0),
        usize::MAX,
    );
    assert_eq!(idx.longest_match(m, &h1, &ids(1)).0, 16 * CHUNK);
    assert_eq!(idx.longest_match(m, &h(&s2), &ids(1)).0, 32 * CHUNK);
    // reported whole: the whole path is touched
    assert!(idx.touch_held(m, WorkerId(0), 32, h(&s2).chunks()[31], 32));
    // no longer held: nothing to touch
    assert!(!idx.touch_held(m, WorkerId(0), 32, h1.chunks()[31], 32));
}

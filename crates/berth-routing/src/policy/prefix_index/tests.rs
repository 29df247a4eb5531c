use super::*;

fn ids(n: u32) -> Vec<WorkerId> {
    (0..n).map(WorkerId).collect()
}

fn text(seed: &str, len: usize) -> Vec<u8> {
    seed.bytes().cycle().take(len).collect()
}

#[test]
fn longest_match_counts_whole_chunks() {
    let mut idx = PrefixIndex::new(1 << 20);
    let a = text("system prompt one. ", 100);
    idx.insert(&a, WorkerId(1));
    let (m, holders) = idx.longest_match(&a, &ids(3));
    assert_eq!(m, 96); // 3 whole chunks of 32
    assert_eq!(holders, [WorkerId(1)]);
    // a longer text sharing the prefix matches the shared whole chunks only
    let mut b = a[..40].to_vec();
    b.extend(text("different tail ", 60));
    let (m, _) = idx.longest_match(&b, &ids(3));
    assert_eq!(m, 32);
    // non-candidates do not count
    let (m, h) = idx.longest_match(&a, &[WorkerId(0), WorkerId(2)]);
    assert_eq!((m, h.len()), (0, 0));
}

#[test]
fn match_per_worker_reports_each_candidates_prefix() {
    let mut idx = PrefixIndex::new(1 << 20);
    let sys = text("shared system prompt ", 10 * CHUNK);
    let mut a = sys.clone();
    a.extend(text("conversation a ", 20 * CHUNK));
    idx.insert(&a, WorkerId(0));
    idx.insert(&sys, WorkerId(2));
    let m = idx.match_per_worker(&a, &ids(3));
    assert_eq!(m, [30 * CHUNK, 0, 10 * CHUNK]);
    // only candidates count, in the order given
    assert_eq!(
        idx.match_per_worker(&a, &[WorkerId(1), WorkerId(2)]),
        [0, 10 * CHUNK]
    );
    assert_eq!(idx.match_per_worker(b"", &ids(3)), [0, 0, 0]);
}

#[test]
fn tenants_are_bounded_with_lru_eviction() {
    let mut idx = PrefixIndex::new(64 * CHUNK);
    let old = text("old conversation ", 32 * CHUNK);
    let new = text("new conversation ", 48 * CHUNK);
    idx.insert(&old, WorkerId(0));
    assert_eq!(idx.tenant_chars(WorkerId(0)), 32 * CHUNK);
    idx.insert(&new, WorkerId(0));
    assert_eq!(idx.tenant_chars(WorkerId(0)), 64 * CHUNK);
    // the newest text is intact, the oldest lost its deepest chunks and keeps its prefix
    assert_eq!(idx.longest_match(&new, &ids(1)).0, 48 * CHUNK);
    assert_eq!(idx.longest_match(&old, &ids(1)).0, 16 * CHUNK);
    // other tenants are unaffected by one tenant's bound
    idx.insert(&old, WorkerId(1));
    assert_eq!(idx.tenant_chars(WorkerId(1)), 32 * CHUNK);
    assert_eq!(idx.tenant_chars(WorkerId(0)), 64 * CHUNK);
}

#[test]
fn repeated_touches_do_not_grow_the_queue_without_bound() {
    let mut idx = PrefixIndex::new(1 << 20);
    let t = text("same text ", 64 * CHUNK);
    for _ in 0..200 {
        idx.insert(&t, WorkerId(0));
    }
    let q = idx.tenants[&WorkerId(0)].lru.len();
    assert!(q <= 2 * 64 + 1024 + 64, "{q}");
    assert_eq!(idx.tenant_chars(WorkerId(0)), 64 * CHUNK);
}

#[test]
fn a_text_longer_than_the_bound_keeps_its_prefix() {
    // max_tree_size below the text length: the tenant keeps the text's first chunks (a prefix
    // tree evicts leaves first), so the same text sent again still matches.
    let mut idx = PrefixIndex::new(32 * CHUNK);
    let t = text("long system prompt ", 64 * CHUNK);
    idx.insert(&t, WorkerId(0));
    assert_eq!(idx.tenant_chars(WorkerId(0)), 32 * CHUNK);
    assert_eq!(idx.longest_match(&t, &ids(1)).0, 32 * CHUNK);
    idx.insert(&t, WorkerId(0));
    assert_eq!(idx.longest_match(&t, &ids(1)).0, 32 * CHUNK);
}

use super::*;
use crate::WorkerStats;
use crate::worker::WorkerEntry;

fn fleet(loads: &[u32]) -> WorkerSnapshot {
    WorkerSnapshot::new(
        loads
            .iter()
            .enumerate()
            .map(|(i, &l)| {
                let stats = Arc::new(WorkerStats::default());
                for _ in 0..l {
                    stats.begin();
                }
                WorkerEntry {
                    id: WorkerId(i as u32),
                    url: format!("http://w{i}").into(),
                    models: vec![],
                    available: true,
                    stats,
                }
            })
            .collect(),
    )
}

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
fn follows_the_prefix_above_threshold() {
    let ca = CacheAware::new(CacheAwareConfig::default());
    let snap = fleet(&[0, 0, 0, 0]);
    let mut rng = Rng::seeded(9);
    let convo = text("You are a helpful assistant. Conversation 42. ", 2000);
    let req = PickRequest {
        key: None,
        model: Some("m"),
        text: Some(&convo),
    };
    let first = ca.pick(&req, &snap, &ids(4), &mut rng);
    for _ in 0..20 {
        assert_eq!(ca.pick(&req, &snap, &ids(4), &mut rng), first);
    }
    // another model has its own tree: no match there, least-loaded with random ties
    let other = PickRequest {
        model: Some("n"),
        ..req
    };
    let mut seen = std::collections::HashSet::new();
    for i in 0..40 {
        let t = text(&format!("fresh text {i} "), 400);
        seen.insert(ca.pick(
            &PickRequest {
                text: Some(&t),
                ..other
            },
            &snap,
            &ids(4),
            &mut rng,
        ));
    }
    assert!(
        seen.len() > 1,
        "unmatched requests spread over idle workers"
    );
}

#[test]
fn below_threshold_goes_least_loaded() {
    let ca = CacheAware::new(CacheAwareConfig::default());
    let snap = fleet(&[5, 0]);
    let mut rng = Rng::seeded(1);
    let short = text("abcdefghijklmnop", 16);
    // insert under worker 0 by making it the only candidate
    ca.pick(
        &PickRequest {
            text: Some(&short),
            ..Default::default()
        },
        &snap,
        &[WorkerId(0)],
        &mut rng,
    );
    // a long text sharing only 16 of 200 bytes (8% < 30%) goes to the least loaded
    let mut long = short.clone();
    long.extend(text("zzzzzz", 184));
    let w = ca.pick(
        &PickRequest {
            text: Some(&long),
            ..Default::default()
        },
        &snap,
        &ids(2),
        &mut rng,
    );
    assert_eq!(w, WorkerId(1));
}

#[test]
fn spills_when_the_holder_is_overloaded() {
    let cfg = CacheAwareConfig {
        balance_abs_threshold: 4,
        ..Default::default()
    };
    let t = text("shared prefix for spill test ", 600);
    let req = PickRequest {
        text: Some(&t),
        ..Default::default()
    };
    let idle = fleet(&[0, 0, 0]);
    let held_by_0 = || {
        let ca = CacheAware::new(cfg);
        ca.pick(&req, &idle, &[WorkerId(0)], &mut Rng::seeded(2));
        ca
    };
    let mut rng = Rng::seeded(2);
    // load 20, mean 20/3 = 6.7: 20 > 6.7 x 1.5 and 20 > 6.7 + 4, so it spills
    let hot = fleet(&[20, 0, 0]);
    assert_ne!(held_by_0().pick(&req, &hot, &ids(3), &mut rng), WorkerId(0));
    // load 6, mean 2: 6 > 2 x 1.5 but not 6 > 2 + 4, so it stays with the prefix
    let warm = fleet(&[6, 0, 0]);
    assert_eq!(
        held_by_0().pick(&req, &warm, &ids(3), &mut rng),
        WorkerId(0)
    );
    // load 7, mean 7/3: both exceeded, spills
    let warmer = fleet(&[7, 0, 0]);
    assert_ne!(
        held_by_0().pick(&req, &warmer, &ids(3), &mut rng),
        WorkerId(0)
    );
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

#[test]
fn a_repeated_long_request_follows_its_worker() {
    let ca = CacheAware::new(CacheAwareConfig {
        max_tree_size: 1024,
        ..CacheAwareConfig::default()
    });
    let snap = fleet(&[0, 0, 0, 0]);
    let mut rng = Rng::seeded(3);
    let convo = text("You are a helpful assistant. Conversation 7. ", 2048);
    let req = PickRequest {
        key: None,
        model: None,
        text: Some(&convo),
    };
    let first = ca.pick(&req, &snap, &ids(4), &mut rng);
    for _ in 0..20 {
        assert_eq!(ca.pick(&req, &snap, &ids(4), &mut rng), first);
    }
}

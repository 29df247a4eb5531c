use crate::worker::Ring;
use crate::worker::WorkerId;
use proptest::prelude::*;

fn urls(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("http://10.0.0.{}:30000", i + 1))
        .collect()
}

fn ring_of(urls: &[String]) -> Ring {
    Ring::build(
        urls.iter()
            .enumerate()
            .map(|(i, u)| (WorkerId(i as u32), u.as_str())),
    )
}

fn ids(n: usize) -> Vec<WorkerId> {
    (0..n as u32).map(WorkerId).collect()
}

/// Golden placements: if this test fails, a change moved live sessions between workers.
#[test]
fn golden_placements() {
    let u = urls(4);
    let ring = ring_of(&u);
    let all = ids(4);
    let got: Vec<u32> = [
        "conv-0",
        "conv-1",
        "conv-2",
        "conv-3",
        "user-1234",
        "chat-7f3a",
        "",
        "日本",
    ]
    .iter()
    .map(|k| ring.lookup(k.as_bytes(), &all).unwrap().0)
    .collect();
    assert_eq!(got, GOLDEN);
    // Ring layout: the first points are fixed too.
    let head: Vec<(u64, u32)> = ring.points.iter().take(3).map(|(p, w)| (*p, w.0)).collect();
    assert_eq!(head, GOLDEN_HEAD);
}

const GOLDEN: [u32; 8] = [2, 1, 3, 3, 1, 0, 3, 2];
const GOLDEN_HEAD: [(u64, u32); 3] = [
    (44599352084519623, 2),
    (67290446334533572, 1),
    (102899342644383419, 0),
];

#[test]
fn spread_is_even_within_reason() {
    let ring = ring_of(&urls(8));
    let all = ids(8);
    let mut counts = [0usize; 8];
    for i in 0..80_000 {
        counts[ring.lookup(format!("k{i}").as_bytes(), &all).unwrap().0 as usize] += 1;
    }
    for c in counts {
        assert!((7_000..13_000).contains(&c), "{counts:?}");
    }
}

#[test]
fn no_candidates_no_worker() {
    let ring = ring_of(&urls(3));
    assert_eq!(ring.lookup(b"k", &[]), None);
    assert_eq!(Ring::default().lookup(b"k", &ids(3)), None);
}

proptest! {
    #[test]
    fn independent_rings_agree(keys in proptest::collection::vec("[a-z0-9]{1,16}", 1..50)) {
        let u = urls(5);
        let a = ring_of(&u);
        // a second replica registers the same URLs in another order, with other ids
        let b = Ring::build(u.iter().enumerate().rev().map(|(i, s)| (WorkerId(10 + i as u32), s.as_str())));
        let cands_b: Vec<WorkerId> = (10..15).map(WorkerId).collect();
        for k in keys {
            let wa = a.lookup(k.as_bytes(), &ids(5)).unwrap().0;
            let wb = b.lookup(k.as_bytes(), &cands_b).unwrap().0 - 10;
            prop_assert_eq!(wa, wb);
        }
    }

    #[test]
    fn removing_a_worker_moves_only_its_keys(keys in proptest::collection::vec("[a-z0-9]{1,16}", 1..80), gone in 0u32..6) {
        let ring = ring_of(&urls(6));
        let all = ids(6);
        let rest: Vec<WorkerId> = all.iter().copied().filter(|w| w.0 != gone).collect();
        for k in keys {
            let before = ring.lookup(k.as_bytes(), &all).unwrap();
            let after = ring.lookup(k.as_bytes(), &rest).unwrap();
            if before.0 != gone {
                prop_assert_eq!(before, after);
            } else {
                prop_assert_ne!(after.0, gone);
            }
        }
    }

    #[test]
    fn adding_a_worker_moves_keys_only_to_it(keys in proptest::collection::vec("[a-z0-9]{1,16}", 1..80)) {
        let five = ring_of(&urls(5));
        let six = ring_of(&urls(6));
        for k in keys {
            let before = five.lookup(k.as_bytes(), &ids(5)).unwrap();
            let after = six.lookup(k.as_bytes(), &ids(6)).unwrap();
            prop_assert!(after == before || after.0 == 5);
        }
    }
}

#[test]
fn adding_a_worker_moves_about_one_nth() {
    let five = ring_of(&urls(5));
    let six = ring_of(&urls(6));
    let moved = (0..30_000)
        .filter(|i| {
            let k = format!("key-{i}");
            five.lookup(k.as_bytes(), &ids(5)) != six.lookup(k.as_bytes(), &ids(6))
        })
        .count();
    // expected 1/6 = 5000
    assert!((3_500..6_500).contains(&moved), "{moved}");
}

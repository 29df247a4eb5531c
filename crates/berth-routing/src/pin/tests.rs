//! The sharded table: sweeps that resume across calls and across growth, count bookkeeping.

use std::sync::Arc;

use super::slots::Entry;
use super::*;
use crate::WorkerEntry;

fn one_worker() -> WorkerSnapshot {
    WorkerSnapshot::new(vec![WorkerEntry {
        id: WorkerId(0),
        url: "http://w0:8000".into(),
        models: vec![],
        available: true,
        stats: Arc::default(),
    }])
}

/// A key in shard 0 whose slot-index bits are `home` and which is unique by `tag`.
fn key(home: usize, tag: u128) -> u128 {
    (((tag << 14) | home as u128) << 1) | 1
}

fn insert(t: &PinTable, k: u128, last_used: u32) {
    let mut shard = t.lock(k);
    t.insert_bounded(t.shard_of(k), &mut shard, Entry::new(k, 0, last_used), || 0);
}

#[test]
fn a_sweep_resumed_after_growth_misses_no_idle_pin() {
    let t = PinTable::with_placement(0, slots::Placement::Raw);
    let snap = one_worker();
    let (now, max_idle) = (1000, 100);
    let mut tag = 1;
    let mut next = || {
        tag += 1;
        tag
    };
    let mut i = 0;
    let mut filler = |t: &PinTable, pins: usize, next: &mut dyn FnMut() -> u128| {
        while t.len() < pins {
            i += 1;
            let home = (i * 7919) % 8192;
            if !(3900..4300).contains(&home) {
                insert(t, key(home, next()), now);
            }
        }
    };
    // Fresh filler away from the cluster below: the shard has 8192 slots.
    filler(&t, 3590, &mut next);
    // Six fresh pins whose home is 4090 in an 8192-slot shard but 12282 after growth, then
    // six idle ones homed at 4090 at both sizes: they sit in slots 4096.. until growth.
    for _ in 0..6 {
        insert(&t, key(4090 + 8192, next()), now);
    }
    for _ in 0..6 {
        insert(&t, key(4090, next()), 0);
    }
    assert_eq!(t.shards[0].lock().unwrap().capacity(), 8192);
    // The first step visits slots 0..4096 of shard 0: nothing idle there.
    assert_eq!(t.sweep_step(now, max_idle, &snap), (0, false));
    // The shard grows before the sweep resumes; the idle pins move to slots 4090..4096.
    filler(&t, 7200, &mut next);
    assert_eq!(t.shards[0].lock().unwrap().capacity(), 16384);
    let mut idle = 0;
    loop {
        let (n, finished) = t.sweep_step(now, max_idle, &snap);
        idle += n;
        if finished {
            break;
        }
    }
    assert_eq!(idle, 6, "every idle pin is removed by the pass");
    assert_eq!(t.len(), t.shards[0].lock().unwrap().len());
}

mod slots_model {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::super::slots::{Entry, Slots};

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u16, u8),
        Remove(u16),
        /// Sweep from `start` over `len` slots, removing entries whose last_used is below 3.
        Sweep(u16, u16),
        Evict(u64),
        /// A whole pass in steps of `len` slots.
        Pass(u16),
    }

    /// Keys whose home slot is near the end of the table, so clusters wrap to slot 0.
    fn key(k: u16, capacity: usize) -> u128 {
        let home = (capacity - 1 - (k as usize % 5)) as u128;
        ((u128::from(k) << 40) | (home << 1)) | 1
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u16..200, 0u8..6).prop_map(|(k, t)| Op::Insert(k, t)),
            2 => (0u16..200).prop_map(Op::Remove),
            1 => (0u16..300, 1u16..64).prop_map(|(s, l)| Op::Sweep(s, l)),
            1 => any::<u64>().prop_map(Op::Evict),
            1 => (1u16..40).prop_map(Op::Pass),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn wrapping_clusters_behave_like_a_map(ops in proptest::collection::vec(op(), 1..300)) {
            let mut t = Slots::with_placement(super::slots::Placement::Raw);
            let mut m: HashMap<u16, (u128, u8)> = HashMap::new();
            for op in ops {
                // homes depend on the capacity when the key was first inserted: remember the key
                match op {
                    Op::Insert(k, tick) => {
                        if let std::collections::hash_map::Entry::Vacant(v) = m.entry(k) {
                            let key = key(k, t.capacity());
                            v.insert((key, tick));
                            t.insert(Entry::new(key, u32::from(k), u32::from(tick)));
                        }
                    }
                    Op::Remove(k) => {
                        let want = m.remove(&k).map(|(key, _)| key);
                        let got = want.and_then(|key| t.remove(key)).map(|e| e.key);
                        prop_assert_eq!(got, want);
                    }
                    Op::Sweep(start, len) => {
                        let start = usize::from(start) % t.capacity();
                        let mut gone = Vec::new();
                        t.sweep_range(start, usize::from(len), |_| {}, |e| e.last_used < 3, |e| gone.push(e.key));
                        for g in &gone {
                            let k = m.iter().find(|(_, (key, _))| key == g).map(|(k, _)| *k);
                            prop_assert!(k.is_some_and(|k| m[&k].1 < 3));
                            m.retain(|_, (key, _)| key != g);
                        }
                    }
                    Op::Pass(len) => {
                        let mut at = Some(0);
                        let mut gone = Vec::new();
                        while let Some(start) = at {
                            at = t.sweep_range(start, usize::from(len), |_| {}, |e| e.last_used < 3, |e| gone.push(e.key));
                        }
                        let want = m.values().filter(|(_, tick)| *tick < 3).count();
                        prop_assert_eq!(gone.len(), want, "a pass removes every selected entry once");
                        m.retain(|_, (_, tick)| *tick >= 3);
                    }
                    Op::Evict(seed) => {
                        let mut x = seed;
                        let gone = t.evict_sampled(8, || { x = x.wrapping_add(0x9E37_79B9_7F4A_7C15); x });
                        if let Some(g) = gone {
                            prop_assert!(m.values().any(|(key, _)| *key == g.key));
                            m.retain(|_, (key, _)| *key != g.key);
                        } else {
                            prop_assert!(m.is_empty());
                        }
                    }
                }
                prop_assert_eq!(t.len(), m.len());
                for (k, (key, _)) in &m {
                    prop_assert_eq!(t.get_mut(*key).map(|e| e.workers[0]), Some(u32::from(*k)));
                }
            }
        }
    }
}

#[test]
fn keyed_placement_spreads_keys_crafted_to_collide() {
    // 2000 keys sharing the shard bits and the home-slot bits of the raw hash
    let keys: Vec<u128> = (0..2000u128).map(|i| (i << 64) | 1).collect();
    let raw = PinTable::with_placement(0, slots::Placement::Raw);
    let keyed = PinTable::new(0);
    let shards = |t: &PinTable| {
        keys.iter()
            .map(|k| t.shard_of(*k))
            .collect::<std::collections::HashSet<_>>()
            .len()
    };
    assert_eq!(shards(&raw), 1);
    assert!(shards(&keyed) > 200, "{}", shards(&keyed));
    let homes: std::collections::HashSet<usize> = keys
        .iter()
        .map(|k| slots::Placement::Keyed.spot(*k).1 & 0xffff)
        .collect();
    assert!(homes.len() > 1900, "{}", homes.len());
}

#[test]
fn a_keys_place_is_the_same_whether_its_hash_was_kept_or_made() {
    let keyed = slots::Placement::Keyed;
    let keys = [3u128, 5, 1 << 100, u128::MAX];
    let fresh: Vec<_> = keys.iter().map(|k| keyed.spot(*k)).collect();
    // again, each right after itself (kept) and after another key (made again)
    for (k, want) in keys.iter().zip(&fresh) {
        assert_eq!(keyed.spot(*k), *want);
        assert_eq!(keyed.spot(*k), *want);
    }
    for (k, want) in keys.iter().zip(&fresh).rev() {
        assert_eq!(keyed.spot(*k), *want);
    }
    assert_ne!(fresh[0], fresh[1]);
}

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
    t.insert_bounded(
        PinTable::shard_of(k),
        &mut shard,
        Entry::new(k, 0, last_used),
        || 0,
    );
}

#[test]
fn a_sweep_resumed_after_growth_misses_no_idle_pin() {
    let t = PinTable::new(0);
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

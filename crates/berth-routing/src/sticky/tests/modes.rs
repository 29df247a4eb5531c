//! SPEC.md section 2, assignment modes: "where a new key goes, and where it moves when none of
//! its remembered workers is available: `random`, `min_load` (fewest requests in flight),
//! `min_group` (fewest keys), `delegate` (...). Ties break at random."

use std::collections::BTreeSet;

use super::*;

fn manual_with(mode: AssignmentMode) -> Router {
    router(PolicyKind::Manual, false, Some(mode))
}

/// `min_load`: every new key goes to a worker with the fewest requests in flight, even while
/// the earlier keys' requests are still running.
#[test]
fn min_load_places_a_new_key_on_a_least_loaded_worker() {
    let f = Fleet::new(3);
    let s = f.snap(&[]);
    let r = manual_with(AssignmentMode::MinLoad);
    let mut rng = Rng::seeded(2);
    let mut held = Vec::new();
    for i in 0..9 {
        let least = f.stats.iter().map(|s| s.in_flight()).min().unwrap();
        let d = route_key(&r, &s, &format!("k{i}"), &mut rng);
        assert_eq!(d.branch, Some(Branch::Vacant));
        // `d` already counts against its worker: it had `least` before.
        assert_eq!(f.stats[d.worker.0 as usize].in_flight(), least + 1, "k{i}");
        held.push(d);
    }
    assert!(f.stats.iter().all(|s| s.in_flight() == 3));
}

/// `min_load` also decides where a key moves when its worker is unavailable.
#[test]
fn min_load_decides_where_a_key_fails_over() {
    let f = Fleet::new(3);
    let r = manual_with(AssignmentMode::MinLoad);
    let mut rng = Rng::seeded(5);
    let all = f.snap(&[]);
    let home = route_key(&r, &all, "k", &mut rng).worker;
    let others: Vec<u32> = (0..3).filter(|i| *i != home.0).collect();
    // Two requests of other keys stay in flight on `busy` (placed by another router over a
    // fleet view holding only `busy`; the in-flight counts are the fleet's).
    let busy = WorkerId(others[0]);
    let idle = WorkerId(others[1]);
    let loader = manual_with(AssignmentMode::Random);
    let only_busy = f.snap_of(&[busy.0], &[]);
    let held: Vec<_> = (0..2)
        .map(|i| route_key(&loader, &only_busy, &format!("filler-{i}"), &mut rng))
        .collect();
    assert_eq!(f.stats[busy.0 as usize].in_flight(), 2);
    let d = route_key(&r, &f.snap(&[home.0]), "k", &mut rng);
    assert_eq!((d.worker, d.branch), (idle, Some(Branch::OccupiedMiss)));
    drop(held);
}

/// `min_group`: every new key goes to a worker with the fewest pinned keys.
#[test]
fn min_group_places_a_new_key_on_a_worker_with_fewest_keys() {
    let f = Fleet::new(3);
    let s = f.snap(&[]);
    let r = manual_with(AssignmentMode::MinGroup);
    let mut rng = Rng::seeded(9);
    for i in 0..12 {
        let fewest = f.stats.iter().map(|s| s.pinned_keys()).min().unwrap();
        let d = route_key(&r, &s, &format!("k{i}"), &mut rng);
        assert_eq!(f.stats[d.worker.0 as usize].pinned_keys(), fewest + 1);
    }
}

/// `min_group` also decides where a key moves when its worker is unavailable.
#[test]
fn min_group_decides_where_a_key_fails_over() {
    let f = Fleet::new(3);
    let r = manual_with(AssignmentMode::MinGroup);
    let mut rng = Rng::seeded(1);
    let all = f.snap(&[]);
    // Three keys, one per worker (min_group), then one more on each of two workers.
    for i in 0..5 {
        drop(route_key(&r, &all, &format!("k{i}"), &mut rng));
    }
    let counts: Vec<u32> = f.stats.iter().map(|s| s.pinned_keys()).collect();
    let lonely = counts.iter().position(|c| *c == 1).unwrap() as u32;
    let home = (0..3).find(|w| *w != lonely).unwrap();
    // A key pinned to `home`: take it down, the key moves to the worker with fewest keys.
    let key = (0..5)
        .map(|i| format!("k{i}"))
        .find(|k| route_key(&r, &all, k, &mut rng).worker.0 == home)
        .unwrap();
    let d = route_key(&r, &f.snap(&[home]), &key, &mut rng);
    assert_eq!((d.worker.0, d.branch), (lonely, Some(Branch::OccupiedMiss)));
}

/// "Ties break at random": with every worker equally loaded (nothing in flight, or the same
/// number of keys), the first key does not always land on the same worker.
#[test]
fn ties_break_at_random() {
    for mode in [
        AssignmentMode::Random,
        AssignmentMode::MinLoad,
        AssignmentMode::MinGroup,
    ] {
        let mut first = BTreeSet::new();
        for seed in 0..32 {
            // A fresh fleet each time: no worker has a request in flight or a pinned key.
            let f = Fleet::new(4);
            let r = manual_with(mode);
            let mut rng = Rng::seeded(seed);
            first.insert(route_key(&r, &f.snap(&[]), "k", &mut rng).worker);
        }
        assert_eq!(first.len(), 4, "{mode}: {first:?}");
    }
}

/// `random`: new keys spread over every worker.
#[test]
fn random_spreads_new_keys_over_every_worker() {
    let f = Fleet::new(4);
    let s = f.snap(&[]);
    let r = manual_with(AssignmentMode::Random);
    let mut rng = Rng::seeded(21);
    for i in 0..40 {
        drop(route_key(&r, &s, &format!("k{i}"), &mut rng));
    }
    let counts: Vec<u32> = f.stats.iter().map(|s| s.pinned_keys()).collect();
    assert!(counts.iter().all(|c| *c > 0), "{counts:?}");
    assert_eq!(counts.iter().sum::<u32>(), 40);
}

//! The load-only policies and helpers shared by the others.

use crate::{Rng, WorkerId, WorkerSnapshot};

/// The candidate with the fewest requests in flight; ties broken at random.
pub(crate) fn least_loaded(snap: &WorkerSnapshot, cands: &[WorkerId], rng: &mut Rng) -> WorkerId {
    min_by_random_tie(cands, |w| snap.load(w), rng)
}

/// The candidate minimising `score`, ties broken uniformly at random (reservoir sampling, so
/// no allocation). `cands` must be non-empty.
pub(crate) fn min_by_random_tie(
    cands: &[WorkerId],
    score: impl Fn(WorkerId) -> u32,
    rng: &mut Rng,
) -> WorkerId {
    let mut best = cands[0];
    let mut best_score = score(best);
    let mut ties = 1usize;
    for &w in &cands[1..] {
        let s = score(w);
        if s < best_score {
            best = w;
            best_score = s;
            ties = 1;
        } else if s == best_score {
            ties += 1;
            if rng.below(ties) == 0 {
                best = w;
            }
        }
    }
    best
}

/// Two distinct random candidates; the one with fewer requests in flight (the first on a tie).
pub(crate) fn power_of_two(snap: &WorkerSnapshot, cands: &[WorkerId], rng: &mut Rng) -> WorkerId {
    if cands.len() == 1 {
        return cands[0];
    }
    let a = rng.below(cands.len());
    let mut b = rng.below(cands.len() - 1);
    if b >= a {
        b += 1;
    }
    let (wa, wb) = (cands[a], cands[b]);
    if snap.load(wb) < snap.load(wa) {
        wb
    } else {
        wa
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::WorkerEntry;
    use std::sync::Arc;

    fn snap(loads: &[u32]) -> WorkerSnapshot {
        WorkerSnapshot::new(
            loads
                .iter()
                .enumerate()
                .map(|(i, &l)| {
                    let stats = Arc::new(crate::WorkerStats::default());
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

    #[test]
    fn least_loaded_breaks_ties_at_random() {
        let s = snap(&[3, 1, 1, 5]);
        let cands: Vec<_> = (0..4).map(WorkerId).collect();
        let mut rng = Rng::seeded(3);
        let mut seen = [0; 4];
        for _ in 0..400 {
            seen[least_loaded(&s, &cands, &mut rng).0 as usize] += 1;
        }
        assert_eq!((seen[0], seen[3]), (0, 0));
        assert!(seen[1] > 100 && seen[2] > 100, "{seen:?}");
    }

    #[test]
    fn power_of_two_never_picks_the_most_loaded_of_two() {
        let s = snap(&[0, 9]);
        let cands = [WorkerId(0), WorkerId(1)];
        let mut rng = Rng::seeded(5);
        for _ in 0..50 {
            assert_eq!(power_of_two(&s, &cands, &mut rng), WorkerId(0));
        }
        assert_eq!(power_of_two(&s, &[WorkerId(1)], &mut rng), WorkerId(1));
    }
}

//! Randomness for the request path: one seeded generator per thread (routing draws from it
//! synchronously), and seeds that differ per call. Routing draws through [`RoutingRng`], which
//! `--routing-seed` makes repeatable.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::routing::Rng;

/// A seed that differs per call (time and a counter), for per-thread generators.
pub(crate) fn fresh_seed() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos
        ^ COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

thread_local! {
    static RNG: RefCell<Rng> = RefCell::new(Rng::seeded(fresh_seed()));
}

/// Runs `f` with this thread's generator (routing is synchronous, so no await inside).
pub(crate) fn with_rng<T>(f: impl FnOnce(&mut Rng) -> T) -> T {
    RNG.with_borrow_mut(f)
}

/// The generator routing decisions draw from.
///
/// Unseeded (the default), each thread's clock-seeded generator ([`with_rng`]). Seeded
/// (`--routing-seed`), one sequence for the whole gateway, whichever thread routes: the n-th
/// decision draws from a generator seeded by the n-th value of the seed's SplitMix64 stream, so
/// two gateways given one seed and the same requests in the same order make the same choices.
/// (What else a decision reads, the workers' queues and load, still depends on timing.)
#[derive(Debug)]
pub(crate) struct RoutingRng {
    seeded: Option<Seeded>,
}

#[derive(Debug)]
struct Seeded {
    seed: u64,
    /// Decisions drawn so far.
    next: AtomicU64,
}

impl RoutingRng {
    pub(crate) fn new(seed: Option<u64>) -> Self {
        Self {
            seeded: seed.map(|seed| Seeded {
                seed,
                next: AtomicU64::new(0),
            }),
        }
    }

    /// Runs one routing decision `f` with its generator.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut Rng) -> T) -> T {
        match &self.seeded {
            None => with_rng(f),
            Some(s) => {
                let n = s.next.fetch_add(1, Ordering::Relaxed);
                // the stream's n-th value, not `seed + n` itself: consecutive decisions'
                // generators must not share their streams shifted by one
                let derived = Rng::seeded(s.seed.wrapping_add(n)).next_u64();
                f(&mut Rng::seeded(derived))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draws(r: &RoutingRng) -> Vec<u64> {
        (0..50).map(|_| r.with(|g| g.next_u64())).collect()
    }

    #[test]
    fn one_seed_gives_one_sequence_of_decisions() {
        assert_eq!(
            draws(&RoutingRng::new(Some(7))),
            draws(&RoutingRng::new(Some(7)))
        );
        assert_ne!(
            draws(&RoutingRng::new(Some(7))),
            draws(&RoutingRng::new(Some(8)))
        );
    }

    #[test]
    fn a_decisions_draws_are_not_the_next_decisions() {
        let r = RoutingRng::new(Some(1));
        let (a1, a2) = r.with(|g| (g.next_u64(), g.next_u64()));
        let b1 = r.with(|g| g.next_u64());
        assert_ne!(a2, b1);
        assert_ne!(a1, b1);
    }
}

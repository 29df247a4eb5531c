//! Randomness for the request path: one seeded generator per thread (routing draws from it
//! synchronously), and seeds that differ per call.

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

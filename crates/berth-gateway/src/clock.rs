//! The gateway's monotonic clock: time since start, as the routing core wants it.
//!
//! The core has no clock; every decision takes `now`. Keeping the one clock here lets tests move
//! time forward ([`Clock::advance`]) to drive idle eviction without sleeping.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Monotonic time since the gateway started, plus a test-settable offset.
#[derive(Debug)]
pub struct Clock {
    start: Instant,
    offset_nanos: AtomicU64,
}

impl Clock {
    /// A clock starting now.
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
            offset_nanos: AtomicU64::new(0),
        }
    }

    /// Time since start (plus any [`Clock::advance`]).
    pub fn now(&self) -> Duration {
        self.start.elapsed() + Duration::from_nanos(self.offset_nanos.load(Ordering::Relaxed))
    }

    /// Moves this clock forward (tests: make pins idle without waiting).
    pub fn advance(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.offset_nanos.fetch_add(nanos, Ordering::Relaxed);
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

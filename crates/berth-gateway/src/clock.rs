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

    /// This clock's time at `instant` (one read of the system clock serving two uses).
    pub fn at(&self, instant: Instant) -> Duration {
        instant.saturating_duration_since(self.start)
            + Duration::from_nanos(self.offset_nanos.load(Ordering::Relaxed))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_is_now_for_an_instant_read_elsewhere() {
        let clock = Clock::new();
        clock.advance(Duration::from_secs(5));
        let t = Instant::now();
        let at = clock.at(t);
        assert!(at >= Duration::from_secs(5));
        assert!(at <= clock.now());
        assert_eq!(
            clock.at(t + Duration::from_secs(1)),
            at + Duration::from_secs(1)
        );
        // an instant before the clock's start is its start
        let early = clock.start.checked_sub(Duration::from_secs(1));
        if let Some(early) = early {
            assert_eq!(clock.at(early), Duration::from_secs(5));
        }
    }
}

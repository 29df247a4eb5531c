//! A per-worker circuit breaker as a state machine.
//!
//! `Closed` counts consecutive failures; at `failure_threshold` it opens until `now +
//! open_timeout`. Once that time has passed the breaker is `HalfOpen`: requests flow again,
//! `success_threshold` consecutive successes close it, one failure reopens it. The caller
//! feeds outcomes with the current time and emits metrics and logs for each [`Transition`];
//! the breaker reads no clock.

use std::time::Duration;

/// Breaker settings (SMG's `--cb-*` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerConfig {
    /// Consecutive failures that open the breaker (`--cb-failure-threshold`, >= 1).
    pub failure_threshold: u32,
    /// Consecutive half-open successes that close it (`--cb-success-threshold`, >= 1).
    pub success_threshold: u32,
    /// How long it stays open (`--cb-timeout-duration-secs`).
    pub open_timeout: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            failure_threshold: 10,
            success_threshold: 3,
            open_timeout: Duration::from_secs(60),
        }
    }
}

/// The breaker's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Requests flow; failures are counted.
    Closed,
    /// Requests are refused until `until`.
    Open {
        /// When the breaker becomes half-open.
        until: Duration,
    },
    /// Trial requests flow; successes are counted.
    HalfOpen,
}

impl BreakerState {
    /// The `smg_worker_cb_state` gauge value: 0 closed, 1 open, 2 half-open.
    pub fn gauge(self) -> i64 {
        match self {
            Self::Closed => 0,
            Self::Open { .. } => 1,
            Self::HalfOpen => 2,
        }
    }
}

/// A request's outcome as the breaker sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The worker answered (any status it is not blamed for).
    Success,
    /// Connection error, timeout or a 5xx answer.
    Failure,
}

/// A state change, for the caller to log and count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    /// The state before.
    pub from: BreakerState,
    /// The state after.
    pub to: BreakerState,
}

/// One worker's breaker.
#[derive(Debug, Clone)]
pub struct Breaker {
    cfg: BreakerConfig,
    state: BreakerState,
    failures: u32,
    successes: u32,
}

impl Breaker {
    /// A closed breaker.
    pub fn new(cfg: BreakerConfig) -> Self {
        Self {
            cfg,
            state: BreakerState::Closed,
            failures: 0,
            successes: 0,
        }
    }

    /// The state at `now` (an open breaker whose time is up reads as half-open).
    pub fn state(&self, now: Duration) -> BreakerState {
        match self.state {
            BreakerState::Open { until } if now >= until => BreakerState::HalfOpen,
            s => s,
        }
    }

    /// Whether requests may go to the worker at `now`.
    pub fn allows(&self, now: Duration) -> bool {
        !matches!(self.state(now), BreakerState::Open { .. })
    }

    /// When an open breaker turns half-open, if it is open.
    pub fn reopens_at(&self) -> Option<Duration> {
        match self.state {
            BreakerState::Open { until } => Some(until),
            _ => None,
        }
    }

    /// Records an outcome; returns the transition it caused, if any.
    pub fn on_outcome(&mut self, outcome: Outcome, now: Duration) -> Option<Transition> {
        let from = self.state(now);
        let to = match (from, outcome) {
            (BreakerState::Closed, Outcome::Success) => {
                self.failures = 0;
                BreakerState::Closed
            }
            (BreakerState::Closed, Outcome::Failure) => {
                self.failures += 1;
                if self.failures >= self.cfg.failure_threshold {
                    BreakerState::Open {
                        until: now + self.cfg.open_timeout,
                    }
                } else {
                    BreakerState::Closed
                }
            }
            (BreakerState::HalfOpen, Outcome::Success) => {
                self.successes += 1;
                if self.successes >= self.cfg.success_threshold {
                    BreakerState::Closed
                } else {
                    BreakerState::HalfOpen
                }
            }
            (BreakerState::HalfOpen, Outcome::Failure) => BreakerState::Open {
                until: now + self.cfg.open_timeout,
            },
            // Late outcomes of requests sent before the breaker opened change nothing.
            (BreakerState::Open { .. }, _) => from,
        };
        if std::mem::discriminant(&to) == std::mem::discriminant(&from) {
            if from == BreakerState::HalfOpen && self.state != BreakerState::HalfOpen {
                self.state = BreakerState::HalfOpen;
            }
            return None;
        }
        self.failures = 0;
        self.successes = 0;
        self.state = to;
        Some(Transition { from, to })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    fn cfg() -> BreakerConfig {
        BreakerConfig {
            failure_threshold: 3,
            success_threshold: 2,
            open_timeout: S(10),
        }
    }

    #[test]
    fn opens_after_consecutive_failures_only() {
        let mut b = Breaker::new(cfg());
        assert_eq!(b.on_outcome(Outcome::Failure, S(0)), None);
        assert_eq!(b.on_outcome(Outcome::Failure, S(0)), None);
        assert_eq!(b.on_outcome(Outcome::Success, S(0)), None); // resets the count
        assert_eq!(b.on_outcome(Outcome::Failure, S(1)), None);
        assert_eq!(b.on_outcome(Outcome::Failure, S(1)), None);
        let t = b.on_outcome(Outcome::Failure, S(1)).unwrap();
        assert_eq!(
            t,
            Transition {
                from: BreakerState::Closed,
                to: BreakerState::Open { until: S(11) }
            }
        );
        assert!(!b.allows(S(5)));
        assert_eq!(b.state(S(5)).gauge(), 1);
    }

    #[test]
    fn half_opens_after_timeout_and_closes_after_successes() {
        let mut b = Breaker::new(cfg());
        for _ in 0..3 {
            b.on_outcome(Outcome::Failure, S(0));
        }
        assert!(b.allows(S(10)));
        assert_eq!(b.state(S(10)), BreakerState::HalfOpen);
        assert_eq!(b.on_outcome(Outcome::Success, S(10)), None);
        let t = b.on_outcome(Outcome::Success, S(11)).unwrap();
        assert_eq!(
            (t.from, t.to),
            (BreakerState::HalfOpen, BreakerState::Closed)
        );
    }

    #[test]
    fn half_open_failure_reopens() {
        let mut b = Breaker::new(cfg());
        for _ in 0..3 {
            b.on_outcome(Outcome::Failure, S(0));
        }
        let t = b.on_outcome(Outcome::Failure, S(12)).unwrap();
        assert_eq!(t.to, BreakerState::Open { until: S(22) });
        assert!(!b.allows(S(21)));
        assert!(b.allows(S(22)));
    }

    #[test]
    fn half_open_successes_do_not_carry_over_a_reopen() {
        let mut b = Breaker::new(cfg());
        for _ in 0..3 {
            b.on_outcome(Outcome::Failure, S(0));
        }
        assert_eq!(b.on_outcome(Outcome::Success, S(10)), None); // 1 of 2
        assert_eq!(
            b.on_outcome(Outcome::Failure, S(10)).map(|t| t.to),
            Some(BreakerState::Open { until: S(20) })
        );
        // half-open again: one success is not enough, two are
        assert_eq!(b.on_outcome(Outcome::Success, S(20)), None);
        assert_eq!(b.state(S(20)), BreakerState::HalfOpen);
        assert_eq!(
            b.on_outcome(Outcome::Success, S(21)).map(|t| t.to),
            Some(BreakerState::Closed)
        );
        // closed again: the failure count starts from zero
        assert_eq!(b.on_outcome(Outcome::Failure, S(22)), None);
        assert_eq!(b.on_outcome(Outcome::Failure, S(22)), None);
        assert!(b.allows(S(22)));
    }

    #[test]
    fn thresholds_of_one_and_a_zero_timeout() {
        let mut b = Breaker::new(BreakerConfig {
            failure_threshold: 1,
            success_threshold: 1,
            open_timeout: S(0),
        });
        let t = b.on_outcome(Outcome::Failure, S(5)).unwrap();
        assert_eq!(t.to, BreakerState::Open { until: S(5) });
        assert!(b.allows(S(5)), "a zero timeout is half-open at once");
        let t = b.on_outcome(Outcome::Success, S(5)).unwrap();
        assert_eq!(
            (t.from, t.to),
            (BreakerState::HalfOpen, BreakerState::Closed)
        );
    }

    #[test]
    fn late_outcomes_while_open_change_nothing() {
        let mut b = Breaker::new(cfg());
        for _ in 0..3 {
            b.on_outcome(Outcome::Failure, S(0));
        }
        assert_eq!(b.on_outcome(Outcome::Success, S(1)), None);
        assert!(!b.allows(S(2)));
    }
}

//! When root sessions start under `--request-rate`: the arrival schedule.
//!
//! `constant` (the default, what the bench always did) starts root `i` at `i / rate` seconds;
//! `poisson` (aiperf's `--arrival-pattern poisson`) draws exponential inter-arrival times with
//! mean `1 / rate` from a generator seeded by the run's seed, so a rerun with the same
//! `--random-seed` starts its roots at the same offsets. Either way the first root starts at 0.
//! The schedule is sleep-then-gate, as in aiperf: a root waits for its start time, then for a
//! `--concurrency` slot. Offsets count from the run's start, so roots whose time passed while
//! every slot was taken start as soon as slots free up (aiperf does not catch up; the bench
//! always did).
//!
//! The schedule is a pure function of the pattern, the rate and the seed, so its statistics are
//! tested without a clock.

use std::time::Duration;

use crate::rng::Rng;

/// How root session starts are spread under `--request-rate` (`--arrival-pattern`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ArrivalPattern {
    /// Exactly `1 / rate` seconds apart.
    #[default]
    Constant,
    /// Exponential gaps with mean `1 / rate` (a Poisson process), seeded.
    Poisson,
}

/// Stream of the run's seed that drives Poisson gaps (root sessions use streams 0, 1, 2, ...,
/// so a stream this high never collides with one).
const ARRIVAL_STREAM: u64 = u64::MAX - 0xA881;

/// The start offsets of successive root sessions.
#[derive(Debug, Clone)]
pub struct Arrivals {
    pattern: ArrivalPattern,
    rate: f64,
    rng: Rng,
    index: u64,
    next_s: f64,
}

impl Arrivals {
    /// The schedule for `rate` root starts per second (`rate > 0`), drawing from `seed`.
    pub fn new(pattern: ArrivalPattern, rate: f64, seed: &Rng) -> Self {
        Self {
            pattern,
            rate,
            rng: seed.derive(ARRIVAL_STREAM),
            index: 0,
            next_s: 0.0,
        }
    }

    /// The offset from the run's start of the next root session.
    pub fn next_offset(&mut self) -> Duration {
        let at = match self.pattern {
            // Computed from the index, not summed, so no rounding error builds up.
            ArrivalPattern::Constant => self.index as f64 / self.rate,
            ArrivalPattern::Poisson => {
                let at = self.next_s;
                // 1 - u is in (0, 1], so the logarithm is finite.
                let u = 1.0 - self.rng.next_f64();
                self.next_s += -u.ln() / self.rate;
                at
            }
        };
        self.index += 1;
        Duration::from_secs_f64(at.max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(pattern: ArrivalPattern, rate: f64, seed: u64, n: usize) -> Vec<f64> {
        let mut a = Arrivals::new(pattern, rate, &Rng::new(seed));
        (0..n).map(|_| a.next_offset().as_secs_f64()).collect()
    }

    #[test]
    fn constant_is_evenly_spaced_from_zero() {
        let o = offsets(ArrivalPattern::Constant, 4.0, 1, 5);
        assert_eq!(o, [0.0, 0.25, 0.5, 0.75, 1.0]);
    }

    #[test]
    fn poisson_gaps_are_exponential_with_the_rate_as_mean() {
        let rate = 5.0;
        let n = 20_000;
        let o = offsets(ArrivalPattern::Poisson, rate, 42, n + 1);
        assert_eq!(o[0], 0.0);
        let gaps: Vec<f64> = o.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.iter().all(|g| *g >= 0.0));
        let mean = gaps.iter().sum::<f64>() / n as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n as f64;
        // Exponential: mean 1/rate, coefficient of variation 1, P(gap > mean) = 1/e.
        assert!((mean * rate - 1.0).abs() < 0.03, "mean {mean}");
        assert!(
            (var.sqrt() / mean - 1.0).abs() < 0.05,
            "cv {}",
            var.sqrt() / mean
        );
        let above = gaps.iter().filter(|g| **g > 1.0 / rate).count() as f64 / n as f64;
        assert!(
            (above - (-1.0f64).exp()).abs() < 0.02,
            "P(gap > mean) {above}"
        );
        // Roots per one-second window are Poisson(rate): variance close to the mean.
        let windows = (o[n] as usize).max(1);
        let mut counts = vec![0f64; windows];
        for t in &o {
            if let Some(c) = counts.get_mut(*t as usize) {
                *c += 1.0;
            }
        }
        let m = counts.iter().sum::<f64>() / windows as f64;
        let v = counts.iter().map(|c| (c - m).powi(2)).sum::<f64>() / windows as f64;
        assert!((v / m - 1.0).abs() < 0.15, "dispersion {}", v / m);
    }

    #[test]
    fn poisson_is_reproducible_from_the_seed() {
        let a = offsets(ArrivalPattern::Poisson, 2.0, 7, 50);
        assert_eq!(a, offsets(ArrivalPattern::Poisson, 2.0, 7, 50));
        assert_ne!(a, offsets(ArrivalPattern::Poisson, 2.0, 8, 50));
        // Strictly not the constant schedule.
        assert_ne!(a, offsets(ArrivalPattern::Constant, 2.0, 7, 50));
    }
}

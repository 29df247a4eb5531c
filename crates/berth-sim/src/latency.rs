//! The latency model: how long prefill and each decode step take.
//!
//! Pure arithmetic, so the model's ordering is tested without a clock. Prefill charges uncached
//! tokens fully and cached ones at a small fraction; a decode step grows with the batch size.
//! `time_scale` multiplies everything (0 makes the worker instant), and a fault's slow-down factor
//! multiplies on top.

use std::time::Duration;

/// Parameters of the simulated engine's timing.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyModel {
    /// Multiplies every delay; 0 means no delay at all.
    pub time_scale: f64,
    /// Uncached prompt tokens prefilled per second (prefill is serialized per worker).
    pub prefill_tokens_per_sec: f64,
    /// Cost of a cached prompt token relative to an uncached one (0..=1).
    pub cached_token_cost: f64,
    /// Time of one decode step (one token for every running request) with a batch of one.
    pub decode_step: Duration,
    /// Added to a decode step for each request decoding in the batch.
    pub decode_step_per_running: Duration,
}

impl Default for LatencyModel {
    fn default() -> Self {
        Self {
            time_scale: 1.0,
            prefill_tokens_per_sec: 10_000.0,
            cached_token_cost: 0.05,
            decode_step: Duration::from_millis(10),
            decode_step_per_running: Duration::from_micros(100),
        }
    }
}

impl LatencyModel {
    /// Prefill time of a prompt with `uncached` new tokens and `cached` tokens found in the cache.
    pub fn prefill(&self, uncached: u64, cached: u64, slowdown: f64) -> Duration {
        if self.time_scale == 0.0 || self.prefill_tokens_per_sec <= 0.0 {
            return Duration::ZERO;
        }
        let tokens = uncached as f64 + cached as f64 * self.cached_token_cost;
        seconds(tokens / self.prefill_tokens_per_sec * self.time_scale * slowdown)
    }

    /// Time of one decode step while `batch` requests decode together.
    pub fn decode_step(&self, batch: usize, slowdown: f64) -> Duration {
        if self.time_scale == 0.0 {
            return Duration::ZERO;
        }
        let base = self.decode_step.as_secs_f64()
            + self.decode_step_per_running.as_secs_f64() * batch as f64;
        seconds(base * self.time_scale * slowdown)
    }

    /// Whether every delay is zero, so the engine can skip its timing machinery.
    pub fn is_instant(&self) -> bool {
        self.time_scale == 0.0
    }
}

fn seconds(s: f64) -> Duration {
    Duration::try_from_secs_f64(s).unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_tokens_prefill_faster_than_uncached() {
        let m = LatencyModel::default();
        assert!(m.prefill(0, 1000, 1.0) < m.prefill(1000, 0, 1.0));
        assert!(m.prefill(100, 900, 1.0) < m.prefill(900, 100, 1.0));
        assert_eq!(m.prefill(1000, 0, 1.0), Duration::from_millis(100));
    }

    #[test]
    fn decode_steps_grow_with_the_batch() {
        let m = LatencyModel::default();
        assert!(m.decode_step(1, 1.0) < m.decode_step(64, 1.0));
    }

    #[test]
    fn time_scale_and_slowdown_multiply() {
        let m = LatencyModel {
            time_scale: 2.0,
            ..LatencyModel::default()
        };
        assert_eq!(m.prefill(1000, 0, 1.0), Duration::from_millis(200));
        assert_eq!(m.prefill(1000, 0, 3.0), Duration::from_millis(600));
        let instant = LatencyModel {
            time_scale: 0.0,
            ..LatencyModel::default()
        };
        assert_eq!(instant.prefill(1_000_000, 0, 10.0), Duration::ZERO);
        assert_eq!(instant.decode_step(100, 10.0), Duration::ZERO);
        assert_eq!(m.prefill(10, 0, f64::NAN), Duration::ZERO);
    }
}

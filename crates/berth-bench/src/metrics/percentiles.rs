//! Percentiles of a latency series from an HDR histogram.
//!
//! Values are recorded in microseconds with three significant digits, so a reported percentile
//! is within 0.1% of the exact order statistic; the mean, min and max are exact.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Summary statistics of one latency series, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    /// Number of samples.
    pub count: u64,
    /// Exact mean.
    pub mean: f64,
    /// Exact minimum.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Exact maximum.
    pub max: f64,
}

impl Percentiles {
    /// Statistics of `values_ms`; `None` when empty.
    pub fn of(values_ms: impl IntoIterator<Item = f64>) -> Option<Self> {
        // Bounds: 1 µs to one day; three significant digits.
        let mut hist = Histogram::<u64>::new_with_bounds(1, 86_400_000_000, 3).ok()?;
        let (mut count, mut sum, mut min, mut max) =
            (0u64, 0.0f64, f64::INFINITY, f64::NEG_INFINITY);
        for v in values_ms {
            let micros = (v * 1000.0).round().clamp(1.0, 86_400_000_000.0) as u64;
            hist.saturating_record(micros);
            count += 1;
            sum += v;
            min = min.min(v);
            max = max.max(v);
        }
        if count == 0 {
            return None;
        }
        let q = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
        Some(Self {
            count,
            mean: sum / count as f64,
            min,
            p50: q(0.50),
            p90: q(0.90),
            p99: q(0.99),
            max,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= b * 0.001 + 1e-9
    }

    #[test]
    fn one_to_a_hundred() {
        let p = Percentiles::of((1..=100).map(f64::from)).unwrap();
        assert_eq!(p.count, 100);
        assert!((p.mean - 50.5).abs() < 1e-9);
        assert!(close(p.p50, 50.0), "{p:?}");
        assert!(close(p.p90, 90.0), "{p:?}");
        assert!(close(p.p99, 99.0), "{p:?}");
        assert_eq!((p.min, p.max), (1.0, 100.0));
    }

    #[test]
    fn skewed_series_and_empty() {
        // 98 fast requests at 10 ms and 2 slow ones at 1000 ms: p50 and p90 are fast, p99 slow.
        let series = std::iter::repeat_n(10.0, 98).chain([1000.0, 1000.0]);
        let p = Percentiles::of(series).unwrap();
        assert!(close(p.p50, 10.0) && close(p.p90, 10.0), "{p:?}");
        assert!(close(p.p99, 1000.0), "{p:?}");
        assert!(close(p.mean, 29.8), "{p:?}");
        assert!(Percentiles::of(std::iter::empty()).is_none());
    }
}

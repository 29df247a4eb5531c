//! Which row of a set the demo recommends: the one that wins on both cached share and TTFT
//! tail.
//!
//! The rule: among the rows that served every request (all rows, if none did), take the best
//! cached share of prompt tokens; every row within [`CACHED_SHARE_TOLERANCE`] of it counts as
//! keeping the cache; of those, the row with the lowest TTFT p99 wins (ties: the earlier
//! row). A policy that caches a little better but makes the slowest requests wait longer does
//! not win, and neither does a fast one that throws the cache away.

use berth_bench::Summary;

/// A row keeps the cache when its cached share is at least this fraction of the best row's.
pub(super) const CACHED_SHARE_TOLERANCE: f64 = 0.97;

/// The recommended row and why.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Recommendation {
    /// Index of the row.
    pub(super) index: usize,
    /// The best cached share among the candidates.
    pub(super) best_cached: f64,
    /// The winner's TTFT p99, ms.
    pub(super) ttft_p99_ms: f64,
}

/// Applies the rule to `rows` (in table order); `None` when no row has both figures.
pub(super) fn recommend(rows: &[&Summary]) -> Option<Recommendation> {
    let measured: Vec<(usize, f64, f64, bool)> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Some((i, s.cached_ratio?, s.ttft_ms?.p99, s.failed == 0)))
        .collect();
    let clean: Vec<_> = measured.iter().copied().filter(|r| r.3).collect();
    let candidates = if clean.is_empty() { measured } else { clean };
    let best_cached = candidates.iter().map(|r| r.1).fold(f64::NAN, f64::max);
    candidates
        .iter()
        .filter(|r| r.1 >= best_cached * CACHED_SHARE_TOLERANCE)
        .min_by(|a, b| a.2.total_cmp(&b.2).then(a.0.cmp(&b.0)))
        .map(|r| Recommendation {
            index: r.0,
            best_cached,
            ttft_p99_ms: r.2,
        })
}

#[cfg(test)]
mod tests {
    use berth_bench::metrics::{Percentiles, RequestRecord};

    use super::*;

    /// A summary with the given cached share, TTFT p99 and failures.
    fn row(cached: Option<f64>, p99: Option<f64>, failed: u64) -> Summary {
        let mut s = Summary::from_records(&[RequestRecord::default()], None);
        s.cached_ratio = cached;
        s.ttft_ms = p99.map(|p| Percentiles {
            count: 1,
            mean: p,
            min: p,
            p50: p,
            p90: p,
            p99: p,
            max: p,
        });
        s.failed = failed;
        s
    }

    fn pick(rows: &[Summary]) -> Option<usize> {
        recommend(&rows.iter().collect::<Vec<_>>()).map(|r| r.index)
    }

    #[test]
    fn best_tail_among_rows_that_keep_the_cache() {
        let rows = [
            row(Some(0.30), Some(100.0), 0), // fast, cache thrown away
            row(Some(0.90), Some(900.0), 0), // best cache, slow tail
            row(Some(0.88), Some(400.0), 0), // within 97% of 0.90: wins
            row(Some(0.86), Some(200.0), 0), // 0.86 < 0.873: out
        ];
        let r = recommend(&rows.iter().collect::<Vec<_>>()).unwrap();
        assert_eq!(r.index, 2);
        assert_eq!((r.best_cached, r.ttft_p99_ms), (0.90, 400.0));
    }

    #[test]
    fn failing_rows_and_rows_without_figures_are_left_out() {
        let rows = [
            row(Some(0.95), Some(50.0), 3), // best on both but lost requests
            row(None, Some(10.0), 0),       // no cached share reported
            row(Some(0.80), None, 0),       // not streamed
            row(Some(0.70), Some(300.0), 0),
            row(Some(0.70), Some(300.0), 0), // tie: the earlier row
        ];
        assert_eq!(pick(&rows), Some(3));
        // When every row failed somewhere, the failures no longer disqualify.
        let all_failing = [row(Some(0.5), Some(9.0), 1), row(Some(0.9), Some(99.0), 1)];
        assert_eq!(pick(&all_failing), Some(1));
        assert_eq!(pick(&[row(None, None, 0)]), None);
        assert_eq!(pick(&[]), None);
    }
}

//! The console comparison table of one row set, and its recommendation line.

use std::fmt::Write;

use berth_bench::report::html::Section;

use super::fleet::WORKERS;
use super::recommend::{CACHED_SHARE_TOLERANCE, recommend};
use super::scenario::RowSet;

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{:.1}%", v * 100.0))
}

/// One row per scenario of `set` (`sections` in the same order); TTFT p50 also as a ratio to
/// the first (baseline) row; then the recommended row.
pub(super) fn render(set: &RowSet, sections: &[Section<'_>]) -> String {
    let mut out = String::new();
    let heading = if set.name.is_empty() {
        "berth demo".to_owned()
    } else {
        format!("berth demo, {} set", set.name)
    };
    let _ = writeln!(
        out,
        "\n{heading}: {WORKERS} simulated workers; {}\n",
        set.workload.description
    );
    // Trace rows also show the trace's ideal (one unbounded cache on the prompts as sent).
    let with_ideal = sections
        .iter()
        .any(|s| s.output.summary.ideal_cached_ratio.is_some());
    let ideal_cell = |v: String| {
        if with_ideal {
            format!(" {v:>7}")
        } else {
            String::new()
        }
    };
    let _ = writeln!(
        out,
        "{:<30} {:>5} {:>6} {:>7}{} {:>10} {:>10} {:>8} {:>12} {:>17} {:>7} {:>7}",
        "routing",
        "ok",
        "errors",
        "cached",
        ideal_cell("ideal".to_owned()),
        "TTFT p50",
        "TTFT p99",
        "vs first",
        "req max/mean",
        "uncached max/mean",
        "sticky",
        "workers"
    );
    let baseline = sections
        .first()
        .and_then(|s| s.output.summary.ttft_ms.map(|p| p.p50));
    for s in sections {
        let m = &s.output.summary;
        let p50 = m.ttft_ms.map(|p| p.p50);
        let ratio = match (p50, baseline) {
            (Some(v), Some(b)) if b > 0.0 => format!("{:.2}x", v / b),
            _ => "-".to_owned(),
        };
        let _ = writeln!(
            out,
            "{:<30} {:>5} {:>6} {:>7}{} {:>8}ms {:>8}ms {:>8} {:>12} {:>17} {:>7} {:>7}",
            s.label,
            m.ok,
            m.failed,
            pct(m.cached_ratio),
            ideal_cell(pct(m.ideal_cached_ratio)),
            opt(p50, 1),
            opt(m.ttft_ms.map(|p| p.p99), 1),
            ratio,
            opt(m.load_max_over_mean, 2),
            opt(m.uncached_max_over_mean, 2),
            pct(m.stickiness.ratio),
            format!("{}/{}", m.workers.len(), m.fleet_size)
        );
    }
    for skipped in &set.skipped {
        let _ = writeln!(
            out,
            "{:<30} (not run: this gateway has no --policy {})",
            skipped.label, skipped.policy
        );
    }
    let summaries: Vec<_> = sections.iter().map(|s| &s.output.summary).collect();
    match recommend(&summaries) {
        Some(r) => {
            let _ = writeln!(
                out,
                "\nrecommendation: {} (lowest TTFT p99, {:.1} ms, among the rows whose cached \
                 share is at least {:.0}% of the best, {})",
                sections[r.index].label,
                r.ttft_p99_ms,
                CACHED_SHARE_TOLERANCE * 100.0,
                pct(Some(r.best_cached))
            );
        }
        None => {
            let _ = writeln!(out, "\nrecommendation: none (no row reported both figures)");
        }
    }
    out
}

//! The console comparison table.

use std::fmt::Write;

use berth_bench::report::html::Section;

use super::fleet::WORKERS;
use super::scenario::Workload;

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{:.1}%", v * 100.0))
}

/// One row per scenario; TTFT p50 also as a ratio to the first (baseline) row.
pub(super) fn render(workload: &Workload, sections: &[Section<'_>]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nberth demo: {WORKERS} simulated workers (KV {} tokens each, time scale {}), {} agent sessions \
         with 2 sub-agents each, ~{} turns, seed {}\n",
        workload.kv_capacity_tokens,
        workload.time_scale,
        workload.sessions,
        workload.turns,
        workload.seed
    );
    let _ = writeln!(
        out,
        "{:<30} {:>6} {:>6} {:>8} {:>10} {:>10} {:>9} {:>8} {:>8} {:>8}",
        "routing",
        "ok",
        "errors",
        "cached",
        "TTFT p50",
        "TTFT p99",
        "vs first",
        "sticky",
        "workers",
        "max/mean"
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
            "{:<30} {:>6} {:>6} {:>8} {:>8}ms {:>8}ms {:>9} {:>8} {:>8} {:>8}",
            s.label,
            m.ok,
            m.failed,
            pct(m.cached_ratio),
            opt(p50, 1),
            opt(m.ttft_ms.map(|p| p.p99), 1),
            ratio,
            pct(m.stickiness.ratio),
            format!("{}/{}", m.workers.len(), m.fleet_size),
            opt(m.load_max_over_mean, 2)
        );
    }
    out
}

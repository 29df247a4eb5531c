//! The self-contained HTML report: inline CSS and SVG, no scripts, no network.

use std::fmt::Write;

use crate::metrics::Summary;
use crate::report::svg::{bars, escape, scatter};
use crate::run::RunOutput;

/// One run shown in the report.
#[derive(Debug, Clone, Copy)]
pub struct Section<'a> {
    /// Its heading (session-routing mode, or the demo's policy name).
    pub label: &'a str,
    /// The run.
    pub output: &'a RunOutput,
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{:.1}%", v * 100.0))
}

/// The comparison table rows for several runs (the demo's headline).
pub fn comparison_table(sections: &[Section<'_>]) -> String {
    let mut s = String::from(
        "<table><tr><th>run</th><th>requests ok</th><th>cached-token ratio</th><th>TTFT p50 (ms)</th>\
         <th>TTFT p99 (ms)</th><th>E2E p50 (ms)</th><th>stickiness</th><th>workers used</th><th>load max/mean</th><th>uncached tokens max/mean</th><th>errors</th></tr>",
    );
    for sec in sections {
        let m: &Summary = &sec.output.summary;
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}/{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(sec.label),
            m.ok,
            pct(m.cached_ratio),
            opt(m.ttft_ms.map(|p| p.p50), 1),
            opt(m.ttft_ms.map(|p| p.p99), 1),
            opt(m.e2e_ms.map(|p| p.p50), 1),
            pct(m.stickiness.ratio),
            m.workers.len(),
            m.fleet_size,
            opt(m.load_max_over_mean, 2),
            opt(m.uncached_max_over_mean, 2),
            m.failed
        );
    }
    s.push_str("</table>");
    s
}

/// The whole report for `sections`.
pub fn render(title: &str, sections: &[Section<'_>]) -> String {
    let mut s = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>\
         body{{font-family:sans-serif;margin:2em;color:#222}}table{{border-collapse:collapse;margin:1em 0}}\
         td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}th{{background:#f4f4f4}}\
         td:first-child,th:first-child{{text-align:left}}.charts{{display:flex;flex-wrap:wrap;gap:12px}}\
         </style></head><body><h1>{t}</h1>",
        t = escape(title)
    );
    s.push_str(&comparison_table(sections));
    for sec in sections {
        section(&mut s, sec);
    }
    s.push_str("</body></html>\n");
    s
}

fn section(s: &mut String, sec: &Section<'_>) {
    let out = sec.output;
    let m = &out.summary;
    let _ = write!(
        s,
        "<h2>{}</h2><p>{} {} ({}), session routing <code>{}</code>; {} requests, {} failed, {} sessions, {:.2} s.</p>",
        escape(sec.label),
        escape(&out.config.url),
        escape(out.config.endpoint.path()),
        if out.config.streaming {
            "streaming"
        } else {
            "not streaming"
        },
        escape(out.config.routing.name()),
        m.requests,
        m.failed,
        m.sessions,
        m.duration_s
    );
    s.push_str("<table><tr><th>latency (ms)</th><th>mean</th><th>p50</th><th>p90</th><th>p99</th><th>max</th></tr>");
    for (name, p) in [
        ("time to first token", m.ttft_ms),
        ("inter-token latency", m.itl_ms),
        ("end-to-end", m.e2e_ms),
    ] {
        let _ = write!(
            s,
            "<tr><td>{name}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            opt(p.map(|p| p.mean), 2),
            opt(p.map(|p| p.p50), 2),
            opt(p.map(|p| p.p90), 2),
            opt(p.map(|p| p.p99), 2),
            opt(p.map(|p| p.max), 2)
        );
    }
    s.push_str("</table>");
    let _ = write!(
        s,
        "<p>requests/s {:.1}, output tokens/s {:.1}, cached-token ratio {}{}, stickiness {}, load max/mean {}, \
         uncached prompt tokens max/mean {} (over {} workers)</p>",
        m.request_throughput,
        m.output_token_throughput,
        pct(m.cached_ratio),
        m.ideal_cached_ratio
            .map(|i| format!(" (trace ideal {})", pct(Some(i))))
            .unwrap_or_default(),
        pct(m.stickiness.ratio),
        opt(m.load_max_over_mean, 2),
        opt(m.uncached_max_over_mean, 2),
        m.fleet_size
    );
    if !m.errors.is_empty() {
        s.push_str("<table><tr><th>error</th><th>count</th></tr>");
        for (e, n) in &m.errors {
            let _ = write!(s, "<tr><td>{}</td><td>{n}</td></tr>", escape(e));
        }
        s.push_str("</table>");
    }
    s.push_str("<div class=\"charts\">");
    s.push_str(&latency_histogram(out));
    let turns: Vec<String> = m.by_turn.iter().map(|t| t.turn_index.to_string()).collect();
    let ratios: Vec<f64> = m
        .by_turn
        .iter()
        .map(|t| t.cached_ratio.unwrap_or(0.0) * 100.0)
        .collect();
    s.push_str(&bars(
        "cached-token ratio by turn index (%)",
        &turns,
        &ratios,
        &|v| format!("{v:.0}"),
    ));
    let (names, counts, uncached) = worker_bars(m);
    s.push_str(&bars("requests per worker", &names, &counts, &|v| {
        format!("{v:.0}")
    }));
    s.push_str(&bars(
        "uncached prompt tokens per worker (prefill work)",
        &names,
        &uncached,
        &|v| format!("{v:.0}"),
    ));
    s.push_str(&latency_over_time(out));
    s.push_str("</div>");
}

/// The per-worker bars: one per worker that served something, then, when `--expected-workers`
/// says the fleet is larger, a zero bar for each worker that served nothing (the bench never
/// learns their names: `idle 1`, `idle 2`, ...), so a starved worker shows as an empty bar
/// instead of vanishing from the chart.
fn worker_bars(m: &Summary) -> (Vec<String>, Vec<f64>, Vec<f64>) {
    let mut names: Vec<String> = m.workers.keys().map(|w| short_worker(w)).collect();
    let mut counts: Vec<f64> = m.workers.values().map(|n| *n as f64).collect();
    let mut uncached: Vec<f64> = m
        .workers
        .keys()
        .map(|w| m.uncached_tokens_per_worker.get(w).copied().unwrap_or(0) as f64)
        .collect();
    let seen = m.workers.len() as u64;
    for i in 1..=m.fleet_size.saturating_sub(seen) {
        names.push(format!("idle {i}"));
        counts.push(0.0);
        uncached.push(0.0);
    }
    (names, counts, uncached)
}

/// `http://127.0.0.1:41234` -> `:41234`, so worker labels fit under a bar.
fn short_worker(w: &str) -> String {
    w.rsplit_once(':')
        .map_or_else(|| w.to_owned(), |(_, port)| format!(":{port}"))
}

fn latency_histogram(out: &RunOutput) -> String {
    let ok = out.records.iter().filter(|r| r.ok && !r.warmup);
    let (name, values): (&str, Vec<f64>) = if out.summary.ttft_ms.is_some() {
        (
            "time to first token distribution (ms)",
            ok.filter_map(|r| r.ttft_ms).collect(),
        )
    } else {
        (
            "end-to-end latency distribution (ms; not streamed)",
            ok.map(|r| r.e2e_ms).collect(),
        )
    };
    let max = values.iter().copied().fold(0.0, f64::max);
    let bins = 30usize;
    let width = if max > 0.0 { max / bins as f64 } else { 1.0 };
    let mut counts = vec![0.0; bins];
    for v in &values {
        let i = ((v / width) as usize).min(bins - 1);
        counts[i] += 1.0;
    }
    let labels: Vec<String> = (0..bins)
        .map(|i| format!("{:.0}", i as f64 * width))
        .collect();
    bars(name, &labels, &counts, &|v| format!("{v:.0}"))
}

fn latency_over_time(out: &RunOutput) -> String {
    let ok: Vec<_> = out.records.iter().filter(|r| r.ok && !r.warmup).collect();
    let step = ok.len().div_ceil(2000).max(1);
    let use_ttft = out.summary.ttft_ms.is_some();
    let points: Vec<(f64, f64)> = ok
        .iter()
        .step_by(step)
        .map(|r| {
            (
                r.start_ms / 1000.0,
                if use_ttft {
                    r.ttft_ms.unwrap_or(r.e2e_ms)
                } else {
                    r.e2e_ms
                },
            )
        })
        .collect();
    let y = if use_ttft { "TTFT (ms)" } else { "E2E (ms)" };
    scatter("latency over time", &points, "seconds since start", y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::RequestRecord;

    fn served_by(worker: &str) -> RequestRecord {
        RequestRecord {
            session_id: "s".into(),
            root_id: "s".into(),
            ok: true,
            status: Some(200),
            e2e_ms: 1.0,
            prompt_tokens: Some(10),
            cached_tokens: Some(4),
            routed_worker: Some(worker.into()),
            ..Default::default()
        }
    }

    #[test]
    fn workers_that_served_nothing_show_as_zero_bars_when_the_fleet_size_is_known() {
        let records = vec![
            served_by("http://127.0.0.1:4001"),
            served_by("http://127.0.0.1:4001"),
        ];
        let (names, counts, uncached) = worker_bars(&Summary::from_records(&records, Some(3)));
        assert_eq!(names, [":4001", "idle 1", "idle 2"]);
        assert_eq!(counts, [2.0, 0.0, 0.0]);
        assert_eq!(uncached, [12.0, 0.0, 0.0]);
        let (names, _, _) = worker_bars(&Summary::from_records(&records, None));
        assert_eq!(
            names,
            [":4001"],
            "without --expected-workers only the workers seen"
        );
    }
}

//! The console summary table.

use std::fmt::Write;

use crate::metrics::{Percentiles, Summary};
use crate::run::RunOutput;

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{:.1}%", v * 100.0))
}

fn latency_row(out: &mut String, name: &str, p: Option<&Percentiles>) {
    let cell = |f: fn(&Percentiles) -> f64| fmt_opt(p.map(f), 2);
    let _ = writeln!(
        out,
        "  {name:<26} {:>10} {:>10} {:>10} {:>10} {:>10}",
        cell(|p| p.mean),
        cell(|p| p.p50),
        cell(|p| p.p90),
        cell(|p| p.p99),
        cell(|p| p.max)
    );
}

/// The summary of one run as a text table.
pub fn render(output: &RunOutput) -> String {
    let s = &output.summary;
    let c = &output.config;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "berth bench: {} {} ({}), session routing {}{}",
        c.url,
        c.endpoint.path(),
        if c.streaming {
            "streaming"
        } else {
            "not streaming"
        },
        c.routing.name(),
        if output.interrupted {
            " (interrupted)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "  requests {} ok {} failed {} (warm-up excluded: {}), sessions {}, roots started {}, \
         peak live sessions {}, {:.2}s",
        s.requests,
        s.ok,
        s.failed,
        s.warmup,
        s.sessions,
        output.roots_started,
        output.peak_live_sessions,
        s.duration_s
    );
    let _ = writeln!(
        out,
        "  {:<26} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "latency (ms)", "mean", "p50", "p90", "p99", "max"
    );
    latency_row(&mut out, "time to first token", s.ttft_ms.as_ref());
    latency_row(&mut out, "inter-token latency", s.itl_ms.as_ref());
    latency_row(&mut out, "end-to-end latency", s.e2e_ms.as_ref());
    let _ = writeln!(out, "  {:<26} {:>10.1}", "requests/s", s.request_throughput);
    let _ = writeln!(
        out,
        "  {:<26} {:>10.1}",
        "output tokens/s", s.output_token_throughput
    );
    let _ = writeln!(
        out,
        "  {:<26} {:>10} ({} of {} prompt tokens)",
        "cached-token ratio",
        pct(s.cached_ratio),
        s.cached_tokens,
        s.prompt_tokens
    );
    if let Some(ideal) = s.ideal_cached_ratio {
        let _ = writeln!(
            out,
            "  {:<26} {:>10} (one unbounded cache on the prompts as sent; cached / ideal {})",
            "ideal cached ratio",
            pct(Some(ideal)),
            fmt_opt(s.cached_ratio.filter(|_| ideal > 0.0).map(|c| c / ideal), 2)
        );
    }
    let _ = writeln!(
        out,
        "  {:<26} {:>10} ({} of {} later turns)",
        "stickiness",
        pct(s.stickiness.ratio),
        s.stickiness.same,
        s.stickiness.eligible
    );
    let _ = writeln!(
        out,
        "  {:<26} {:>10} (requests per worker, over {} workers)",
        "load max/mean",
        fmt_opt(s.load_max_over_mean, 2),
        s.fleet_size
    );
    let _ = writeln!(
        out,
        "  {:<26} {:>10} (uncached prompt tokens per worker: prefill work)",
        "uncached max/mean",
        fmt_opt(s.uncached_max_over_mean, 2)
    );
    if let Some(r) = &output.replay {
        let _ = writeln!(
            out,
            "  {:<26} {} sessions; peak open sessions {}, peak buffered rows {}; block texts {} \
             (at most {}); ideal cache {} blocks",
            "trace replay",
            r.sessions_started,
            r.peak_open_sessions,
            r.peak_buffered_rows,
            r.block_cache_entries,
            r.block_cache_capacity,
            r.ideal_blocks
        );
    }
    render_turns(&mut out, s);
    for (worker, n) in &s.workers {
        let uncached = s
            .uncached_tokens_per_worker
            .get(worker)
            .copied()
            .unwrap_or(0);
        let _ = writeln!(
            out,
            "  worker {worker:<40} {n:>8} requests {uncached:>10} uncached tokens"
        );
    }
    for (err, n) in &s.errors {
        let _ = writeln!(out, "  error  {err:<40} {n:>8}");
    }
    out
}

fn render_turns(out: &mut String, s: &Summary) {
    if s.by_turn.len() <= 1 {
        return;
    }
    let _ = writeln!(
        out,
        "  {:<10} {:>10} {:>14} {:>12}",
        "turn", "requests", "prompt tokens", "cached"
    );
    for t in s.by_turn.iter().take(20) {
        let _ = writeln!(
            out,
            "  {:<10} {:>10} {:>14} {:>12}",
            t.turn_index,
            t.requests,
            fmt_opt(t.mean_prompt_tokens, 1),
            pct(t.cached_ratio)
        );
    }
}

//! `--artifact-dir` outputs.

use std::io::Write;
use std::path::Path;

use serde_json::json;

use crate::error::BenchError;
use crate::metrics::Summary;
use crate::report::html::{Section, render};
use crate::run::RunOutput;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BenchError + '_ {
    move |source| BenchError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Writes `summary.json`, `summary.csv`, `records.jsonl` and `report.html` into `dir`.
pub fn write_all(dir: &Path, output: &RunOutput) -> Result<(), BenchError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let summary = json!({
        "config": output.config,
        "wall_s": output.wall_s,
        "roots_started": output.roots_started,
        "peak_live_sessions": output.peak_live_sessions,
        "interrupted": output.interrupted,
        "summary": output.summary,
        "replay": output.replay,
    });
    let text = serde_json::to_string_pretty(&summary).map_err(|source| BenchError::Json {
        what: "summary",
        source,
    })?;
    write(&dir.join("summary.json"), text.as_bytes())?;
    write(
        &dir.join("summary.csv"),
        csv(&[("run", &output.summary)]).as_bytes(),
    )?;
    write_records(&dir.join("records.jsonl"), output)?;
    let html = render(
        "berth bench",
        &[Section {
            label: output.config.routing.name(),
            output,
        }],
    );
    write(&dir.join("report.html"), html.as_bytes())
}

/// Writes `bytes` to `path`.
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), BenchError> {
    std::fs::write(path, bytes).map_err(io(path))
}

fn write_records(path: &Path, output: &RunOutput) -> Result<(), BenchError> {
    let file = std::fs::File::create(path).map_err(io(path))?;
    let mut w = std::io::BufWriter::new(file);
    for r in &output.records {
        serde_json::to_writer(&mut w, r).map_err(|source| BenchError::Json {
            what: "record",
            source,
        })?;
        w.write_all(b"\n").map_err(io(path))?;
    }
    w.flush().map_err(io(path))
}

/// One `metric,value` table per run label: `label,metric,value` rows.
pub fn csv(runs: &[(&str, &Summary)]) -> String {
    let mut out = String::from("run,metric,value\n");
    for (label, s) in runs {
        let mut row =
            |metric: &str, value: String| out.push_str(&format!("{label},{metric},{value}\n"));
        let opt = |v: Option<f64>| v.map(|v| format!("{v:.6}")).unwrap_or_default();
        row("requests", s.requests.to_string());
        row("ok", s.ok.to_string());
        row("failed", s.failed.to_string());
        row("duration_s", format!("{:.6}", s.duration_s));
        row("request_throughput", format!("{:.6}", s.request_throughput));
        row(
            "output_token_throughput",
            format!("{:.6}", s.output_token_throughput),
        );
        for (name, p) in [
            ("ttft_ms", &s.ttft_ms),
            ("itl_ms", &s.itl_ms),
            ("e2e_ms", &s.e2e_ms),
        ] {
            row(&format!("{name}_mean"), opt(p.map(|p| p.mean)));
            row(&format!("{name}_p50"), opt(p.map(|p| p.p50)));
            row(&format!("{name}_p90"), opt(p.map(|p| p.p90)));
            row(&format!("{name}_p99"), opt(p.map(|p| p.p99)));
        }
        row("prompt_tokens", s.prompt_tokens.to_string());
        row("cached_tokens", s.cached_tokens.to_string());
        row("cached_ratio", opt(s.cached_ratio));
        row("ideal_cached_ratio", opt(s.ideal_cached_ratio));
        row("stickiness", opt(s.stickiness.ratio));
        row("fleet_size", s.fleet_size.to_string());
        row("load_max_over_mean", opt(s.load_max_over_mean));
        row("uncached_max_over_mean", opt(s.uncached_max_over_mean));
        for (w, n) in &s.workers {
            row(
                &format!("requests_worker[{}]", w.replace(',', ";")),
                n.to_string(),
            );
        }
        for (w, n) in &s.uncached_tokens_per_worker {
            row(
                &format!("uncached_tokens_worker[{}]", w.replace(',', ";")),
                n.to_string(),
            );
        }
        for (e, n) in &s.errors {
            row(&format!("errors[{}]", e.replace(',', ";")), n.to_string());
        }
    }
    out
}

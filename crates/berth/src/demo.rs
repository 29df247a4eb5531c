//! `berth demo`: what session routing is worth, on this machine, in two or three minutes.
//!
//! Layout:
//! - this file: the flags and [`run`], which runs every row set and reports;
//! - `demo/scenario.rs`: the routing set-ups compared, grouped into row sets;
//! - `demo/workload.rs`: each set's workload and fleet (the original one, the agentic one
//!   under KV pressure of issue #8, and the replay of a committed agentic coding trace of
//!   issue #16, `crates/berth/data/`);
//! - `demo/fleet.rs`: four simulated workers and a gateway, started in-process per scenario;
//! - `demo/table.rs`: the console comparison table, with ratios against the first scenario;
//! - `demo/recommend.rs`: the rule that names the row winning on both cached share and TTFT p99.
//!
//! Every scenario gets a fresh fleet (empty KV caches, no pins) and its set's seeded workload
//! (same text, same session ids, same arrival times), so the only difference between the rows
//! of a set is the routing. The workers' KV capacity is small enough that scattering sessions
//! across workers evicts their prefixes, and the latency model charges uncached prompt tokens,
//! so the difference shows up as cached-token ratio, time to first token and how the prefill
//! work is spread.

mod fleet;
mod recommend;
mod scenario;
mod table;
mod workload;

use std::path::PathBuf;

use anyhow::Context;
use berth_bench::RunOutput;
use berth_bench::report::files::{csv, write};
use berth_bench::report::html::{Section, render};

use self::scenario::row_sets;

/// Flags of `berth demo`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Args {
    /// Root sessions per scenario of the original rows (each an agent with two sub-agents; 0:
    /// skip that set).
    #[arg(long, default_value_t = 48)]
    pub(crate) sessions: u64,
    /// Root sessions per scenario of the agentic rows (0: skip that set).
    #[arg(long, default_value_t = 60)]
    pub(crate) agentic_sessions: u64,
    /// Sessions of the committed agentic trace replayed per scenario of the trace rows (its
    /// first N; 0: skip that set).
    #[arg(long, default_value_t = 16)]
    pub(crate) trace_sessions: u64,
    /// --replay-speedup of the trace rows (the trace's think times divided by this).
    #[arg(long, default_value_t = 50.0)]
    pub(crate) trace_speedup: f64,
    /// KV cache capacity of each simulated worker of the trace rows, in tokens.
    #[arg(long, default_value_t = 16_384)]
    pub(crate) trace_kv_capacity_tokens: u64,
    /// Seed of the workloads (same for every scenario).
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Multiplies the simulated workers' delays (smaller is faster).
    #[arg(long, default_value_t = 0.2)]
    pub(crate) time_scale: f64,
    /// KV cache capacity of each simulated worker of the original rows, in tokens (small
    /// enough to force eviction).
    #[arg(long, default_value_t = 8_192)]
    pub(crate) kv_capacity_tokens: u64,
    /// KV cache capacity of each simulated worker of the agentic rows, in tokens (less than
    /// the live context of the agentic workload).
    #[arg(long, default_value_t = 6_144)]
    pub(crate) agentic_kv_capacity_tokens: u64,
    /// Where report.html, summary.csv and summary.json go.
    #[arg(long, default_value = "target/berth-demo")]
    pub(crate) artifact_dir: PathBuf,
    /// Tiny workloads (a few seconds; used by the tests).
    #[arg(long)]
    pub(crate) quick: bool,
}

/// Runs every row set, prints the comparisons and writes the report.
pub(crate) async fn run(args: Args) -> anyhow::Result<()> {
    run_and_report(args).await.map(drop)
}

/// [`run`], returning the comparison tables it printed (one per row set).
async fn run_and_report(args: Args) -> anyhow::Result<Vec<String>> {
    std::fs::create_dir_all(&args.artifact_dir)
        .with_context(|| format!("creating {}", args.artifact_dir.display()))?;
    // The trace rows replay the committed trace from a file, as `berth bench` would.
    write(&workload::trace_path(&args), workload::TRACE.as_bytes())?;
    let sets = row_sets(&args);
    let mut tables = Vec::with_capacity(sets.len());
    // (report label, output) of every row, set after set.
    let mut rows: Vec<(String, RunOutput)> = Vec::new();
    for set in &sets {
        let mut outputs = Vec::with_capacity(set.scenarios.len());
        for scenario in &set.scenarios {
            let key = set.key(scenario);
            eprintln!("berth demo: running {key} ...");
            let output = scenario::run(scenario, &set.workload)
                .await
                .with_context(|| format!("scenario {key}"))?;
            outputs.push(output);
        }
        let sections: Vec<Section<'_>> = set
            .scenarios
            .iter()
            .zip(&outputs)
            .map(|(s, output)| Section {
                label: s.label,
                output,
            })
            .collect();
        let table = table::render(set, &sections);
        println!("{table}");
        tables.push(table);
        rows.extend(set.scenarios.iter().map(|s| set.key(s)).zip(outputs));
    }
    let sections: Vec<Section<'_>> = rows
        .iter()
        .map(|(label, output)| Section { label, output })
        .collect();

    let dir = &args.artifact_dir;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    write(
        &dir.join("report.html"),
        render("berth demo: routing policies compared", &sections).as_bytes(),
    )?;
    let runs: Vec<(&str, &berth_bench::Summary)> = sections
        .iter()
        .map(|s| (s.label, &s.output.summary))
        .collect();
    write(&dir.join("summary.csv"), csv(&runs).as_bytes())?;
    let json: serde_json::Map<String, serde_json::Value> = sections
        .iter()
        .map(|s| Ok((s.label.to_owned(), serde_json::to_value(&s.output.summary)?)))
        .collect::<Result<_, serde_json::Error>>()?;
    write(
        &dir.join("summary.json"),
        serde_json::to_string_pretty(&json)?.as_bytes(),
    )?;
    println!("report: {}", dir.join("report.html").display());
    Ok(tables)
}

#[cfg(test)]
mod tests;

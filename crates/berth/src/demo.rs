//! `berth demo`: what session routing is worth, on this machine, in about a minute.
//!
//! Layout:
//! - this file: the flags and [`run`], which runs every scenario and reports;
//! - `demo/scenario.rs`: the routing set-ups compared and the one workload they all run;
//! - `demo/fleet.rs`: four simulated workers and a gateway, started in-process per scenario;
//! - `demo/table.rs`: the console comparison table, with ratios against the first scenario.
//!
//! Every scenario gets a fresh fleet (empty KV caches, no pins) and the same seeded workload
//! (same text, same session ids), so the only difference between rows is the routing. The
//! workers' KV capacity is small enough that scattering sessions across workers evicts their
//! prefixes, and the latency model charges uncached prompt tokens, so the difference shows up as
//! cached-token ratio and time to first token.

mod fleet;
mod scenario;
mod table;

use std::path::PathBuf;

use anyhow::Context;
use berth_bench::report::files::{csv, write};
use berth_bench::report::html::{Section, render};

use self::scenario::{SCENARIOS, Workload};

/// Flags of `berth demo`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Args {
    /// Root sessions per scenario (each an agent with two sub-agents).
    #[arg(long, default_value_t = 48)]
    pub(crate) sessions: u64,
    /// Seed of the workload (same for every scenario).
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Multiplies the simulated workers' delays (smaller is faster).
    #[arg(long, default_value_t = 0.2)]
    pub(crate) time_scale: f64,
    /// KV cache capacity of each simulated worker, in tokens (small enough to force eviction).
    #[arg(long, default_value_t = 8_192)]
    pub(crate) kv_capacity_tokens: u64,
    /// Where report.html, summary.csv and summary.json go.
    #[arg(long, default_value = "target/berth-demo")]
    pub(crate) artifact_dir: PathBuf,
    /// A tiny workload (a few seconds; used by the tests).
    #[arg(long)]
    pub(crate) quick: bool,
}

/// Runs every scenario, prints the comparison and writes the report.
pub(crate) async fn run(args: Args) -> anyhow::Result<()> {
    let workload = Workload::from_args(&args);
    let mut outputs = Vec::with_capacity(SCENARIOS.len());
    for scenario in SCENARIOS {
        eprintln!("berth demo: running {} ...", scenario.label);
        let output = scenario::run(&scenario, &workload)
            .await
            .with_context(|| format!("scenario {}", scenario.label))?;
        outputs.push(output);
    }
    let sections: Vec<Section<'_>> = SCENARIOS
        .iter()
        .zip(&outputs)
        .map(|(s, output)| Section {
            label: s.label,
            output,
        })
        .collect();
    println!("{}", table::render(&workload, &sections));

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
    Ok(())
}

#[cfg(test)]
mod tests;

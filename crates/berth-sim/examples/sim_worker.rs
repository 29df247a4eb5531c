//! `berth sim-worker` without the rest of the `berth` binary: same flags, same entry point.
//! Handy for benchmarking and for checking the worker against a real gateway.

use clap::Parser;

/// Runs one simulated worker.
#[derive(Parser, Debug)]
struct Cli {
    #[command(flatten)]
    args: berth_sim::cli::Args,
}

#[tokio::main]
async fn main() -> Result<(), berth_sim::SimError> {
    berth_sim::cli::run(Cli::parse().args).await
}

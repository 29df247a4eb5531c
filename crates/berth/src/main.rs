//! `berth`: one thin binary. `main` parses the command line, sets up logging and the runtime,
//! and hands over to the crate that owns the subcommand.

mod demo;

use clap::{Parser, Subcommand};

/// berth: a session-affinity gateway for LLM inference.
#[derive(Parser, Debug)]
#[command(name = "berth", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start-up and consumed at once: boxing the larger variants would save nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Command {
    /// Run the gateway in front of inference workers.
    Serve(berth_gateway::cli::Args),
    /// Run a simulated inference worker (OpenAI/SGLang compatible, with a KV prefix cache).
    SimWorker(berth_sim::cli::Args),
    /// Drive multi-turn sessions and agent trees against a gateway or worker and report.
    Bench(berth_bench::cli::Args),
    /// Start simulated workers and a gateway in-process and compare routing policies.
    Demo(demo::Args),
}

fn init_logging(level: &str, json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match cli.command {
        Command::Serve(args) => {
            // `--config` may set the log flags too, so resolve it before logging starts.
            let args = args.resolve()?;
            init_logging(&args.log_filter(), args.log_json);
            runtime.block_on(berth_gateway::cli::run(args))?;
        }
        Command::SimWorker(args) => {
            init_logging("info", false);
            runtime.block_on(berth_sim::cli::run(args))?;
        }
        Command::Bench(args) => {
            init_logging("warn", false);
            runtime.block_on(berth_bench::cli::run(args))?;
        }
        Command::Demo(args) => {
            init_logging("warn", false);
            runtime.block_on(demo::run(args))?;
        }
    }
    Ok(())
}

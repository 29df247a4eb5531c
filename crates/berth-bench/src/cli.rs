//! `berth bench`: flags and entry point.
//!
//! Flag names follow aiperf where aiperf has one, so a command line moves between the two tools.

use std::path::PathBuf;

use clap::Parser;

use crate::config::{BenchConfig, ExportLevel};
use crate::error::BenchError;
use crate::run::arrivals::ArrivalPattern;
use crate::trace::TraceFormat;
use crate::workload::{AgentContext, EndpointType};

/// Flags of `berth bench`.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Base URL of the gateway or worker (`http://host:port`).
    #[arg(long, default_value = "http://127.0.0.1:8000")]
    pub url: String,
    /// Model name sent in the body (chat and completions).
    #[arg(long, default_value = "sim-model")]
    pub model: String,
    /// Which API to drive.
    #[arg(long, value_enum, default_value = "chat")]
    pub endpoint_type: EndpointType,
    /// Stream responses (server-sent events); needed for time to first token.
    #[arg(long)]
    pub streaming: bool,
    /// Root sessions to run (each with its agent tree). Default 100, or unbounded when
    /// --benchmark-duration is set. With --input-file: the first N sessions of the trace
    /// (default: all; never cycles).
    #[arg(long)]
    pub num_sessions: Option<u64>,
    /// Mean turns per session.
    #[arg(long, default_value_t = 4.0)]
    pub session_turns_mean: f64,
    /// Standard deviation of turns per session.
    #[arg(long, default_value_t = 0.0)]
    pub session_turns_stddev: f64,
    /// Mean delay before each turn after the first (ms).
    #[arg(long, default_value_t = 0.0)]
    pub session_turn_delay_mean: f64,
    /// Standard deviation of the turn delay (ms).
    #[arg(long, default_value_t = 0.0)]
    pub session_turn_delay_stddev: f64,
    /// Live root sessions at once (a root's agent tree runs inside its slot).
    #[arg(long, default_value_t = 10)]
    pub concurrency: u64,
    /// Root session starts per second (default: as fast as --concurrency allows).
    #[arg(long)]
    pub request_rate: Option<f64>,
    /// How root starts are spread under --request-rate: constant (exactly 1/rate apart) or
    /// poisson (exponential gaps, seeded).
    #[arg(long, value_enum, default_value = "constant")]
    pub arrival_pattern: ArrivalPattern,
    /// Words (about one token each) of each shared system prompt.
    #[arg(long, default_value_t = 0)]
    pub shared_system_prompt_length: u64,
    /// Distinct shared system prompts; each root session draws one (seeded) and its agent tree
    /// inherits it.
    #[arg(long, default_value_t = 1)]
    pub num_system_prompts: u32,
    /// Mean words of each turn's new user message.
    #[arg(long, default_value_t = 64.0)]
    pub synthetic_input_tokens_mean: f64,
    /// Standard deviation of that.
    #[arg(long, default_value_t = 0.0)]
    pub synthetic_input_tokens_stddev: f64,
    /// Mean output tokens requested per turn.
    #[arg(long, default_value_t = 32.0)]
    pub output_tokens_mean: f64,
    /// Standard deviation of that.
    #[arg(long, default_value_t = 0.0)]
    pub output_tokens_stddev: f64,
    /// Children each agent session spawns after its first turn (0: plain sessions).
    #[arg(long, default_value_t = 0)]
    pub agent_fanout: u32,
    /// Depth of agent trees (0: plain sessions).
    #[arg(long, default_value_t = 0)]
    pub agent_depth: u32,
    /// How a sub-agent's first prompt starts: fresh (system prompt, then its task) or parent
    /// (the parent's conversation so far, then its task).
    #[arg(long, value_enum, default_value = "fresh")]
    pub agent_context: AgentContext,
    /// Seed for the workload and the session ids (default: random).
    #[arg(long)]
    pub random_seed: Option<u64>,
    /// Stop starting turns after this many seconds; requests in flight finish.
    #[arg(long)]
    pub benchmark_duration: Option<f64>,
    /// Leading requests excluded from every figure.
    #[arg(long, default_value_t = 0)]
    pub warmup_requests: u64,
    /// Per-request timeout in seconds.
    #[arg(long, default_value_t = 600.0)]
    pub request_timeout_seconds: f64,
    /// Retries of a turn after a transport error, 429 or 5xx (same routing identity, `_r<k>`
    /// on the rid).
    #[arg(long, default_value_t = 0)]
    pub max_retries: u32,
    /// Workers behind the gateway, so workers that served nothing count in load max/mean.
    #[arg(long)]
    pub expected_workers: Option<u64>,
    /// How requests tell the router their session: dynamo_headers, dynamo_nvext,
    /// smg_routing_key, session_id_header, identity_headers, prompt_cache_key, conversation,
    /// codex_session_header, claude_code_header, claude_code_metadata, rid or none.
    #[arg(long, default_value = "none")]
    pub session_routing: String,
    /// An option of the session-routing mode, `key=value` (repeatable).
    #[arg(long = "session-routing-opt")]
    pub session_routing_opt: Vec<String>,
    /// Extra body fields, `key:value` (value parsed as JSON when it is JSON) or a JSON object
    /// (repeatable; merged into every body before the session-routing mode is applied).
    #[arg(long)]
    pub extra_inputs: Vec<String>,
    /// Write summary.json, summary.csv, records.jsonl and report.html here.
    #[arg(long)]
    pub artifact_dir: Option<PathBuf>,
    /// What records.jsonl holds: records, or raw (adding the exact headers and body sent).
    #[arg(long, value_enum)]
    pub export_level: Option<ExportLevel>,
    /// No progress output.
    #[arg(long)]
    pub quiet: bool,
    /// Replay this trace file (JSON lines) instead of the synthetic workload; needs
    /// --custom-dataset-type.
    #[arg(long)]
    pub input_file: Option<PathBuf>,
    /// Format of --input-file: mooncake_trace or bailian_trace.
    #[arg(long, value_enum)]
    pub custom_dataset_type: Option<TraceFormat>,
    /// Send each trace row at its recorded timestamp (from the first one), not under
    /// --concurrency.
    #[arg(long)]
    pub fixed_schedule: bool,
    /// Divide recorded timestamps and delays by this (10 = ten times faster).
    #[arg(long)]
    pub replay_speedup: Option<f64>,
    /// Ignore recorded delays between a session's turns (send them back to back).
    #[arg(long)]
    pub ignore_trace_delays: bool,
    /// Tokens per trace hash id (default 512 for mooncake_trace, 16 for bailian_trace); a
    /// smaller size than the trace's scales every prompt down keeping its block sharing.
    #[arg(long, visible_aliases = ["synthetic-input-tokens-block-size", "isl-block-size"])]
    pub prompt_input_tokens_block_size: Option<u32>,
    /// Cap of max_tokens for trace rows (their output_length otherwise).
    #[arg(long)]
    pub trace_max_output_tokens: Option<u64>,
    /// Keep each trace session with this probability (seeded by --random-seed; whole
    /// sessions).
    #[arg(long)]
    pub trace_session_sample: Option<f64>,
    /// Exit 0 even when some requests failed (by default any failed measured request makes
    /// the run exit non-zero, after the report).
    #[arg(long)]
    pub allow_failed_requests: bool,
}

#[derive(Parser, Debug)]
#[command(name = "berth-bench")]
struct Standalone {
    #[command(flatten)]
    args: Args,
}

impl Args {
    /// Parses flags as on the command line (without the program name): for tests and the demo.
    pub fn from_flags<I, S>(flags: I) -> Result<Self, BenchError>
    where
        I: IntoIterator<Item = S>,
        S: Into<std::ffi::OsString> + Clone,
    {
        let argv = std::iter::once(std::ffi::OsString::from("berth-bench"))
            .chain(flags.into_iter().map(Into::into));
        Standalone::try_parse_from(argv)
            .map(|s| s.args)
            .map_err(|e| BenchError::config("flags", e.to_string()))
    }
}

/// Runs `berth bench`: validates every flag, runs the workload, prints the summary and writes
/// the artifacts. Ctrl-C stops starting turns and reports what was measured.
pub async fn run(args: Args) -> Result<(), BenchError> {
    let config = BenchConfig::try_from_args(&args)?;
    let shutdown = async {
        // If the signal handler cannot be installed, never stop early.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let output = crate::run::execute(config, shutdown).await?;
    println!("{}", crate::report::console::render(&output));
    if let Some(dir) = &output.config.artifact_dir {
        crate::report::files::write_all(dir, &output)?;
        println!("artifacts written to {}", dir.display());
    }
    let first_failure = || {
        output
            .records
            .iter()
            .find(|r| !r.ok && !r.warmup)
            .map(|r| {
                format!(
                    "{} {}",
                    r.status
                        .map_or_else(|| "transport".to_owned(), |s| s.to_string()),
                    r.error_message.as_deref().unwrap_or("")
                )
            })
            .unwrap_or_default()
    };
    if output.summary.ok == 0 && output.summary.requests > 0 {
        return Err(BenchError::NothingSucceeded {
            failed: output.summary.failed as usize,
            first: first_failure(),
        });
    }
    if output.summary.failed > 0 && !args.allow_failed_requests {
        return Err(BenchError::RequestsFailed {
            failed: output.summary.failed,
            requests: output.summary.requests,
            first: first_failure(),
        });
    }
    Ok(())
}

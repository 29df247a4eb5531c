//! The routing set-ups the demo compares, and the workload they all run.

use anyhow::Context;
use berth_bench::cli::Args as BenchArgs;
use berth_bench::{BenchConfig, RunOutput, execute};

use super::Args;
use super::fleet::Fleet;

/// One routing set-up: gateway policy and flags, and how the bench tells it the session.
#[derive(Debug, Clone, Copy)]
pub(super) struct Scenario {
    /// Row label.
    pub(super) label: &'static str,
    /// `--policy`.
    pub(super) policy: &'static str,
    /// `--routing-key-override`.
    pub(super) routing_key_override: bool,
    /// `--session-routing` of the bench.
    pub(super) session_routing: &'static str,
}

/// The scenarios, baseline first.
pub(super) const SCENARIOS: [Scenario; 5] = [
    Scenario {
        label: "round_robin",
        policy: "round_robin",
        routing_key_override: false,
        session_routing: "none",
    },
    Scenario {
        label: "cache_aware",
        policy: "cache_aware",
        routing_key_override: false,
        session_routing: "none",
    },
    Scenario {
        label: "cache_aware + override (rid)",
        policy: "cache_aware",
        routing_key_override: true,
        session_routing: "rid",
    },
    Scenario {
        label: "manual",
        policy: "manual",
        routing_key_override: false,
        session_routing: "smg_routing_key",
    },
    Scenario {
        label: "consistent_hashing",
        policy: "consistent_hashing",
        routing_key_override: false,
        session_routing: "smg_routing_key",
    },
];

/// The workload and fleet shape shared by every scenario.
#[derive(Debug, Clone)]
pub(super) struct Workload {
    /// Root sessions.
    pub(super) sessions: u64,
    /// Live root sessions.
    pub(super) concurrency: u64,
    /// Mean turns per session.
    pub(super) turns: u64,
    /// Seed.
    pub(super) seed: u64,
    /// Workers' time scale.
    pub(super) time_scale: f64,
    /// Workers' KV capacity, tokens.
    pub(super) kv_capacity_tokens: u64,
    /// Shared system prompt, words.
    pub(super) system_prompt_words: u64,
    /// New user words per turn.
    pub(super) input_words: u64,
    /// Output tokens per turn.
    pub(super) output_tokens: u64,
}

impl Workload {
    /// The demo's workload, or a tiny one with `--quick`.
    pub(super) fn from_args(args: &Args) -> Self {
        if args.quick {
            return Self {
                sessions: 4,
                concurrency: 4,
                turns: 3,
                seed: args.seed,
                time_scale: 0.0,
                kv_capacity_tokens: 4096,
                system_prompt_words: 40,
                input_words: 10,
                output_tokens: 4,
            };
        }
        Self {
            sessions: args.sessions.max(1),
            concurrency: 16,
            turns: 6,
            seed: args.seed,
            time_scale: args.time_scale,
            kv_capacity_tokens: args.kv_capacity_tokens.max(16),
            system_prompt_words: 200,
            input_words: 80,
            output_tokens: 32,
        }
    }

    fn bench_flags(&self, url: &str, session_routing: &str) -> Vec<String> {
        let mut flags: Vec<String> = [
            "--url",
            url,
            "--endpoint-type",
            "chat",
            "--streaming",
            "--quiet",
            "--session-routing",
            session_routing,
            "--agent-fanout",
            "2",
            "--agent-depth",
            "1",
            "--session-turns-stddev",
            "1",
            "--session-turn-delay-mean",
            "100",
            "--session-turn-delay-stddev",
            "30",
            "--synthetic-input-tokens-stddev",
            "10",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        for (flag, value) in [
            ("--num-sessions", self.sessions.to_string()),
            ("--expected-workers", super::fleet::WORKERS.to_string()),
            ("--concurrency", self.concurrency.to_string()),
            ("--session-turns-mean", self.turns.to_string()),
            ("--random-seed", self.seed.to_string()),
            (
                "--shared-system-prompt-length",
                self.system_prompt_words.to_string(),
            ),
            (
                "--synthetic-input-tokens-mean",
                self.input_words.to_string(),
            ),
            ("--output-tokens-mean", self.output_tokens.to_string()),
        ] {
            flags.push(flag.to_owned());
            flags.push(value);
        }
        flags
    }
}

/// Runs one scenario on a fresh fleet.
pub(super) async fn run(scenario: &Scenario, workload: &Workload) -> anyhow::Result<RunOutput> {
    let fleet = Fleet::start(scenario, workload).await?;
    let flags = workload.bench_flags(&fleet.url(), scenario.session_routing);
    let config = BenchArgs::from_flags(flags)
        .and_then(|args| BenchConfig::try_from_args(&args))
        .context("bench configuration")?;
    let output = execute(config, std::future::pending()).await;
    fleet.stop().await;
    Ok(output?)
}

//! The three workloads the demo runs, each with the fleet it runs on.
//!
//! - **classic**: agent sessions with two sub-agents each, one shared system prompt, a KV cache
//!   small enough that scattering sessions evicts their prefixes (the demo's original rows).
//! - **agentic under KV pressure** (issue #8): four long shared system prompts, multi-turn
//!   sessions of varied length, sub-agents whose first prompt extends their parent's
//!   conversation, think times, Poisson root arrivals at a rate that keeps the fleet busy but
//!   not overloaded, and workers whose KV cache holds less than the live context, with a
//!   prefill speed slow enough that serialized prefill shows in time to first token. Here a
//!   policy that piles cold prefixes on one worker loses on TTFT, and one that scatters a
//!   conversation loses on cached share.
//! - **trace** (issue #16): the replay of a committed agentic coding trace synthesized by
//!   aiperf, all sessions starting at once (`--fixed-schedule`) with their recorded think times.

use super::Args;

/// The simulated workers' shape.
#[derive(Debug, Clone, Copy)]
pub(super) struct FleetShape {
    /// KV cache per worker, tokens.
    pub(super) kv_capacity_tokens: u64,
    /// Multiplies every simulated delay.
    pub(super) time_scale: f64,
    /// Prefill speed of uncached tokens.
    pub(super) prefill_tokens_per_sec: f64,
}

/// One workload: the bench flags every row of a set runs with, and its fleet.
#[derive(Debug, Clone)]
pub(super) struct Workload {
    /// One line describing it, for the table heading.
    pub(super) description: String,
    /// The workers.
    pub(super) fleet: FleetShape,
    /// Bench flags other than `--url` and `--session-routing`.
    flags: Vec<String>,
}

fn flags(pairs: &[(&str, String)], switches: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = switches.iter().map(|s| (*s).to_owned()).collect();
    for (flag, value) in pairs {
        out.push((*flag).to_owned());
        out.push(value.clone());
    }
    out
}

impl Workload {
    /// The original rows' workload, or a tiny one with `--quick`.
    pub(super) fn classic(args: &Args) -> Self {
        let (sessions, turns, system, input, output, fleet) = if args.quick {
            let fleet = FleetShape {
                kv_capacity_tokens: 4096,
                time_scale: 0.0,
                prefill_tokens_per_sec: 4_000.0,
            };
            (4, 3, 40, 10, 4, fleet)
        } else {
            let fleet = FleetShape {
                kv_capacity_tokens: args.kv_capacity_tokens.max(16),
                time_scale: args.time_scale,
                prefill_tokens_per_sec: 4_000.0,
            };
            (args.sessions.max(1), 6, 200, 80, 32, fleet)
        };
        let concurrency = if args.quick { 4 } else { 16 };
        Self {
            description: format!(
                "{sessions} agent sessions with 2 sub-agents each, ~{turns} turns, one shared \
                 system prompt of {system} words; KV {} tokens per worker, time scale {}, seed {}",
                fleet.kv_capacity_tokens, fleet.time_scale, args.seed
            ),
            fleet,
            flags: flags(
                &[
                    ("--num-sessions", sessions.to_string()),
                    ("--concurrency", concurrency.to_string()),
                    ("--session-turns-mean", turns.to_string()),
                    ("--session-turns-stddev", "1".into()),
                    ("--session-turn-delay-mean", "100".into()),
                    ("--session-turn-delay-stddev", "30".into()),
                    ("--shared-system-prompt-length", system.to_string()),
                    ("--synthetic-input-tokens-mean", input.to_string()),
                    ("--synthetic-input-tokens-stddev", "10".into()),
                    ("--output-tokens-mean", output.to_string()),
                    ("--agent-fanout", "2".into()),
                    ("--agent-depth", "1".into()),
                    ("--random-seed", args.seed.to_string()),
                    ("--expected-workers", super::fleet::WORKERS.to_string()),
                ],
                &["--endpoint-type", "chat", "--streaming", "--quiet"],
            ),
        }
    }

    /// The agentic workload under KV pressure, or a tiny one with `--quick`.
    pub(super) fn agentic(args: &Args) -> Self {
        let quick = args.quick;
        let roots = if quick {
            3
        } else {
            args.agentic_sessions.max(1)
        };
        let system_words: u64 = if quick { 60 } else { 1_500 };
        let fleet = FleetShape {
            kv_capacity_tokens: if quick {
                1_024
            } else {
                args.agentic_kv_capacity_tokens.max(16)
            },
            time_scale: if quick { 0.0 } else { args.time_scale },
            // Half the original rows' speed: a cold 2,000-token prefix takes 200 ms of wall
            // time at time scale 0.2, and queues behind it.
            prefill_tokens_per_sec: 2_000.0,
        };
        // Root starts per second of wall time: busy but not overloaded at time scale 0.2 (round
        // robin, the most prefill, keeps every worker's prefill lane about 60% busy).
        let rate = if quick { 50.0 } else { AGENTIC_ROOTS_PER_SEC };
        let (turns, turns_sd, input, input_sd, output, think, think_sd) = if quick {
            (2, 1, 8, 4, 4, 0, 0)
        } else {
            (3, 2, 120, 60, 40, 200, 100)
        };
        Self {
            description: format!(
                "{roots} agent sessions (Poisson arrivals, {rate}/s), each with 2 sub-agents \
                 extending its conversation, {turns}±{turns_sd} turns, think {think}±{think_sd} ms, \
                 4 shared system prompts of {system_words} words; KV {} tokens per worker (less \
                 than the live context), prefill {} tokens/s, time scale {}, seed {}",
                fleet.kv_capacity_tokens, fleet.prefill_tokens_per_sec, fleet.time_scale, args.seed
            ),
            fleet,
            flags: flags(
                &[
                    ("--num-sessions", roots.to_string()),
                    ("--concurrency", "1000".into()),
                    ("--request-rate", rate.to_string()),
                    ("--arrival-pattern", "poisson".into()),
                    ("--num-system-prompts", "4".into()),
                    ("--shared-system-prompt-length", system_words.to_string()),
                    ("--session-turns-mean", turns.to_string()),
                    ("--session-turns-stddev", turns_sd.to_string()),
                    ("--session-turn-delay-mean", think.to_string()),
                    ("--session-turn-delay-stddev", think_sd.to_string()),
                    ("--synthetic-input-tokens-mean", input.to_string()),
                    ("--synthetic-input-tokens-stddev", input_sd.to_string()),
                    ("--output-tokens-mean", output.to_string()),
                    ("--output-tokens-stddev", (output / 3).to_string()),
                    ("--agent-fanout", "2".into()),
                    ("--agent-depth", "1".into()),
                    ("--agent-context", "parent".into()),
                    ("--random-seed", args.seed.to_string()),
                    ("--expected-workers", super::fleet::WORKERS.to_string()),
                ],
                &["--endpoint-type", "chat", "--streaming", "--quiet"],
            ),
        }
    }

    /// The bench flags for one row.
    pub(super) fn bench_flags(&self, url: &str, session_routing: &str) -> Vec<String> {
        let mut out = vec![
            "--url".to_owned(),
            url.to_owned(),
            "--session-routing".to_owned(),
            session_routing.to_owned(),
        ];
        out.extend(self.flags.iter().cloned());
        out
    }
}

/// The committed agentic coding trace (aiperf 0.13.0 `synthesize agentic-code`, see
/// `crates/berth/data/README.md`).
pub(super) const TRACE: &str = include_str!("../../data/agentic-code-16s-seed42.jsonl");

/// Where the demo writes [`TRACE`] for the bench to read.
pub(super) fn trace_path(args: &Args) -> std::path::PathBuf {
    args.artifact_dir.join("agentic-code-16s-seed42.jsonl")
}

impl Workload {
    /// The replay of the committed agentic coding trace, scaled down by reproducible bench
    /// flags: 16-token blocks instead of the trace's 512 (every prompt 1/32 of its recorded
    /// length, the block sharing intact), answers capped at 32 tokens, think times divided by
    /// `--trace-speedup`. `--quick`: 3 sessions, no think times, time scale 0.
    pub(super) fn trace(args: &Args) -> Self {
        let quick = args.quick;
        let sessions = if quick { 3 } else { args.trace_sessions.max(1) };
        let fleet = FleetShape {
            kv_capacity_tokens: if quick {
                4_096
            } else {
                args.trace_kv_capacity_tokens.max(16)
            },
            time_scale: if quick { 0.0 } else { args.time_scale },
            prefill_tokens_per_sec: 4_000.0,
        };
        let speedup = if args.trace_speedup.is_finite() && args.trace_speedup > 0.0 {
            args.trace_speedup
        } else {
            1.0
        };
        let path = trace_path(args).display().to_string();
        let mut switches = vec![
            "--endpoint-type",
            "chat",
            "--streaming",
            "--quiet",
            "--fixed-schedule",
        ];
        if quick {
            switches.push("--ignore-trace-delays");
        }
        Self {
            description: format!(
                "the first {sessions} sessions of an aiperf 0.13.0 `synthesize agentic-code` \
                 trace (seed 42; 32k-token shared prefix, group prefixes, tool-call think times), \
                 replayed at 16 tokens per hash id (1/32 scale), answers capped at 32 tokens, \
                 think times /{speedup}; KV {} tokens per worker, prefill {} tokens/s, time \
                 scale {}",
                fleet.kv_capacity_tokens, fleet.prefill_tokens_per_sec, fleet.time_scale
            ),
            fleet,
            flags: flags(
                &[
                    ("--input-file", path),
                    ("--custom-dataset-type", "mooncake_trace".into()),
                    ("--num-sessions", sessions.to_string()),
                    ("--prompt-input-tokens-block-size", "16".into()),
                    ("--trace-max-output-tokens", "32".into()),
                    ("--replay-speedup", speedup.to_string()),
                    ("--random-seed", args.seed.to_string()),
                    ("--expected-workers", super::fleet::WORKERS.to_string()),
                ],
                &switches,
            ),
        }
    }
}

/// Root sessions started per second in the agentic set.
const AGENTIC_ROOTS_PER_SEC: f64 = 6.0;

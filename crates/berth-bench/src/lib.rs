//! `berth bench`: a multi-turn, agent-tree load generator with session-routing modes.
//!
//! # Layout
//!
//! - [`cli`]: the flags (aiperf's names where aiperf has one) and [`cli::run`], the entry point.
//! - [`config`]: [`BenchConfig`], every flag validated once before the run starts.
//! - [`routing`]: the session-routing modes (`dynamo_headers`, `dynamo_nvext`,
//!   `smg_routing_key`, `session_id_header`, `identity_headers`, `prompt_cache_key`,
//!   `conversation`, `codex_session_header`, `claude_code_header`, `claude_code_metadata`, `rid`,
//!   `none`), parsed with
//!   their options and applied where requests are serialized.
//! - [`workload`]: sessions and agent trees, their plans, their history and request bodies.
//! - [`transport`]: the pooled HTTP client, timing, and reading JSON and SSE responses.
//! - [`run`]: the session tasks, the launcher ([`run::execute`]) and progress output.
//! - [`trace`]: trace files (`--input-file`): formats, the two passes, block texts, the ideal
//!   cache and turn timing; [`run::replay`] replays them.
//! - [`metrics`]: per-request records and the [`Summary`] computed from them.
//! - [`report`]: the console table and the `--artifact-dir` files, HTML report with inline SVG.
//! - [`rng`]: the seeded generator behind reproducible workloads.
//! - [`error`]: [`BenchError`], this crate's one error type.
//!
//! # Design
//!
//! A *session* (a live conversation with its own UUID), not a dataset template, is the affinity
//! identity. Each turn resends the whole history with the server's own answers, so a router that
//! keeps a session on one worker shows it as cached prompt tokens and lower time to first token,
//! and one that scatters it shows the opposite. All figures come from the per-request records
//! after the run, so their arithmetic is tested on scripted records.

pub mod cli;
pub mod config;
pub mod error;
pub mod metrics;
pub mod report;
pub mod rng;
pub mod routing;
pub mod run;
pub mod trace;
pub mod transport;
pub mod workload;

pub use config::BenchConfig;
pub use error::BenchError;
pub use metrics::Summary;
pub use run::{RunOutput, execute};

//! Trace replay: `--input-file` with `--custom-dataset-type mooncake_trace|bailian_trace`.
//!
//! - [`format`]: one line of each format, parsed and checked (aiperf 0.13's fields).
//! - [`source`]: the two streamed passes over the file: checking and indexing sessions, then
//!   yielding the kept rows with their session keys.
//! - [`blocks`]: the deterministic text of each hash id, from a bounded shared cache.
//! - [`ideal`]: the cached share one unbounded prefix cache would reach on the prompts as sent.
//! - [`timing`]: when each turn is due (`--fixed-schedule`, recorded delays,
//!   `--replay-speedup`, `--ignore-trace-delays`).
//!
//! The replay itself (sessions started under `--concurrency` or at their recorded times, each
//! resending its history with the answers received) is [`crate::run::replay`].

pub mod blocks;
pub mod format;
pub mod ideal;
pub mod source;
pub mod timing;

pub use format::{RowInput, RowSession, TraceFormat, TraceRow};
pub use source::{TraceIndex, TraceReader, TraceSource};

/// The validated trace options of a run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TraceConfig {
    /// The file, its format and the sampling.
    pub source: TraceSource,
    /// Tokens per hash id (`--prompt-input-tokens-block-size`).
    pub block_size: u32,
    /// Send at the recorded times (`--fixed-schedule`).
    pub fixed_schedule: bool,
    /// Divides recorded times and delays (`--replay-speedup`).
    pub speedup: f64,
    /// Ignore recorded delays between turns (`--ignore-trace-delays`).
    pub ignore_delays: bool,
    /// Cap of `max_tokens` (`--trace-max-output-tokens`).
    pub max_output_tokens: Option<u64>,
    /// `max_tokens` of rows without `output_length` (`--output-tokens-mean`).
    pub default_output_tokens: u64,
}

impl TraceConfig {
    /// `max_tokens` for a row (at least 1).
    pub fn max_tokens(&self, output_length: Option<u64>) -> u64 {
        let n = output_length.unwrap_or(self.default_output_tokens);
        self.max_output_tokens.map_or(n, |cap| n.min(cap)).max(1)
    }
}

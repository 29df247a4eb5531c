//! Trace replay: `--input-file` with `--custom-dataset-type mooncake_trace|bailian_trace`.
//!
//! - [`format`]: one line of each format, parsed and checked (aiperf 0.13's fields).
//! - [`source`]: the two streamed passes over the file: checking and indexing sessions, then
//!   yielding the kept rows with their session keys.
//! - [`blocks`]: the deterministic text of each hash id, from a bounded shared cache.
//! - [`ideal`]: the cached share one unbounded prefix cache would reach on the prompts as sent.
//! - [`options`]: [`TraceConfig`], the trace flags validated.
//! - [`timing`]: when each turn is due (`--fixed-schedule`, recorded delays,
//!   `--replay-speedup`, `--ignore-trace-delays`).
//!
//! The replay itself (sessions started under `--concurrency` or at their recorded times, each
//! resending its history with the answers received) is [`crate::run::replay`].

pub mod blocks;
pub mod format;
pub mod ideal;
pub mod options;
pub mod source;
pub mod timing;

pub use format::{RowInput, RowSession, TraceFormat, TraceRow};
pub use options::TraceConfig;
pub use source::{TraceIndex, TraceReader, TraceSource};

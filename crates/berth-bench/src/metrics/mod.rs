//! What a run measured.
//!
//! - [`record`]: one [`RequestRecord`] per attempt, the raw material of every figure.
//! - [`percentiles`]: HDR-histogram percentiles of a latency series.
//! - [`summary`]: the [`Summary`] of a run: latencies, throughputs, cached-token ratio,
//!   stickiness, per-worker load and errors.
//!
//! Every figure is computed from the records alone, after the run, so the arithmetic is tested on
//! scripted records with known answers, without a network.

pub mod percentiles;
pub mod record;
pub mod summary;

pub use percentiles::Percentiles;
pub use record::{RawRequest, RequestRecord};
pub use summary::{Stickiness, Summary, TurnStat};

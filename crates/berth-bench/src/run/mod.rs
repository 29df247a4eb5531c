//! Running the workload.
//!
//! - [`context`]: state shared by every session task: the client, the stop signal, counters and
//!   the record sink.
//! - [`session`]: one session's turn loop, its children, and one turn's attempts.
//! - [`arrivals`]: when root sessions start under `--request-rate` (`--arrival-pattern`).
//! - [`driver`]: starting root sessions under `--concurrency`, `--request-rate`,
//!   `--num-sessions` and `--benchmark-duration`, and [`execute`], the whole run.
//! - [`replay`]: replaying an `--input-file` trace instead of the synthetic workload.
//! - [`progress`]: the progress bar (terminal) or periodic lines (otherwise).
//!
//! Every loop is bounded: root sessions by `--num-sessions` or the duration, turns by the plan,
//! retries by `--max-retries`, each request by its timeout.

pub mod arrivals;
pub mod context;
pub mod driver;
pub mod progress;
pub mod replay;
pub mod session;

pub use driver::{RunOutput, execute};

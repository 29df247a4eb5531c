//! berth-sim: a simulated LLM inference worker with a KV prefix cache, a latency model and fault
//! injection. It stands in for SGLang/vLLM on machines without GPUs, so what session routing is
//! worth shows up as cache hits and time to first token, and it is the harness of every gateway
//! and benchmark test.
//!
//! # Layout
//! - [`builder`]: `SimWorker::builder()...spawn(listener)`, the way tests start a worker.
//! - [`handle`]: `SimHandle`, a running worker's address, fault controls, counters, received
//!   requests, `shutdown` and `join`.
//! - [`config`]: `SimConfig`, validated once; [`cli`]: the `berth sim-worker` flags onto it.
//! - [`faults`]: what can be injected (errors, hangs, slow-down, dropped streams, failing
//!   health, exit) and how each request consults it.
//! - [`tokenize`]: deterministic ~4-byte tokens, ChatML rendering, deterministic answers.
//! - [`kv`]: 16-token blocks with chained hashes, LRU eviction, pinning of blocks in use.
//! - [`latency`]: the pure timing model; `engine` (private): admission, serialized prefill,
//!   continuous-batch decode.
//! - `api` (private): every endpoint — generation in OpenAI, SGLang and Anthropic framing,
//!   pooling endpoints, discovery, `/metrics`, and `/sim/*` controls.
//! - `server`, `body`, `state` (private): the accept loop, response bodies, per-worker state.
//! - [`pd`]: the prefill and decode roles of a disaggregated pair (`--mode`), the bootstrap
//!   listener and the decode worker's wait for its room.
//! - [`tls`]: HTTPS (and optionally required client certificates) with rustls.
//! - [`record`], [`stats`]: what the worker received and its counters.
//! - `error` (re-exported): [`SimError`], the crate's one error enum.
//!
//! No state is global: any number of workers run in one process, each owned by its handle.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use berth_sim::SimWorker;
//!
//! let worker = SimWorker::builder().worker_id("w1").time_scale(0.0).spawn_on_loopback().await;
//! assert!(worker.url().starts_with("http://127.0.0.1:"));
//! worker.set_error_rate(1.0, 503); // every inference request now answers 503
//! assert_eq!(worker.requests(), 0);
//! worker.shutdown().await; // re-raises a panic from any request handler
//! # }
//! ```

mod api;
mod body;
pub mod builder;
pub mod cli;
pub mod config;
mod engine;
mod error;
pub mod faults;
pub mod handle;
pub mod kv;
pub mod latency;
pub mod pd;
pub mod record;
mod server;
mod state;
pub mod stats;
pub mod tls;
pub mod tokenize;

pub use builder::{SimWorker, SimWorkerBuilder};
pub use config::SimConfig;
pub use error::SimError;
pub use faults::Faults;
pub use handle::SimHandle;
pub use latency::LatencyModel;
pub use pd::PdMode;
pub use record::RequestRecord;
pub use stats::SimStats;
pub use tls::TlsPem;

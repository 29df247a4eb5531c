//! The upstream layer: everything between a decided worker and its response head. It imports
//! nothing above it (no registry, no router state, no metrics registry, no proxy), so both
//! dispatchers (`proxy/dispatch.rs`, `proxy/pd/`) and the probes call the same code.
//!
//! - `addr.rs`: [`WorkerAddr`], a worker's parsed URL.
//! - `client.rs`: opening connections (TCP, TLS), and one-off requests for probes and the admin
//!   fan-out.
//! - `h1/`: the purpose-built HTTP/1 client of the request path (one exchange on a connection
//!   the request's own task drives).
//! - `pool.rs`: keep-alive connections, one pool per IO loop.
//! - `body.rs`: the request body sent to a worker.
//! - `replay.rs`: a streamed body, counted against the payload limit and kept (up to a limit)
//!   so a retry can re-send it.
//! - `wait.rs`: the worker's `--request-timeout-secs`, counted from the end of the upload.
//! - `attempt.rs`: one attempt: send, re-send on a stale connection, time out, count and
//!   classify the status, report to the breaker.

mod addr;
mod attempt;
mod body;
mod client;
pub(crate) mod h1;
mod pool;
mod replay;
mod wait;

pub use addr::WorkerAddr;
pub(crate) use attempt::{AttemptError, Target, Upstream, UpstreamMetrics};
pub(crate) use body::UpBody;
pub(crate) use client::{HttpClient, TIMED_OUT, get, send_empty};
pub(crate) use h1::ReqHead;
pub(crate) use pool::{Pool, UpRequest, UpResponse};
pub(crate) use replay::Replayable;

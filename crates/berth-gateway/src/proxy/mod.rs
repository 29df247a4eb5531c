//! The proxy path: from a client's generation request to a worker's streamed response.
//!
//! - `endpoint.rs`: the closed set of proxied routes.
//! - `inspect.rs`: reading `rid`, `model`, `stream` and the prompt text out of a buffered body;
//!   `prompt.rs`: the prompt hashed as the parser finds its strings (no DOM, no copy).
//! - `held.rs`: the body as held (buffered or streamed) and each attempt's request.
//! - `headers.rs`: what is forwarded (end-to-end headers) and what is not (hop-by-hop, hints).
//! - `lookahead.rs`: the first frames of a streamed body, read to learn its `model` before any
//!   byte goes to a worker.
//! - `rank.rs`: writing `data_parallel_rank` into bodies sent to `<url>@<rank>` workers.
//! - `replay.rs`: a streamed body, counted against the payload limit and kept (up to a limit)
//!   so a retry can re-send it.
//! - `deadline.rs`: how long a client's body may take (stalled or in all), and reading a
//!   buffered body within it.
//! - `wait.rs`: the worker's `--request-timeout-secs`, counted from the end of the upload.
//! - `handler.rs`: one request as named stages: inspect (`prepare.rs`), route (`route.rs`),
//!   dispatch (`dispatch.rs` for the regular request, `pd/` for a prefill/decode pair), respond
//!   (`respond.rs`).

mod deadline;
mod dispatch;
mod endpoint;
mod handler;
mod headers;
mod held;
mod inspect;
mod lookahead;
mod pd;
mod prepare;
mod prompt;
mod rank;
mod replay;
mod respond;
mod rewrite;
mod route;
mod wait;

pub(crate) use endpoint::Endpoint;
pub(crate) use handler::proxy;
pub(crate) use headers::ROUTED_WORKER;
pub(crate) use replay::{BoxError, ReplayBody};

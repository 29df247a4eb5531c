//! The proxy path: from a client's generation request to a worker's streamed response.
//!
//! - `endpoint.rs`: the closed set of proxied routes.
//! - `inspect.rs`: reading `rid`, `model`, `stream` and the prompt text out of a buffered body;
//!   `prompt.rs`: the prompt hashed as the parser finds its strings (no DOM, no copy).
//! - `held.rs`: the body as held (buffered or streamed) and each attempt's request.
//! - `headers.rs`: what is forwarded (end-to-end headers) and what is not (hop-by-hop, hints).
//! - `rank.rs`: writing `data_parallel_rank` into bodies sent to `<url>@<rank>` workers.
//! - `session.rs`: `nvext.session_control` (`bind` counted, `close` drops the session's pin).
//! - `scan_keys.rs`: the key members of a streamed body, as the streaming scan keeps them.
//! - `usage.rs`: the cached tokens an answer reports, read as it passes (`--cache-feedback`).
//! - `chain.rs`: Responses chains: a response's id recorded under its key as it passes; a
//!   `previous_response_id` resolved to that key.
//! - `handler.rs`: one request as named stages: inspect (`prepare.rs`), route (`route.rs`),
//!   dispatch (`dispatch.rs` for the regular request, `pd/` for a prefill/decode pair), respond
//!   (`respond.rs`).

mod body_keys;
mod chain;
mod dispatch;
mod endpoint;
mod handler;
mod headers;
mod held;
mod inspect;
mod pd;
mod prepare;
mod prompt;
mod rank;
mod respond;
mod rewrite;
mod route;
mod scan_keys;
mod session;
mod usage;

pub(crate) use endpoint::Endpoint;
pub(crate) use handler::proxy;
pub(crate) use headers::{ROUTED_WORKER, hop_by_hop, names_fields, strip_response_fields};
pub(crate) use held::ClientHead;
#[cfg(test)]
pub(crate) use respond::RequestGuard;
pub(crate) use respond::{Body, hold_permit, set_request_id, set_sse_style};

//! The HTTP surface of the worker.
//!
//! - `router`: dispatch, and the steps every inference request takes (count, record, faults,
//!   model check).
//! - `request`: reading any generation API into one engine request.
//! - `generation`: driving the engine, whole or streamed.
//! - `framing`, `openai`, `sglang`, `anthropic`: each API's JSON and SSE shapes.
//! - `pooling`: embeddings, rerank, classify.
//! - `discovery`, `metrics`: what gateways probe.
//! - `control`: `/sim/*`, the worker's own controls.
//! - `respond`: response building, the one error shape, SSE helpers.

mod anthropic;
mod control;
mod discovery;
mod framing;
mod generation;
mod metrics;
mod openai;
mod pooling;
mod request;
mod respond;
mod router;
mod sglang;

pub(crate) use router::handle;

//! The client's request body, below everything that reads or forwards it.
//!
//! - `client.rs`: [`ClientBody`], frames read ahead (admission) then the connection's body.
//! - `deadline.rs`: how long a client's body may take (stalled or in all), and reading a
//!   buffered body within it.
//! - `lookahead.rs`: the first frames of a streamed body, read to learn its `model` (and hold
//!   it until a body key member settles the routing key) before any byte goes to a worker, and
//!   the late check of the rest (the model, the `nvext` session control).
//! - `wire.rs`: [`ConnBody`], the body as it arrives on the client's connection ([`Wire`]:
//!   the connection's read side, lent by the server).
//! - `budget.rs`: one byte budget for every buffered body (`--buffered-body-budget-mb`).

mod budget;
mod client;
mod deadline;
mod lookahead;
mod wire;

pub(crate) use budget::{BodyBudget, BodyBudgetMetrics};
pub(crate) use client::ClientBody;
pub use deadline::BodyTimeouts;
pub(crate) use deadline::{BodyDeadline, read_body};
pub(crate) use lookahead::{
    CAPTURE_LIMIT, KeyHold, LOOKAHEAD_LIMIT, LateCheck, Lookahead, NvextSlot, read_ahead,
};
pub(crate) use wire::{ConnBody, SharedWire, Wire};

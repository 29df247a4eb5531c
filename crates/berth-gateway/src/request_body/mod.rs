//! The client's request body, below everything that reads or forwards it.
//!
//! - `client.rs`: [`ClientBody`], frames read ahead (admission) then the connection's body.
//! - `deadline.rs`: how long a client's body may take (stalled or in all), and reading a
//!   buffered body within it.
//! - `lookahead.rs`: the first frames of a streamed body, read to learn its `model` before any
//!   byte goes to a worker, and the late check of the rest.

mod client;
mod deadline;
mod lookahead;

pub(crate) use client::ClientBody;
pub use deadline::BodyTimeouts;
pub(crate) use deadline::{BodyDeadline, read_body};
pub(crate) use lookahead::{CAPTURE_LIMIT, LateCheck, Lookahead, read_ahead};

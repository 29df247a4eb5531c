//! Session routing: how a request tells the router which session it belongs to.
//!
//! Exactly one mode runs per benchmark (seed `002`), chosen with `--session-routing` and tuned
//! with repeatable `--session-routing-opt key=value`. The mode is parsed and validated once,
//! before any request is sent ([`SessionRouting::parse`]), and applied at the one place requests
//! are serialized ([`SessionRouting::apply`]), so header modes never touch the body and body
//! modes never add headers.
//!
//! - [`mode`]: the closed set of modes and their validated options.
//! - [`token`]: the RFC 9110 `token` grammar header names must follow.
//! - [`apply`]: what each mode puts on the wire for one request.

pub mod apply;
pub mod mode;
pub mod token;

pub use apply::{RequestIdentity, WireRequest};
pub use mode::{NvextScope, SessionRouting};

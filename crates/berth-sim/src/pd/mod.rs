//! Prefill/decode disaggregation, simulated: the worker can play either role of an SGLang PD pair.
//!
//! SGLang splits a request over two servers. The gateway sends the same JSON body to a prefill
//! server and a decode server, with `bootstrap_host`, `bootstrap_port` and `bootstrap_room`
//! added; the prefill server computes the prompt's KV cache and hands it over for that room
//! through its bootstrap server, and the decode server connects to `bootstrap_host:bootstrap_port`,
//! receives the room's KV cache, and generates.
//!
//! The simulation keeps the shape and drops the tensors:
//! - `mode.rs`: the worker's role ([`PdMode`]) and the bootstrap fields of a request; a request
//!   without them is refused (400) by a PD-mode worker.
//! - `rooms.rs`: the prefill worker's board of finished rooms (prompt and cached tokens), each
//!   taken once by the decode worker that waits for it.
//! - `listener.rs`: the prefill worker's bootstrap listener (`GET /bootstrap/room/{room}`, a
//!   bounded long-poll) and the decode worker's bounded wait on it.
//!
//! A prefill worker runs the prompt through its own engine (its KV prefix cache and prefill
//! latency), marks the room ready, and answers with one generated token. A decode worker waits
//! for the room before it answers at all (so a room that never comes is a clean HTTP error, not a
//! broken stream), then decodes without prefill time; the `cached_tokens` it reports are the
//! prefill worker's, where the cache that session routing keeps warm lives.

mod listener;
mod mode;
mod rooms;

pub(crate) use listener::{serve_bootstrap, wait_for_room};
pub use mode::PdMode;
pub(crate) use mode::{Bootstrap, Role};
pub(crate) use rooms::{RoomBoard, RoomInfo};

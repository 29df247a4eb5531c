//! The PD dispatcher: one request over a prefill worker and a decode worker, SGLang's way.
//!
//! - `bootstrap.rs`: writing `bootstrap_host`, `bootstrap_port` and a fresh 63-bit
//!   `bootstrap_room` into the JSON body (other members keep their bytes).
//! - `dispatch.rs`: the attempts. Each routes both legs (prefill: the prefill router and pool,
//!   `Leg::Prefill` pins; decode: the regular router and pool, `Leg::Decode` pins), sends both at
//!   once, drains the prefill response, and returns the decode worker's response (streamed or
//!   whole) with `x-smg-routed-worker-id` naming the decode worker. A leg that fails before the
//!   decode worker's response reached the client sends the pair again, the failed worker
//!   excluded from its leg.

mod bootstrap;
mod dispatch;

pub(crate) use dispatch::dispatch;

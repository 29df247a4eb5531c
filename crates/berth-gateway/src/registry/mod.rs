//! Worker membership, health and circuit breakers, published as an immutable snapshot.
//!
//! - `worker.rs`: one registered worker (address, models, health tracker, breaker, stats).
//! - `view.rs`: the member list (behind one mutex, touched only on membership or availability
//!   changes) and the [`View`] that the request path reads without locking (`ArcSwap`).
//! - `health.rs`: HTTP probes (`GET /health`, `GET /v1/models`), start-up waiting and the
//!   periodic health-check task.

mod health;
mod view;
mod worker;

pub(crate) use health::{fetch_models, probe_health, spawn_health_checks, startup};
pub(crate) use view::{Registry, View};
pub(crate) use worker::Worker;
pub use worker::WorkerAddr;

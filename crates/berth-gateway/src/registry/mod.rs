//! Worker membership, health and circuit breakers, published as an immutable snapshot.
//!
//! - `worker.rs`: one registered worker (address, models, health tracker, breaker, stats).
//! - `view.rs`: the member list (behind one mutex, touched only on membership or availability
//!   changes) and the [`View`] that the request path reads without locking (`ArcSwap`).
//! - `health.rs`: HTTP probes (`GET /health`, `GET /v1/models`) and bringing start-up workers
//!   in without holding up the gateway.
//! - `settings.rs`: breaker and health-check settings.
//! - `checks.rs`: the health-check task: steady probes of healthy workers, fast probes with
//!   backoff of the others, and the log of start-up workers still awaited.
//! - `loads.rs`: the load monitor (`GET /v1/loads` of every worker, SMG 1.13's), published as
//!   the immutable `WorkerLoads` routing reads.

mod checks;
mod health;
mod loads;
mod settings;
mod view;
mod worker;

pub(crate) use checks::spawn_health_checks;
pub(crate) use health::{first_round, join, register_startup};
pub(crate) use loads::spawn_load_monitor;
pub use settings::{BreakerSettings, HealthSettings, LoadMonitorSettings};
pub(crate) use view::{Registry, View};
pub(crate) use worker::Worker;

//! Prefill/decode disaggregation (`--pd-disaggregation`): the second worker pool.
//!
//! In PD mode SGLang runs two pools: prefill workers compute a prompt's KV cache and hand it to a
//! decode worker through a bootstrap server; decode workers generate. Each request goes to one
//! of each, and each leg is routed on its own: its own policy (`--prefill-policy`,
//! `--decode-policy`), its own pins (the core scopes pins by [`Leg`](crate::routing::Leg), and
//! each leg has its own pin table), its own health checks and circuit breakers.
//!
//! The decode pool *is* the gateway's ordinary pool (`--decode` URLs fill the regular registry
//! and the regular router takes the decode policy), so everything that reads the regular pool
//! keeps working on the decode leg: readiness, `/v1/models`, the admin API, per-worker metrics,
//! the eviction sweep. This module adds the prefill leg beside it:
//! - `settings.rs`: [`PdSettings`] and [`PrefillUrl`] (`--prefill URL [BOOTSTRAP_PORT|none]`),
//!   validated with the rest of the configuration.
//! - `legs.rs`: [`PdLegs`], the prefill leg at run time (registry, router, bootstrap ports) and
//!   its start-up (first health round, health-check task, sweep).
//!
//! The admin API over both pools is `admin/pd.rs`; the request path's PD dispatcher is
//! `proxy/pd/`. Validation is `GatewayConfig::validate`'s.

mod legs;
mod settings;

pub(crate) use legs::PdLegs;
pub use settings::{PdSettings, PrefillUrl};

//! berth's gateway: `berth serve`, a session-affinity HTTP gateway for LLM inference workers,
//! drop-in for the SGLang Model Gateway (same flags, headers, metrics and error codes).
//!
//! Layout:
//! - [`cli`]: flags with SMG's names, `--config FILE`, the process entry point.
//! - [`config`]: the typed, validated [`GatewayConfig`].
//! - [`server`]: [`Gateway::builder`] / [`GatewayHandle`] / [`serve`]: listeners, connections,
//!   graceful shutdown, the Prometheus listener.
//! - `service.rs`: method/path dispatch and inbound auth; `request_id.rs`: `x-request-id` on
//!   every response; `admin/`: the routes the gateway answers itself (health, `/v1/models`,
//!   `/workers`, SMG's info, legacy and fan-out routes) and their route table.
//! - `proxy/`: the request path (body path, routing decision, forwarding, retries, streaming).
//! - `registry/`: workers, health checks, circuit breakers, the lock-free worker view.
//! - [`admission`]: `--max-concurrent-requests`, the admission queue, the rate bucket.
//! - [`error`]: the one error enum and its one mapping to HTTP.
//! - [`metrics`]: Prometheus metrics with SMG's names; `index_metrics.rs`: the core's prefix
//!   index as metrics.
//! - `body_budget.rs`: one byte budget for every buffered request body
//!   (`--buffered-body-budget-mb`).
//! - [`model_scan`]: finding a streamed body's top-level `model` without buffering it.
//! - `body.rs`, `upstream.rs`, `pool.rs`: response and request bodies, the worker connections
//!   of each IO loop, the client for probes.
//! - `eviction.rs`: the periodic pin sweep; [`clock`]: monotonic time for the routing core.
//! - `discovery/`: service discovery (`--discovery-provider file`): a manifest of workers,
//!   reconciled into the registry.
//! - `tls/`: rustls: HTTPS towards clients, `https://` workers (CA, mTLS).
//! - `store/`: the shared pin store (`--sticky-store redis://...`) and `/sticky/{key}`.
//!
//! Routing itself (keys, pins, policies, breaker and health state machines) is the routing
//! core's; this crate does IO around it and never decides placement itself.

pub mod admission;
pub mod body;
mod body_budget;
pub mod cli;
pub mod clock;
pub mod config;
pub mod error;
mod index_metrics;
pub mod metrics;
pub mod model_scan;
pub mod pd;
pub mod server;

mod admin;
mod discovery;
mod eviction;
mod pool;
mod proxy;
mod registry;
mod request_body;
mod request_id;
mod service;
mod state;
mod store;
mod tls;
mod upstream;

/// The routing core, re-exported: [`GatewayConfig::router`] is its `RouterOptions`.
pub use berth_routing as routing;

#[doc(hidden)]
pub use admin::docs_route_table;

pub use config::GatewayConfig;
pub use discovery::{DiscoveryProvider, DiscoverySettings};
pub use error::GatewayError;
pub use pd::{PdSettings, PrefillUrl};
pub use registry::WorkerAddr;
pub use server::{Gateway, GatewayBuilder, GatewayHandle, serve};
pub use store::StoreSettings;
pub use tls::TlsSettings;

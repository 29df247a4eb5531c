//! berth's gateway: `berth serve`, a session-affinity HTTP gateway for LLM inference workers,
//! drop-in for the SGLang Model Gateway (same flags, headers, metrics and error codes).
//!
//! Layout, lowest layer first (docs/architecture.md has the import rules; `tests/layers.rs`
//! keeps them):
//! - [`clock`], `rng.rs`, [`body`] (a response body generic over a completion guard),
//!   [`model_scan`] (finding a streamed body's top-level `model` without buffering it),
//!   `usage_scan.rs` (the cached tokens an answer reports, from its last bytes as they pass).
//! - [`error`]: the one error enum and its one mapping to HTTP.
//! - `tls/`: rustls: HTTPS towards clients, `https://` workers (CA, mTLS);
//!   `request_body/`: the client's body (read-ahead, deadlines, the `model` lookahead, the
//!   byte budget of buffered bodies).
//! - `upstream/`: worker addresses, connections, the gateway's own HTTP/1 client for the request
//!   path (`h1/`), the per-IO-loop pool, the replayable request body, and the one upstream
//!   attempt both dispatchers call.
//! - `registry/`: workers, health checks, circuit breakers, the lock-free worker view.
//! - [`admission`] (`--max-concurrent-requests`, the queue, the rate bucket), [`pd`] (the
//!   prefill leg), `store/` (the shared pin store, `--sticky-store`), `discovery/`
//!   (`--discovery-provider file`).
//! - [`metrics`] (Prometheus metrics with SMG's names), [`config`] (the typed, validated
//!   [`GatewayConfig`]).
//! - `state.rs`: what every request handler shares.
//! - `proxy/`: the request path (inspect, route, dispatch, respond); `eviction.rs`: the pin
//!   sweep.
//! - `admin/`: the routes the gateway answers itself and their route table; `request_id.rs`.
//! - `service.rs`: method/path dispatch and inbound auth.
//! - [`server`]: [`Gateway::builder`] / [`GatewayHandle`] / [`serve`]: listeners,
//!   connections, graceful shutdown, the Prometheus listener.
//! - [`cli`]: flags with SMG's names, `--config FILE`, the process entry point.
//!
//! Routing itself (keys, pins, policies, breaker and health state machines) is the routing
//! core's; this crate does IO around it and never decides placement itself.

pub mod admission;
pub mod body;
pub mod cli;
pub mod clock;
pub mod config;
pub mod error;
pub mod metrics;
pub mod model_scan;
pub mod pd;
pub mod server;

mod admin;
mod chains;
mod coarse_timer;
mod discovery;
mod eviction;
mod fields;
mod proxy;
mod registry;
mod request_body;
mod request_id;
mod rng;
mod service;
mod state;
mod store;
mod tls;
mod upstream;
mod usage_scan;

/// The routing core, re-exported: [`GatewayConfig::router`] is its `RouterOptions`.
pub use berth_routing as routing;

pub use config::GatewayConfig;
pub use discovery::{DiscoveryProvider, DiscoverySettings};
pub use error::GatewayError;
pub use pd::{PdSettings, PrefillUrl};
pub use server::{Gateway, GatewayBuilder, GatewayHandle, serve};
pub use store::StoreSettings;
pub use tls::TlsSettings;
pub use upstream::WorkerAddr;

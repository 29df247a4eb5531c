//! The shared pin store (`--sticky-store redis://...`): pins shared by every gateway replica
//! and kept across restarts. See docs/scale-out.md for the design and its consistency.
//!
//! - `settings.rs`: the validated `--sticky-store*` settings.
//! - `names.rs`: key and channel names, the value format, and the Lua scripts.
//! - `link.rs`: the connection: timeouts, up/down state, reconnection with backoff, metrics.
//! - `local.rs`: one connection per IO thread (a call stays on the request's thread).
//! - `sync.rs`: the request-path hooks around the core's `route` (a new key consults the
//!   store; a moved pin is published; a sticky hit only marks its key for the next refresh).
//! - `flush.rs`: the batched refresh (TTLs, lazy write-back after an outage, convergence) and
//!   the mover (pins moved on the request path, written in batches by one task).
//! - `keyset.rs`: the bounded queues of pin hashes waiting for the store.
//! - `watch.rs`: the pub/sub subscriber that drops local pins other replicas moved.
//! - `start.rs`: connecting at start-up and spawning the background tasks.
//! - `ops.rs`: reading and deleting one pin for `GET/DELETE /sticky/{key}` (`admin/sticky.rs`).
//! - `chain.rs`: Responses chain entries (response id -> session key), written before the
//!   response's id reaches the client and read by a replica that does not know an id.
//! - `metrics.rs`: `berth_sticky_store_*`.
//!
//! The local pin table stays the fast path: a sticky hit never waits on Redis. Redis being
//! down, slow or restarted costs at most one bounded timeout (then the store is skipped until
//! a background probe reaches it again), never a client error.
//!
//! The store imports nothing above it: what it needs of the gateway (the router's pins, the
//! worker view, the clock) comes through [`PinHost`], which the gateway's state implements.

mod chain;
mod flush;
mod keyset;
mod link;
mod local;
mod metrics;
mod names;
mod ops;
mod settings;
mod start;
mod sync;
mod watch;

/// Defaults of the `--sticky-store-*` flags (re-exported by `config::defaults`).
pub(crate) mod defaults {
    /// `--sticky-store-timeout-ms`.
    pub const STICKY_STORE_TIMEOUT_MS: u64 = 50;
    /// `--sticky-store-sync-ms`.
    pub const STICKY_STORE_SYNC_MS: u64 = 5000;
    /// `--sticky-store-prefix`.
    pub const STICKY_STORE_PREFIX: &str = "berth";
}

pub(crate) use metrics::StoreMetrics;
pub(crate) use ops::decode_urls;
pub use settings::StoreSettings;
pub(crate) use start::start;
pub(crate) use sync::{PinHost, Store, observe, settle};

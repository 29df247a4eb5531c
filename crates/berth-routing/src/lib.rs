//! berth's routing core: every routing decision, and nothing else.
//!
//! Layout:
//! - `key.rs`: deriving a request's routing key (rid lineage, header precedence).
//! - `tokens.rs`: the `x-smg-routing-tokens` hint.
//! - `worker.rs`: worker ids, live counters and the immutable [`WorkerSnapshot`] (with the
//!   consistent-hash ring it builds, `worker/ring.rs`); `worker/load.rs`: the loads workers
//!   report ([`WorkerLoads`], polled by the gateway) and SMG's worker overload protection.
//! - `policy/`: the placement policies (`random`, `round_robin`, `power_of_two`,
//!   `cache_aware`, `ttft_aware`, `consistent_hashing`, `manual`).
//! - `assign.rs`: assignment modes for new and failed-over keys.
//! - `pin/`: the sharded, bounded pin table with its incremental idle sweep.
//! - `decision.rs`: the request, decision and lease types.
//! - `sticky.rs`: the pinned decision (reuse, failover, in-flight threshold, new keys).
//! - `shared.rs`: hooks for a shared pin store (name, read, install and drop a pin).
//! - `router.rs`: the [`Router`], its request and decision types; `options.rs`: its settings.
//! - `breaker.rs`, `health.rs`, `retry.rs`: per-worker state machines and retry rules.
//! - `rng.rs`: the seeded generator every random choice draws from.
//!
//! Modules import one way, lowest layer first (docs/architecture.md; `tests/layers.rs`).
//!
//! The crate depends on no runtime or HTTP library and reads no clock: time (`now`) and
//! randomness ([`Rng`]) are arguments, so every decision is replayable in a test. The gateway
//! does the IO around it: it reads requests, keeps the worker registry, swaps snapshots,
//! and turns [`Error`]s into HTTP responses.

mod assign;
mod breaker;
mod decision;
mod error;
mod health;
mod id_hash;
pub mod key;
mod options;
mod pin;
pub mod policy;
mod retry;
mod rng;
mod router;
mod shared;
pub use shared::IdleTimeoutOutcome;
mod sticky;
mod tokens;
mod worker;

pub use assign::AssignmentMode;
pub use breaker::{Breaker, BreakerConfig, BreakerState, Outcome, Transition};
pub use decision::{BodyPath, Branch, Decision, Lease, Leg, RouteRequest, RouterStats, SweepStep};
pub use error::Error;
pub use health::HealthTracker;
pub use id_hash::{IdBuildHasher, IdHasher};
pub use key::{
    BodyKeys, DEFAULT_KEY_SOURCES, HeaderList, HeaderSource, KeyConfig, KeySource, KeyText,
    MAX_KEY_BYTES, RoutingKey, Source, session_from_user_id,
};
pub use options::{DEFAULT_STICKY_INFLIGHT_CAP, RouterOptions};
pub use pin::EvictionReason;
pub use policy::{CostModel, PolicyKind, TtftConfig, policy_uses_routing_key};
pub use retry::is_retryable_status;
pub use rng::Rng;
pub use router::Router;
pub use tokens::{MAX_ROUTING_TOKENS, MAX_ROUTING_TOKENS_BYTES, parse_routing_tokens};
pub use worker::{
    DEFAULT_OVERLOAD_TOKEN_USAGE, DEFAULT_OVERLOAD_WAITING_REQUESTS, OverloadConfig, Screen,
    WorkerEntry, WorkerId, WorkerLoad, WorkerLoads, WorkerSnapshot, WorkerStats,
};

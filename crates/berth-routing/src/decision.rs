//! What a decision is made of and what it returns: the request's facts ([`RouteRequest`]),
//! the decision ([`Decision`], [`Branch`], [`Leg`]), the [`Lease`] that holds a request's
//! in-flight counts, and the counters the router reports.
//!
//! These types sit below both the router (`router.rs`) and the pinned path (`sticky.rs`), so
//! neither imports the other's types.

use std::sync::Arc;
use std::time::Duration;

use crate::key::{BodyKeys, HeaderSource, RoutingKey};
use crate::pin::PinTable;
use crate::policy::Ticket;
use crate::policy::ttft::cost::{FleetCost, TtftStats};
use crate::worker::{WorkerId, WorkerSnapshot, WorkerStats};

/// Which leg of a request a decision is for; prefill and decode pins are independent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Leg {
    /// A regular (non-disaggregated) request.
    #[default]
    Regular,
    /// The prefill leg in prefill/decode mode.
    Prefill,
    /// The decode leg in prefill/decode mode.
    Decode,
}

/// The branch a pinned decision took (the `branch` label of `smg_manual_policy_branch_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Branch {
    /// A remembered worker was available and took the request.
    OccupiedHit,
    /// The key was known but none of its workers was available: placed again.
    OccupiedMiss,
    /// A new key: placed and pinned.
    Vacant,
    /// The key hit the in-flight threshold on its worker: placed again.
    CapRespill,
    /// The request had no key: the policy placed it, nothing was pinned.
    NoRoutingId,
    /// No worker was available.
    NoHealthyWorkers,
    /// `ttft_aware` moved the key: staying was predicted clearly slower than recomputing the
    /// prompt on another worker.
    TtftMove,
}

impl Branch {
    /// Every branch, for metric initialisation.
    pub const ALL: [Self; 7] = [
        Self::OccupiedHit,
        Self::OccupiedMiss,
        Self::Vacant,
        Self::CapRespill,
        Self::NoRoutingId,
        Self::NoHealthyWorkers,
        Self::TtftMove,
    ];

    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OccupiedHit => "occupied_hit",
            Self::OccupiedMiss => "occupied_miss",
            Self::Vacant => "vacant",
            Self::CapRespill => "cap_respill",
            Self::NoRoutingId => "no_routing_id",
            Self::NoHealthyWorkers => "no_healthy_workers",
            Self::TtftMove => "ttft_move",
        }
    }
}

/// The facts of one request that routing may use.
#[derive(Clone, Copy)]
pub struct RouteRequest<'a> {
    /// The body `rid`, if the caller read the body and found one (for rerank, the first id).
    pub rid: Option<&'a str>,
    /// The request headers.
    pub headers: &'a dyn HeaderSource,
    /// The body's key fields (`prompt_cache_key`, ...), when the caller read the body.
    pub body: Option<&'a BodyKeys>,
    /// The model the request names (or the fleet's only model).
    pub model: Option<&'a str>,
    /// The leg.
    pub leg: Leg,
    /// Request text for `cache_aware`, when the body was read.
    pub text: Option<&'a str>,
    /// Routing-token hint for `cache_aware`, when valid.
    pub tokens: Option<&'a [u32]>,
    /// `text`'s chunk hashes, when the caller hashed the prompt itself (e.g. as it scanned the
    /// body); otherwise the router hashes `text` (or `tokens`) once per decision.
    pub prefix: Option<&'a crate::policy::PrefixHashes>,
    /// Workers already tried for this request (retries): treated as unavailable.
    pub exclude: &'a [WorkerId],
    /// Whether the response will be a stream (the body's `stream`), when the body was read;
    /// `ttft_aware` counts a streamed request as queued prefill until its first byte.
    pub stream: Option<bool>,
    /// The workers' loads as last polled (`GET /v1/loads`), when the gateway polls them:
    /// overload protection and `agentic` read them.
    pub loads: Option<&'a crate::worker::WorkerLoads>,
    /// The body was read only for cached-token feedback: the router's
    /// `request_body_path` answered [`BodyPath::FEEDBACK_REREAD`] for it (the hot path's
    /// pinned-session lookup already found it). The turn is then routed as the unread turn it
    /// would have been; only the prefix index sees its prompt.
    pub feedback_read: bool,
}

impl std::fmt::Debug for RouteRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteRequest")
            .field("rid", &self.rid)
            .field("model", &self.model)
            .field("leg", &self.leg)
            .field("exclude", &self.exclude)
            .finish_non_exhaustive()
    }
}

/// Where a request goes, and why.
#[derive(Debug)]
pub struct Decision {
    /// The chosen worker.
    pub worker: WorkerId,
    /// The pinned-path branch; `None` when the router keeps no pins.
    pub branch: Option<Branch>,
    /// The derived key, if any.
    pub key: Option<RoutingKey>,
    /// Holds the request's in-flight counts; drop it when the response ends.
    pub lease: Lease,
}

/// A request's claim on a worker's (and its key's) in-flight counts, released on drop.
#[derive(Debug)]
pub struct Lease {
    worker: WorkerId,
    stats: Option<Arc<WorkerStats>>,
    pin: Option<(Arc<PinTable>, u128)>,
    /// `ttft_aware`: the request's entry in the worker's prefill queue (its id and the queue),
    /// and the fleet's pooled cost model its first byte also teaches.
    prefill: Option<(u64, Arc<TtftStats>, Arc<FleetCost>)>,
    /// `--cache-feedback`: what the answer is compared with.
    ticket: Option<Box<Ticket>>,
    /// Whether the request counts in its worker's requests awaiting a first byte (overload
    /// protection's queue, while worker loads are polled) and has not had it yet.
    awaiting: bool,
}

impl Lease {
    pub(crate) fn new(
        worker: WorkerId,
        snap: &WorkerSnapshot,
        pin: Option<(Arc<PinTable>, u128)>,
    ) -> Self {
        let stats = snap.stats(worker).cloned();
        if let Some(s) = &stats {
            s.begin();
        }
        Self {
            worker,
            stats,
            pin,
            prefill: None,
            ticket: None,
            awaiting: false,
        }
    }

    /// Counts the request in its worker's requests awaiting a first byte until it has it (or
    /// ends): what overload protection counts as queued since the last load round.
    pub(crate) fn await_first_byte(&mut self) {
        if let (Some(s), false) = (&self.stats, self.awaiting) {
            s.await_first_byte();
            self.awaiting = true;
        }
    }

    fn first_byte_seen(&mut self) {
        if let (Some(s), true) = (&self.stats, self.awaiting) {
            s.first_byte_seen();
            self.awaiting = false;
        }
    }

    /// Attaches what the answer is compared with.
    pub(crate) fn set_ticket(&mut self, ticket: Option<Ticket>) {
        self.ticket = ticket.map(Box::new);
    }

    /// The pin's scoped key, when the request counts against one.
    pub(crate) fn pin_key(&self) -> Option<u128> {
        self.pin.as_ref().map(|(_, k)| *k)
    }

    /// Takes what the answer is to be compared with (`Router::observe_reported`); `None` when
    /// the router does not read answers.
    pub fn take_ticket(&mut self) -> Option<Ticket> {
        self.ticket.take().map(|t| *t)
    }

    /// Whether the answer is to be read for its cached tokens.
    pub fn wants_report(&self) -> bool {
        self.ticket.is_some()
    }

    /// Attaches the request's `ttft_aware` prefill-queue entry.
    pub(crate) fn with_prefill(
        mut self,
        entry: Option<(u64, Arc<TtftStats>)>,
        fleet: &Arc<FleetCost>,
    ) -> Self {
        self.prefill = entry.map(|(id, queue)| (id, queue, fleet.clone()));
        self
    }

    /// The worker this lease counts against.
    pub fn worker(&self) -> WorkerId {
        self.worker
    }

    /// The response's first byte reached the gateway at `now` (same epoch as `route`'s): under
    /// `ttft_aware` the request leaves its worker's prefill queue, and when `streamed` (the
    /// response is a stream, so the byte is the first token) its time to first byte teaches
    /// the worker's cost model. Calls after the first do nothing.
    pub fn first_byte(&mut self, now: Duration, streamed: bool) {
        self.first_byte_seen();
        if let Some((id, queue, fleet)) = self.prefill.take() {
            queue.first_byte(id, now.as_secs_f64() * 1000.0, streamed, &fleet);
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.first_byte_seen();
        if let Some((id, queue, _)) = self.prefill.take() {
            queue.end(id);
        }
        if let Some(s) = &self.stats {
            s.end();
        }
        if let Some((table, key)) = &self.pin {
            table.release(*key, self.worker);
        }
    }
}

/// Whether the gateway must buffer a request body, and the `reason` label for
/// `smg_router_request_body_path_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyPath {
    /// Read the whole body before routing.
    Buffered(&'static str),
    /// Stream the body to the worker unread.
    Streamed(&'static str),
    /// Hold the body's first frames until a streaming scan of its top-level members settles
    /// the routing key (a body source may name it), then stream the rest.
    Scanned(&'static str),
}

impl BodyPath {
    /// The path of a request that `ttft_aware`'s sticky hot path would have streamed unread,
    /// read only because its session's previous unread turn reported a shortfall
    /// (`--cache-feedback on`): the caller passes [`RouteRequest::feedback_read`] for it.
    pub const FEEDBACK_REREAD: Self = Self::Buffered("cache_feedback");

    /// The `path` label value.
    pub fn path(self) -> &'static str {
        match self {
            Self::Buffered(_) => "buffered",
            Self::Streamed(_) => "streamed",
            Self::Scanned(_) => "scanned",
        }
    }

    /// The `reason` label value.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Buffered(r) | Self::Streamed(r) | Self::Scanned(r) => r,
        }
    }
}

/// The outcome of one step of the idle sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepStep {
    /// Pins removed as idle in this step.
    pub removed_idle: usize,
    /// Whether this step completed a pass over the whole table.
    pub finished: bool,
}

/// Counters the gateway exports.
#[derive(Debug, Clone, PartialEq)]
pub struct RouterStats {
    /// Pins in the table (`smg_manual_policy_cache_entries`).
    pub pins: usize,
    /// Pins with their own idle period (`bind` with a timeout; `berth_session_idle_timeouts`).
    pub idle_timeouts: usize,
    /// Pins removed as idle.
    pub evicted_idle: u64,
    /// Pins removed at the `--max-sticky-keys` bound.
    pub evicted_capacity: u64,
    /// Remembered workers dropped because they left the fleet.
    pub evicted_worker_removed: u64,
    /// `ttft_aware`: the fleet's pooled cost model (what a worker without samples predicts
    /// with); `None` under other policies.
    pub ttft_fleet: Option<crate::policy::CostModel>,
    /// `cache_aware` and `ttft_aware`: what the prefix index holds and has evicted.
    pub prefix_index: Option<crate::policy::IndexStats>,
    /// `ttft_aware`: per worker, the cost model it predicts with and the prefill tokens it
    /// believes queued there (filled by [`crate::Router::ttft_figures`]; empty otherwise).
    pub ttft_workers: Vec<(WorkerId, crate::policy::CostModel, f64)>,
    /// `agentic`: what its session ledger holds; `None` under other policies.
    pub agentic_ledger: Option<crate::policy::LedgerStats>,
    /// Placements that left out an overloaded worker (worker overload protection).
    pub overload_vetoes: u64,
    /// Placements made while every candidate was overloaded (placed anyway).
    pub overload_all_over: u64,
    /// Requests refused because every candidate was overloaded (`--worker-overload-shed`).
    pub overload_shed: u64,
}

/// Where a decision may place a request after overload protection screened the candidates.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Placement<'a> {
    /// The candidates placement may use (every available candidate, or those under the
    /// overload thresholds).
    pub(crate) cands: &'a [WorkerId],
    /// Every candidate is overloaded and the policy does not weigh load itself: the
    /// least-loaded candidate takes a placement (SMG 1.13).
    pub(crate) least_loaded: bool,
}

/// Whole seconds of `now`, the pin table's time unit.
pub(crate) fn secs(now: Duration) -> u32 {
    u32::try_from(now.as_secs()).unwrap_or(u32::MAX)
}

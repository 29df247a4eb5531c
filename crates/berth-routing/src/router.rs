//! The router: one decision per request, combining key derivation, the policy and the pins.
//!
//! `route` is the whole decision and has no IO: the caller passes the request's facts, the
//! current worker snapshot, the time and a random generator. The pinned path lives in
//! `sticky.rs`; this file holds the public request/decision types and the keyless paths.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use crate::key::{HeaderSource, RoutingKey};
use crate::options::{Stickiness, Validated};
use crate::pin::{EvictionReason, PinTable};
use crate::policy::ttft::cost::FleetCost;
use crate::policy::{PickRequest, Policy, PolicyKind, PrefixHashes, policy_uses_routing_key};
use crate::{AssignmentMode, Error, Rng, RouterOptions, WorkerId, WorkerSnapshot, WorkerStats};

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
    pub prefix: Option<&'a PrefixHashes>,
    /// Workers already tried for this request (retries): treated as unavailable.
    pub exclude: &'a [WorkerId],
    /// Whether the response will be a stream (the body's `stream`), when the body was read;
    /// `ttft_aware` counts a streamed request as queued prefill until its first byte.
    pub stream: Option<bool>,
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
    /// `ttft_aware`: the request's entry in the worker's prefill queue, and the fleet's pooled
    /// cost model its first byte also teaches.
    prefill: Option<(u64, Arc<FleetCost>)>,
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
        }
    }

    /// Attaches the request's `ttft_aware` prefill-queue entry.
    pub(crate) fn with_prefill(mut self, id: Option<u64>, fleet: &Arc<FleetCost>) -> Self {
        self.prefill = id.map(|id| (id, fleet.clone()));
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
        if let (Some((id, fleet)), Some(s)) = (self.prefill.take(), &self.stats) {
            s.ttft
                .first_byte(id, now.as_secs_f64() * 1000.0, streamed, &fleet);
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(s) = &self.stats {
            if let Some((id, _)) = self.prefill.take() {
                s.ttft.end(id);
            }
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
}

impl BodyPath {
    /// The `path` label value.
    pub fn path(self) -> &'static str {
        match self {
            Self::Buffered(_) => "buffered",
            Self::Streamed(_) => "streamed",
        }
    }

    /// The `reason` label value.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Buffered(r) | Self::Streamed(r) => r,
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
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RouterStats {
    /// Pins in the table (`smg_manual_policy_cache_entries`).
    pub pins: usize,
    /// Pins removed as idle.
    pub evicted_idle: u64,
    /// Pins removed at the `--max-sticky-keys` bound.
    pub evicted_capacity: u64,
    /// Remembered workers dropped because they left the fleet.
    pub evicted_worker_removed: u64,
    /// `ttft_aware`: the fleet's pooled cost model (what a worker without samples predicts
    /// with); `None` under other policies.
    pub ttft_fleet: Option<crate::CostModel>,
    /// `cache_aware` and `ttft_aware`: what the prefix index holds and has evicted.
    pub prefix_index: Option<crate::policy::IndexStats>,
}

/// The routing decision maker. Shared by every request (`&self`), cheap to call.
#[derive(Debug)]
pub struct Router {
    pub(crate) cfg: Validated,
    pub(crate) policy: Policy,
    pub(crate) pins: Arc<PinTable>,
}

impl Router {
    /// Validates `opts` and builds the router.
    pub fn new(opts: &RouterOptions) -> Result<Self, Error> {
        let cfg = opts.validate()?;
        Ok(Self {
            policy: Policy::new(cfg.policy, cfg.cache, cfg.ttft),
            pins: Arc::new(PinTable::new(cfg.max_sticky_keys)),
            cfg,
        })
    }

    /// The configured policy.
    pub fn policy(&self) -> PolicyKind {
        self.cfg.policy
    }

    /// The effective assignment mode.
    pub fn assignment_mode(&self) -> AssignmentMode {
        self.cfg.mode
    }

    /// Whether this router keeps pins (`manual`, or the override on a non-hashing policy):
    /// then every decision reports a branch, and a refusal for lack of workers counts as
    /// `no_healthy_workers`.
    pub fn keeps_pins(&self) -> bool {
        self.cfg.stickiness != Stickiness::None
    }

    /// Whether the routing-key override is on (every body must be read for its `rid`).
    pub fn override_on(&self) -> bool {
        self.cfg.keys.override_on()
    }

    /// The eviction sweep period; `None` when eviction is disabled.
    pub fn eviction_interval(&self) -> Option<Duration> {
        (self.keeps_pins() && self.cfg.max_idle_secs > 0 && self.cfg.eviction_interval_secs > 0)
            .then(|| Duration::from_secs(self.cfg.eviction_interval_secs))
    }

    /// Whether the body must be read before routing. `tokens_hint_valid`: the request carries
    /// a valid `x-smg-routing-tokens` header; `multi_model`: workers serve more than one model,
    /// so the body's `model` picks the candidates.
    pub fn body_path(&self, tokens_hint_valid: bool, multi_model: bool) -> BodyPath {
        let text_policy = matches!(
            self.cfg.policy,
            PolicyKind::CacheAware | PolicyKind::TtftAware
        );
        if self.override_on() {
            BodyPath::Buffered("routing_key_override")
        } else if text_policy && tokens_hint_valid && !multi_model {
            BodyPath::Streamed("routing_tokens_hint")
        } else if text_policy && multi_model {
            BodyPath::Buffered("model_selection")
        } else if self.cfg.policy == PolicyKind::TtftAware {
            BodyPath::Buffered("ttft_text")
        } else if self.cfg.policy == PolicyKind::CacheAware {
            if tokens_hint_valid && !multi_model {
                BodyPath::Streamed("routing_tokens_hint")
            } else if tokens_hint_valid {
                BodyPath::Buffered("model_selection")
            } else {
                BodyPath::Buffered("cache_aware_text")
            }
        } else if multi_model {
            BodyPath::Buffered("model_selection")
        } else {
            BodyPath::Streamed("not_needed")
        }
    }

    /// [`Self::body_path`], plus `ttft_aware`'s sticky hot path: a request whose header key is
    /// pinned to an available worker whose queue is not clearly worse than the others' streams
    /// its body unread (`Streamed("ttft_pinned")`); the body is read only when the decision
    /// needs the text (a new key, or a pin that may move).
    pub fn request_body_path(
        &self,
        headers: &dyn HeaderSource,
        tokens_hint_valid: bool,
        multi_model: bool,
        snap: &WorkerSnapshot,
        now: Duration,
    ) -> BodyPath {
        let path = self.body_path(tokens_hint_valid, multi_model);
        if path == BodyPath::Buffered("ttft_text") && self.ttft_pinned_fine(headers, snap, now) {
            BodyPath::Streamed("ttft_pinned")
        } else {
            path
        }
    }

    fn ttft_pinned_fine(
        &self,
        headers: &dyn HeaderSource,
        snap: &WorkerSnapshot,
        now: Duration,
    ) -> bool {
        let (Some(t), Some(key)) = (self.policy.ttft(), self.cfg.keys.derive(None, headers)) else {
            return false;
        };
        let model = snap.only_model().map(|m| &**m);
        let cands = snap.candidates(model);
        let scoped = crate::sticky::scoped_key(&key.key, model, Leg::Regular);
        let pinned = {
            let mut shard = self.pins.lock(scoped);
            let Some(e) = shard.get_mut(scoped) else {
                return false;
            };
            e.workers.into_iter().find(|w| {
                *w != crate::pin::slots::NONE && cands.binary_search(&WorkerId(*w)).is_ok()
            })
        };
        pinned.is_some_and(|p| t.pinned_is_fine(snap, cands, WorkerId(p), now))
    }

    /// Decides where one request goes. `now` is monotonic time since an epoch the caller keeps
    /// fixed (e.g. the gateway's start).
    pub fn route(
        &self,
        req: &RouteRequest<'_>,
        snap: &WorkerSnapshot,
        now: Duration,
        rng: &mut Rng,
    ) -> Result<Decision, Error> {
        let key = self.cfg.keys.derive(req.rid, req.headers);
        if key.is_none() && policy_uses_routing_key(self.cfg.policy) && !self.cfg.allow_keyless {
            return Err(Error::MissingRoutingKey);
        }
        let all = snap.candidates(req.model);
        let cands: Cow<'_, [WorkerId]> = if req.exclude.is_empty() {
            Cow::Borrowed(all)
        } else {
            Cow::Owned(
                all.iter()
                    .copied()
                    .filter(|w| !req.exclude.contains(w))
                    .collect(),
            )
        };
        if cands.is_empty() {
            return Err(Error::NoAvailableWorkers);
        }
        let text_bytes = req
            .tokens
            .map(tokens_as_bytes)
            .map(Cow::Owned)
            .or_else(|| req.text.map(|t| Cow::Borrowed(t.as_bytes())));
        let text = text_bytes.as_deref();
        // the prompt is hashed once, here, before any lock; every policy step takes the hashes
        let hashed = match (req.prefix, text) {
            (Some(_), _) => None,
            (None, Some(t)) if self.policy.uses_prefix_index() => Some(PrefixHashes::of(t)),
            _ => None,
        };
        let prefix = req.prefix.or(hashed.as_ref());
        if self.cfg.stickiness == Stickiness::None || key.is_none() {
            let pick = PickRequest {
                key: key.as_ref().map(|k| k.key.as_str()),
                model: req.model,
                text,
                prefix,
                tokens_hint: req.tokens.is_some(),
                stream: req.stream,
                now,
            };
            if let Some(t) = self.policy.ttft() {
                let eval = t.evaluate(&pick, snap, &cands);
                let worker = t.place(&eval, rng).ok_or(Error::NoAvailableWorkers)?;
                let id = t.commit(&pick, &eval, snap, worker);
                return Ok(Decision {
                    worker,
                    branch: Some(Branch::NoRoutingId),
                    key,
                    lease: Lease::new(worker, snap, None).with_prefill(id, t.fleet()),
                });
            }
            let worker = self
                .policy
                .pick(&pick, snap, &cands, rng)
                .ok_or(Error::NoAvailableWorkers)?;
            let branch = self.keeps_pins().then_some(Branch::NoRoutingId);
            return Ok(Decision {
                worker,
                branch,
                key,
                lease: Lease::new(worker, snap, None),
            });
        }
        match key {
            Some(key) => self.route_pinned(req, text, prefix, key, snap, &cands, now, rng),
            None => Err(Error::NoAvailableWorkers),
        }
    }

    /// Runs one step of the idle sweep (one shard). Call it every eviction interval, looping
    /// until `finished`, yielding between steps.
    pub fn sweep_step(&self, now: Duration, snap: &WorkerSnapshot) -> SweepStep {
        let (removed_idle, finished) =
            self.pins
                .sweep_step(secs(now), self.cfg.max_idle_secs, snap);
        SweepStep {
            removed_idle,
            finished,
        }
    }

    /// Bytes held by the pin table (for capacity planning and the memory benchmark).
    pub fn pin_memory_bytes(&self) -> usize {
        self.pins.memory_bytes()
    }

    /// Current counters.
    pub fn stats(&self) -> RouterStats {
        RouterStats {
            pins: self.pins.len(),
            evicted_idle: self.pins.evictions(EvictionReason::Idle),
            evicted_capacity: self.pins.evictions(EvictionReason::Capacity),
            evicted_worker_removed: self.pins.evictions(EvictionReason::WorkerRemoved),
            ttft_fleet: self.policy.ttft().map(|t| t.fleet().model()),
            prefix_index: self.policy.index_stats(),
        }
    }
}

pub(crate) fn secs(now: Duration) -> u32 {
    u32::try_from(now.as_secs()).unwrap_or(u32::MAX)
}

fn tokens_as_bytes(tokens: &[u32]) -> Vec<u8> {
    tokens.iter().flat_map(|t| t.to_le_bytes()).collect()
}

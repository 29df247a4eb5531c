//! The router: one decision per request, combining key derivation, the policy and the pins.
//!
//! `route` is the whole decision and has no IO: the caller passes the request's facts, the
//! current worker snapshot, the time and a random generator. The pinned path lives in
//! `sticky.rs` and the request/decision types in `decision.rs`; this file holds the keyless
//! paths and hands keyed requests to the pinned path.
//! `router/feedback.rs`: the ticket a decision's lease carries for `--cache-feedback`, and the
//! answer's report compared with it; `router/overload.rs`: worker overload protection's
//! placement candidates and counters.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::sync::Arc;
use std::time::Duration;

use crate::assign::AssignmentMode;
use crate::decision::{
    BodyPath, Branch, Decision, Lease, Leg, Placement, RouteRequest, RouterStats, SweepStep, secs,
};
use crate::error::Error;
use crate::key::HeaderSource;
use crate::options::{RouterOptions, Stickiness, Validated};
use crate::pin::{EvictionReason, PinTable};
use crate::policy::feedback::Feedback;
use crate::policy::{
    PickRequest, Policy, PolicyKind, PrefixHashes, Prior, policy_uses_routing_key,
};
use crate::rng::Rng;
use crate::sticky::{Pinned, scoped_key};
use crate::worker::{WorkerId, WorkerSnapshot};

mod feedback;
mod overload;

use overload::OverloadCounts;

/// The routing decision maker. Shared by every request (`&self`), cheap to call.
#[derive(Debug)]
pub struct Router {
    pub(crate) cfg: Validated,
    pub(crate) policy: Policy,
    pub(crate) pins: Arc<PinTable>,
    pub(crate) feedback: Feedback,
    pub(crate) overload: OverloadCounts,
}

impl Router {
    /// Validates `opts` and builds the router.
    pub fn new(opts: &RouterOptions) -> Result<Self, Error> {
        let cfg = opts.validate()?;
        let policy = Policy::new(cfg.policy, cfg.cache, cfg.ttft);
        Ok(Self {
            feedback: Feedback::new(
                cfg.feedback,
                &policy,
                cfg.policy == PolicyKind::TtftAware,
                cfg.cache.max_tree_size,
            ),
            policy,
            pins: Arc::new(PinTable::new(cfg.max_sticky_keys)),
            cfg,
            overload: OverloadCounts::default(),
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

    /// Whether a request's key changes its placement (a key policy, or pins kept).
    pub fn uses_keys(&self) -> bool {
        policy_uses_routing_key(self.cfg.policy) || self.keeps_pins()
    }

    /// Whether Responses chains key requests: keys route them and `previous_response_id` is in
    /// `--routing-key-sources` (the gateway then remembers each response id's key).
    pub fn follows_chains(&self) -> bool {
        self.uses_keys() && self.cfg.keys.has_previous_response_id()
    }

    /// Whether `nvext.session_control` acts on pins: keys route requests and
    /// `nvext_session_id` is in `--routing-key-sources` (the gateway then watches a streamed
    /// body for it).
    pub fn watches_session_control(&self) -> bool {
        self.uses_keys() && self.cfg.keys.has_nvext_session_id()
    }

    /// Whether the body members a streaming scan has seen settle the request's key (see
    /// [`crate::KeyConfig::body_settled`]).
    pub fn body_key_settled(
        &self,
        body: Option<&crate::BodyKeys>,
        headers: &dyn HeaderSource,
        seen: &dyn Fn(&crate::key::Source) -> bool,
    ) -> bool {
        self.cfg.keys.body_settled(body, headers, seen)
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
        let text_policy = self.cfg.policy.reads_prompt();
        if self.override_on() {
            BodyPath::Buffered("routing_key_override")
        } else if text_policy && tokens_hint_valid && !multi_model {
            BodyPath::Streamed("routing_tokens_hint")
        } else if text_policy && multi_model {
            BodyPath::Buffered("model_selection")
        } else if self.cfg.policy.predicts_ttft() {
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
        // A key only a body source may name: scan the body's members as it arrives (only when
        // keys route the request).
        if matches!(path, BodyPath::Streamed(_))
            && self.uses_keys()
            && self.cfg.keys.needs_body(headers)
        {
            return BodyPath::Scanned("routing_key_body");
        }
        if path != BodyPath::Buffered("ttft_text") {
            return path;
        }
        match self.pinned_streams_unread(headers, snap, now) {
            // a session whose last unread turn found less cached than its previous one left is
            // read again, so the index learns what its worker lost (`--cache-feedback on`);
            // the caller passes `RouteRequest::feedback_read` for it, so `route` need not look
            // the pin up again
            Some(scoped) if self.feedback.session_short(scoped) => BodyPath::FEEDBACK_REREAD,
            Some(_) => BodyPath::Streamed("ttft_pinned"),
            None => path,
        }
    }

    /// The scoped key of a request whose header key is pinned to an available worker whose
    /// queue is not clearly worse than the others' (and, under `agentic`, not due for the
    /// turn-boundary rebalance): the hot path's condition, before the feedback's re-read.
    fn pinned_streams_unread(
        &self,
        headers: &dyn HeaderSource,
        snap: &WorkerSnapshot,
        now: Duration,
    ) -> Option<u128> {
        let (Some(t), Some(key)) = (self.policy.ttft(), self.cfg.keys.derive(None, headers)) else {
            return None;
        };
        let model = snap.only_model().map(|m| &**m);
        let cands = snap.candidates(model);
        let scoped = scoped_key(&key.key, model, Leg::Regular);
        let pinned = {
            let mut shard = self.pins.lock(scoped);
            let e = shard.get_mut(scoped)?;
            e.workers.into_iter().find(|w| {
                *w != crate::pin::slots::NONE && cands.binary_search(&WorkerId(*w)).is_ok()
            })
        };
        // (`agentic`: a turn on a worker over its share of the fleet's turns is read, so the
        // turn-boundary rebalance can see it)
        pinned
            .is_some_and(|p| {
                t.pinned_is_fine(snap, cands, WorkerId(p), now)
                    && !t.rebalance_due(cands, WorkerId(p), key.key.as_bytes(), model)
            })
            .then_some(scoped)
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
        let key = self
            .cfg
            .keys
            .derive_with_body(req.rid, req.body, req.headers);
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
        // worker overload protection: placement leaves out workers over the thresholds
        let predicts = self.cfg.policy.predicts_ttft();
        let screen = self
            .cfg
            .overload
            .screen(&cands, req.loads, !predicts, |w| snap.flight(w));
        let place_on = self.overload.place_on(&screen, &cands, predicts)?;
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
        let prior = (self.feedback.reads() && prefix.is_some()).then(OnceCell::new);
        // (the gateway passes the prompt's hashes, not its text: either means the body was read)
        // `ttft_aware` decides such a turn with its text (its uncached tokens in the queue's
        // estimate, a move when the pinned worker lost the history), which measured better
        // (docs/benchmarks.md, session 5). `agentic` decided it as the unread turn it would
        // have been (priced from its text, a re-read turn moved sessions and sized its session
        // ledger from a history the index never saw); since session 7 it does not re-read at
        // all (`Feedback::rereads`), so this is false for every policy today.
        let feedback_read = req.feedback_read
            && prefix.is_some()
            && self.feedback.rereads()
            && self.cfg.policy == PolicyKind::Agentic;
        let mut decision = self.decide(
            req,
            text,
            prefix,
            prior.as_ref(),
            feedback_read,
            key,
            snap,
            &cands,
            place_on,
            now,
            rng,
        )?;
        self.overload
            .count(&screen, decision.branch, decision.worker);
        if req.loads.is_some() {
            // overload protection counts it as queued until its first byte (`worker/load.rs`)
            decision.lease.await_first_byte();
        }
        let ticket = self.ticket(
            prior,
            prefix,
            req.tokens.is_some(),
            decision.worker,
            &decision.lease,
        );
        decision.lease.set_ticket(ticket);
        Ok(decision)
    }

    #[allow(clippy::too_many_arguments)]
    fn decide(
        &self,
        req: &RouteRequest<'_>,
        text: Option<&[u8]>,
        prefix: Option<&PrefixHashes>,
        prior: Option<&OnceCell<Prior>>,
        feedback_read: bool,
        key: Option<crate::key::RoutingKey>,
        snap: &WorkerSnapshot,
        cands: &[WorkerId],
        place_on: Placement<'_>,
        now: Duration,
        rng: &mut Rng,
    ) -> Result<Decision, Error> {
        if self.cfg.stickiness == Stickiness::None || key.is_none() {
            let pick = PickRequest {
                key: key.as_ref().map(|k| k.key.as_bytes()),
                model: req.model,
                text,
                prefix,
                tokens_hint: req.tokens.is_some(),
                stream: req.stream,
                now,
                prior,
                feedback_read: false,
            };
            if let Some(t) = self.policy.ttft() {
                let eval = t.evaluate(&pick, snap, place_on.cands);
                let worker = t.place(&eval, rng).ok_or(Error::NoAvailableWorkers)?;
                let id = t.commit(&pick, &eval, snap, worker);
                return Ok(Decision {
                    worker,
                    branch: Some(Branch::NoRoutingId),
                    key,
                    lease: Lease::new(worker, snap, None).with_prefill(id, t.fleet()),
                });
            }
            let worker = if place_on.least_loaded {
                crate::policy::simple::least_loaded(snap, place_on.cands, rng)
            } else {
                self.policy
                    .pick(&pick, snap, place_on.cands, rng)
                    .ok_or(Error::NoAvailableWorkers)?
            };
            let branch = self.keeps_pins().then_some(Branch::NoRoutingId);
            return Ok(Decision {
                worker,
                branch,
                key,
                lease: Lease::new(worker, snap, None),
            });
        }
        match key {
            Some(key) => Pinned {
                cfg: &self.cfg,
                policy: &self.policy,
                pins: &self.pins,
            }
            .route(
                req,
                text,
                prefix,
                prior,
                feedback_read,
                key,
                snap,
                cands,
                place_on,
                now,
                rng,
            ),
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

    /// `ttft_aware`: per worker of `snap`, the cost model it predicts with (the fleet's, times
    /// the worker's measured speed) and its estimate of the prefill tokens queued there at
    /// `now` (exported as metrics); empty under other policies.
    pub fn ttft_figures(
        &self,
        snap: &WorkerSnapshot,
        now: Duration,
    ) -> Vec<(WorkerId, crate::policy::CostModel, f64)> {
        let Some(t) = self.policy.ttft() else {
            return Vec::new();
        };
        snap.entries()
            .iter()
            .map(|e| {
                let (model, queued) = t.worker_figures(&e.stats, now);
                (e.id, model, queued)
            })
            .collect()
    }

    /// Current counters.
    pub fn stats(&self) -> RouterStats {
        RouterStats {
            pins: self.pins.len(),
            idle_timeouts: self.pins.timeouts.len(),
            evicted_idle: self.pins.evictions(EvictionReason::Idle),
            evicted_capacity: self.pins.evictions(EvictionReason::Capacity),
            evicted_worker_removed: self.pins.evictions(EvictionReason::WorkerRemoved),
            ttft_fleet: self.policy.ttft().map(|t| t.fleet().model()),
            prefix_index: self.policy.index_stats(),
            ttft_workers: Vec::new(),
            agentic_ledger: self.policy.ledger_stats(),
            overload_vetoes: self.overload.totals().0,
            overload_all_over: self.overload.totals().1,
            overload_shed: self.overload.totals().2,
        }
    }
}

fn tokens_as_bytes(tokens: &[u32]) -> Vec<u8> {
    tokens.iter().flat_map(|t| t.to_le_bytes()).collect()
}

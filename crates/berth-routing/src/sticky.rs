//! The pinned path of a decision: reuse, failover, the in-flight threshold and new keys
//! (SPEC.md section 2), for `manual` and the override.
//!
//! The whole decision for a key happens under its shard's lock, placement included. That is
//! what makes racing first requests of a new key converge: the second finds the first's pin
//! (SMG's delegate path is last-writer-wins and can split them).

use xxhash_rust::xxh3::xxh3_128;

use std::sync::Arc;

use crate::assign::AssignmentMode;
use crate::decision::{Branch, Decision, Lease, Leg, Placement, RouteRequest, secs};
use crate::error::Error;
use crate::key::RoutingKey;
use crate::options::{Stickiness, Validated};
use crate::pin::slots::{Entry, NONE};
use crate::pin::{EvictionReason, PinTable, bump, forget_removed, set_workers};
use crate::policy::{PickRequest, Policy, PrefixHashes};
use crate::rng::Rng;
use crate::worker::{WorkerId, WorkerSnapshot};

/// Hashes the scoped key: (stickiness scope, leg, model, key). The manual map is not scoped
/// by model; the override's pins are.
pub(crate) fn scoped_key(key: &str, model: Option<&str>, leg: Leg) -> u128 {
    let model = model.unwrap_or("");
    let len = 2 + 4 + model.len() + key.len();
    // the usual key and model fit a short buffer, zeroed in a few stores (not a memset of 384
    // bytes per request); the longest ones a larger one, or the heap
    if len <= SHORT_SCOPE {
        let mut short = [0u8; SHORT_SCOPE];
        return hash_scoped(&mut short[..len], key, model, leg);
    }
    let mut stack = [0u8; 384];
    let mut heap = Vec::new();
    let buf: &mut [u8] = if len <= stack.len() {
        &mut stack[..len]
    } else {
        heap.resize(len, 0);
        &mut heap
    };
    hash_scoped(buf, key, model, leg)
}

/// The scoped keys [`scoped_key`] writes to a short buffer.
const SHORT_SCOPE: usize = 64;

/// [`scoped_key`]'s hash, written to `buf` (its exact length).
fn hash_scoped(buf: &mut [u8], key: &str, model: &str, leg: Leg) -> u128 {
    buf[0] = b'k';
    buf[1] = leg as u8;
    buf[2..6].copy_from_slice(&(model.len() as u32).to_le_bytes());
    buf[6..6 + model.len()].copy_from_slice(model.as_bytes());
    buf[6 + model.len()..].copy_from_slice(key.as_bytes());
    xxh3_128(buf) | 1
}

/// What the pinned path reads of the router: its settings, its policy and its pins.
pub(crate) struct Pinned<'a> {
    pub(crate) cfg: &'a Validated,
    pub(crate) policy: &'a Policy,
    pub(crate) pins: &'a Arc<PinTable>,
}

impl Pinned<'_> {
    /// The decision for a request with a routing key.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn route(
        &self,
        req: &RouteRequest<'_>,
        text: Option<&[u8]>,
        prefix: Option<&PrefixHashes>,
        prior: Option<&std::cell::OnceCell<crate::policy::Prior>>,
        feedback_read: bool,
        key: RoutingKey,
        snap: &WorkerSnapshot,
        cands: &[WorkerId],
        place_on: Placement<'_>,
        now: std::time::Duration,
        rng: &mut Rng,
    ) -> Result<Decision, Error> {
        let scope_model = if self.cfg.stickiness.scoped_by_model() {
            req.model
        } else {
            None
        };
        let scoped = scoped_key(&key.key, scope_model, req.leg);
        let now_s = secs(now);
        let cap = self.cfg.inflight_cap;
        let threshold = self.cfg.stickiness == Stickiness::Override;
        let delegate_failover =
            self.cfg.stickiness.scoped_by_model() && self.cfg.mode == AssignmentMode::Delegate;
        let pick = PickRequest {
            key: Some(&key.key),
            model: req.model,
            text,
            prefix,
            tokens_hint: req.tokens.is_some(),
            stream: req.stream,
            now,
            prior,
            feedback_read,
        };
        // ttft_aware predicts every candidate once; placement, the move check and the
        // request's queue entry all use that one evaluation.
        let ttft = self.policy.ttft();
        let eval = ttft.map(|t| t.evaluate(&pick, snap, cands));
        // overload protection: placement and moves use only the screened candidates (a pinned
        // turn still reaches its own worker)
        let screened = |keep: Option<WorkerId>| {
            eval.as_ref().map(|e| {
                if place_on.cands.len() == cands.len() {
                    std::borrow::Cow::Borrowed(e)
                } else {
                    std::borrow::Cow::Owned(e.restricted(|w| {
                        Some(w) == keep || place_on.cands.binary_search(&w).is_ok()
                    }))
                }
            })
        };
        // `agentic`: a sub-agent continuing a live session's conversation is a turn of it, and
        // reaches the parent's worker as a pinned turn does (the move rule decides)
        let parent = eval.as_ref().and_then(|e| e.parent);
        let place = |rng: &mut Rng| {
            let placed = match (ttft, screened(parent), self.cfg.mode) {
                (Some(t), Some(e), AssignmentMode::Delegate) => t.place(&e, rng),
                _ if place_on.least_loaded => Some(crate::policy::simple::least_loaded(
                    snap,
                    place_on.cands,
                    rng,
                )),
                _ => self
                    .cfg
                    .mode
                    .pick(self.policy, &pick, snap, place_on.cands, rng),
            };
            placed.ok_or(Error::NoAvailableWorkers)
        };
        // A pinned key whose body was read may move (ttft_aware), at most once per interval.
        let may_move = match (ttft, &eval) {
            (Some(t), Some(e)) if e.with_text => Some(t),
            _ => None,
        };

        let mut shard = self.pins.lock(scoped);
        let may_move = may_move.filter(|t| {
            !shard
                .moves
                .recent(scoped, now_s, t.config().move_interval_secs)
        });
        let (worker, branch) = match shard.get_mut_with_orphans(scoped) {
            None => {
                let w = place(rng)?;
                let mut entry = Entry::new(scoped, w.0, now_s);
                // requests of an earlier entry of this key may still be in flight on `w`
                entry.in_flight[0] = shard.orphans.take(scoped, w.0).saturating_add(1);
                let evicted =
                    self.pins
                        .insert_bounded(self.pins.shard_of(scoped), &mut shard, entry, || {
                            rng.next_u64()
                        });
                if let Some(s) = evicted
                    .and_then(|e| e.primary())
                    .and_then(|p| snap.stats(WorkerId(p)))
                {
                    s.pin_removed();
                }
                if let Some(s) = snap.stats(w) {
                    s.pin_added();
                }
                (w, Branch::Vacant)
            }
            Some((e, orphans)) => {
                e.last_used = now_s;
                let gone = forget_removed(e, snap);
                self.pins
                    .count_eviction(EvictionReason::WorkerRemoved, gone);
                let available = |w: u32| w != NONE && cands.binary_search(&WorkerId(w)).is_ok();
                match (0..2).find(|&i| available(e.workers[i])) {
                    Some(i) if threshold && e.in_flight[i] >= cap => {
                        let pinned = e.workers[i];
                        let p = place(rng)?;
                        if p.0 != pinned {
                            let p_load = e
                                .slot_of(p.0)
                                .map_or_else(|| orphans.get(scoped, p.0), |j| e.in_flight[j]);
                            if p_load < cap {
                                set_workers(e, [p.0, pinned], orphans, snap);
                            }
                        }
                        if e.slot_of(p.0).is_some() {
                            bump(e, p);
                        } else {
                            // the pin stayed; the request still counts on `p`
                            orphans.stash(scoped, p.0, 1);
                        }
                        (p, Branch::CapRespill)
                    }
                    Some(i) => {
                        let pinned = WorkerId(e.workers[i]);
                        let target = may_move
                            .zip(screened(Some(pinned)))
                            .and_then(|(t, ev)| t.move_target(&ev, pinned, rng));
                        match target {
                            Some(to) => {
                                // the new worker becomes primary, the old one its failover
                                set_workers(e, [to.0, pinned.0], orphans, snap);
                                bump(e, to);
                                (to, Branch::TtftMove)
                            }
                            None => {
                                e.in_flight[i] = e.in_flight[i].saturating_add(1);
                                (pinned, Branch::OccupiedHit)
                            }
                        }
                    }
                    None => {
                        let p = place(rng)?;
                        let w = e.workers;
                        if delegate_failover || w[0] == NONE {
                            // The policy's pick is the new primary; the old primary is kept
                            // as the failover candidate.
                            set_workers(e, [p.0, w[0]], orphans, snap);
                        } else if w[1] == NONE {
                            // Added behind the existing worker, which stays first.
                            set_workers(e, [w[0], p.0], orphans, snap);
                        } else {
                            // Two remembered: the older is dropped.
                            set_workers(e, [w[1], p.0], orphans, snap);
                        }
                        bump(e, p);
                        (p, Branch::OccupiedMiss)
                    }
                }
            }
        };
        if branch == Branch::TtftMove {
            let interval = ttft.map_or(0, |t| t.config().move_interval_secs);
            shard.moves.record(scoped, now_s, interval);
        }
        drop(shard);
        let mut lease = Lease::new(worker, snap, Some((self.pins.clone(), scoped)));
        if let (Some(t), Some(e)) = (ttft, &eval) {
            lease = lease.with_prefill(t.commit(&pick, e, snap, worker), t.fleet());
        }
        Ok(Decision {
            worker,
            branch: Some(branch),
            key: Some(key),
            lease,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests;

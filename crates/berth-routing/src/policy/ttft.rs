//! `ttft_aware` (berth's own): place each request where its predicted time to first token is
//! least, and move a pinned conversation only when staying costs clearly more than
//! recomputing its whole prompt elsewhere.
//!
//! Per candidate worker `w`, for a request of `P` prompt tokens (the `x-smg-routing-tokens`
//! count, else text bytes / `chars_per_token`):
//!
//! ```text
//! own(w)  = P - tokens of the prompt's prefix w probably holds (the prefix index)
//! TTFT(w) = speed(w) x (base + per_token x (queued(w) + own(w)) + per_decode x decoding(w))
//! ```
//!
//! `queued` and `decoding` come from what this gateway sent; the three coefficients are the
//! fleet's, learned from observed first-byte times, and `speed` is a worker's measured deviation
//! from them (see `ttft/cost.rs`). A worker's share of the prefix index is bounded by the KV
//! capacity it reports. Placement (new keys, keyless requests): the worker holding the most of
//! the prompt unless it is clearly slower than the fastest (the move rule below), else the
//! fastest; near-ties go to the least cached worker, then at random, never by worker order.
//!
//! Keys: `ttft_aware` pins keyed requests itself (header keys, and the body `rid` under
//! `--routing-key-override`), scoped by model and leg. A pinned turn stays on its worker unless
//! `TTFT(pinned) > move_factor x TTFT(best other) + move_margin_ms`, where the other worker's
//! prediction includes recomputing everything of this prompt it does not hold; then the pin
//! moves there (the old worker kept as failover), at most once per `move_interval_secs` per
//! key. Keyless requests are placed by prediction, unpinned, never refused.
//!
//! Without the body (a pinned request whose worker is fine streams unread), the check that
//! decides "fine" compares queues only: `TTFT(pinned, own = 0) <= move_factor x TTFT(other,
//! own = 0) + margin` for every other candidate. A pinned worker holds at least as much of its
//! conversation as any other, so when its queue is not worse, no move could pay off.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::PickRequest;
use super::cache_aware::CacheAwareConfig;
use super::prefix_index::{IndexStats, SharedIndex};
use crate::{Rng, WorkerId, WorkerSnapshot, WorkerStats};

mod agentic;
pub mod cost;
mod evaluation;
pub mod ledger;
mod queue;

pub use cost::CostModel;
use cost::{FleetCost, Prediction, Streaming, TtftStats};
pub(crate) use evaluation::{Estimate, Evaluation};
use ledger::{Ledger, LedgerStats};

/// Predictions this close to the best (absolute, ms, or relative) count as ties: a difference
/// no client could notice must not decide, or an idle fleet would send everything to whichever
/// worker measured a hair faster.
const TIE_MS: f64 = 1.0;
const TIE_REL: f64 = 0.01;

/// `ttft_aware` settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TtftConfig {
    /// Starting cost model of every worker (`--ttft-base-ms`, `--ttft-prefill-ms-per-1k-tokens`,
    /// `--ttft-decode-ms-per-request`).
    pub prior: CostModel,
    /// Characters per token when the prompt is text (`--ttft-chars-per-token`).
    pub chars_per_token: f64,
    /// A pin moves only when staying is predicted to cost more than this factor times the best
    /// alternative (`--ttft-move-factor`, >= 1)...
    pub move_factor: f64,
    /// ...plus this margin (`--ttft-move-margin-ms`).
    pub move_margin_ms: f64,
    /// A key's pin moves at most once per this period (`--ttft-move-interval-secs`).
    pub move_interval_secs: u32,
}

impl Default for TtftConfig {
    fn default() -> Self {
        Self {
            prior: CostModel {
                base_ms: 10.0,
                per_token_ms: 0.1,
                per_decode_ms: 0.5,
            },
            chars_per_token: 4.0,
            move_factor: 2.0,
            move_margin_ms: 200.0,
            move_interval_secs: 30,
        }
    }
}

/// What the session ledger says for one request (`TtftAware::ledger_view`).
#[derive(Debug, Default)]
struct LedgerView {
    /// Per candidate, the tokens its live sessions hold, the turns per second they send and
    /// how many they are.
    sets: Vec<(f64, f64, u32)>,
    /// The request's session's turns per second and turns taken ((0, 0): new or keyless).
    session_rate: (f64, u32),
    /// The turns a keyed request's session is expected to send after this one (0: keyless).
    future_turns: f64,
    /// A continuing turn's uncached tokens the engines reported, if any.
    turn_tokens: Option<f64>,
    /// The typical continuing turn: the tokens it adds to its prompt, if reported.
    turn_growth: Option<f64>,
    /// A new session's parent's worker (`Evaluation::parent`).
    parent: Option<WorkerId>,
}

/// The policy: the prefix index per model and the settings.
#[derive(Debug)]
pub(crate) struct TtftAware {
    cfg: TtftConfig,
    /// Share of the prompt a worker must hold to count as its holder (`--cache-threshold`).
    cache_threshold: f64,
    index: SharedIndex,
    fleet: Arc<FleetCost>,
    /// `agentic`'s session ledger (`None`: plain `ttft_aware`).
    ledger: Option<Box<Mutex<Ledger>>>,
}

fn ms(now: Duration) -> f64 {
    now.as_secs_f64() * 1000.0
}

impl TtftAware {
    pub(crate) fn new(cfg: TtftConfig, cache: CacheAwareConfig) -> Self {
        Self {
            cfg,
            cache_threshold: cache.cache_threshold,
            index: SharedIndex::new(cache.index_budget_bytes, cache.max_tree_size),
            fleet: Arc::new(FleetCost::new(cfg.prior)),
            ledger: None,
        }
    }

    /// The `agentic` policy: `ttft_aware`'s model and pins with the session ledger and the
    /// session-cost rules of `ttft/agentic.rs`.
    pub(crate) fn agentic(cfg: TtftConfig, cache: CacheAwareConfig) -> Self {
        Self {
            ledger: Some(Box::default()),
            ..Self::new(cfg, cache)
        }
    }

    /// What the session ledger holds (`agentic` only).
    pub(crate) fn ledger_stats(&self) -> Option<LedgerStats> {
        self.ledger
            .as_ref()
            .map(|l| l.lock().unwrap_or_else(PoisonError::into_inner).stats())
    }

    /// What the session ledger says for one request (`LedgerView::default()` without one);
    /// `chunks`, the prompt's chunk hashes when it was read, find a new session's parent.
    fn ledger_view(
        &self,
        cands: &[WorkerId],
        key: Option<u128>,
        chunks: Option<&[u64]>,
    ) -> LedgerView {
        let Some(l) = &self.ledger else {
            return LedgerView {
                sets: vec![(0.0, 0.0, 0); cands.len()],
                ..LedgerView::default()
            };
        };
        let mut l = l.lock().unwrap_or_else(PoisonError::into_inner);
        let parent = key
            .filter(|k| !l.holds(*k))
            .and(chunks)
            .and_then(|c| l.parent_of(c))
            .map(|(_, w)| w);
        LedgerView {
            sets: cands
                .iter()
                .map(|w| (l.working_set(*w) as f64, l.turn_rate(*w), l.sessions_on(*w)))
                .collect(),
            session_rate: key.map_or((0.0, 0), |k| l.session_rate(k)),
            future_turns: key.map_or(0.0, |_| l.expected_turns() - 1.0),
            turn_tokens: l.turn_tokens(),
            turn_growth: l.turn_growth(),
            parent,
        }
    }

    /// `agentic`: an engine reported `prompt` tokens of which `cached` were cached for a turn
    /// of a pinned session that streamed unread (a continuing turn), whose previous answer on
    /// that worker reported `previous` prompt tokens (`None`: unknown): an unread turn's size
    /// and the typical continuing turn learn from it (`ledger.rs`).
    pub(crate) fn observe_continuing_turn(&self, prompt: u64, cached: u64, previous: Option<u64>) {
        if let Some(l) = &self.ledger {
            let growth = previous
                .and_then(|p| prompt.checked_sub(p))
                .map(|g| g as f64);
            l.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .observe_turn(prompt.saturating_sub(cached) as f64, growth);
        }
    }

    /// `agentic`: whether session `key` may move off `pinned` by the turn-boundary rebalance
    /// (`agentic.rs`): it is a long one and `pinned`'s live sessions send clearly more than
    /// their share of the fleet's turns, so its turn must be read, not streamed unread.
    pub(crate) fn rebalance_due(
        &self,
        cands: &[WorkerId],
        pinned: WorkerId,
        key: &[u8],
        model: Option<&str>,
    ) -> bool {
        let Some(l) = &self.ledger else {
            return false;
        };
        let l = l.lock().unwrap_or_else(PoisonError::into_inner);
        let (rate, turns) = l.session_rate(ledger::session_key(key, model));
        if rate <= 0.0 || turns < agentic::REBALANCE_MIN_TURNS {
            return false;
        }
        agentic::over_share(l.turn_rate(pinned), cands.iter().map(|w| l.turn_rate(*w)))
    }

    pub(crate) fn index_stats(&self) -> IndexStats {
        self.index.stats()
    }

    pub(crate) fn index(&self) -> &SharedIndex {
        &self.index
    }

    pub(crate) fn config(&self) -> &TtftConfig {
        &self.cfg
    }

    /// `w`'s prefill queue and learned speed (kept in the worker's policy slot).
    pub(crate) fn state(&self, w: &WorkerStats) -> Arc<TtftStats> {
        w.policy.get_or_init(TtftStats::default).unwrap_or_default()
    }

    /// The cost model this policy uses for `w` (`fleet`, times its measured speed) and its
    /// estimate of the prefill work queued on `w` at `now`, in tokens (exported as metrics).
    pub(crate) fn worker_figures(&self, w: &WorkerStats, now: Duration) -> (CostModel, f64) {
        let fleet = self.fleet.model();
        let s = self.state(w);
        let queued = s.predict(ms(now), w.in_flight(), 0.0, fleet).ahead_tokens;
        (s.model(fleet), queued)
    }

    /// The fleet's pooled cost model (leases feed it first bytes).
    pub(crate) fn fleet(&self) -> &Arc<FleetCost> {
        &self.fleet
    }

    /// Bytes of index per token of prompt (routing tokens are indexed as 4 bytes each).
    fn bytes_per_token(&self, req: &PickRequest<'_>) -> f64 {
        if req.tokens_hint {
            4.0
        } else {
            self.cfg.chars_per_token
        }
    }

    /// Predicts the request on every candidate.
    pub(crate) fn evaluate(
        &self,
        req: &PickRequest<'_>,
        snap: &WorkerSnapshot,
        cands: &[WorkerId],
    ) -> Evaluation {
        let now = ms(req.now);
        let fleet = self.fleet.model();
        // a turn read only for the feedback is predicted as the unread turn it would have been
        // (its text goes to the index in `commit`)
        let text = if req.feedback_read {
            None
        } else {
            req.hashes()
        };
        let per = self.bytes_per_token(req);
        let (matched, sizes) = {
            let mut tree = self.index.lock();
            match tree.model(req.model, snap) {
                Some(model) => {
                    let matched = match &text {
                        Some(t) => tree.match_per_worker(model, t, cands),
                        None => vec![0; cands.len()],
                    };
                    let sizes: Vec<usize> =
                        cands.iter().map(|w| tree.tenant_chars(model, *w)).collect();
                    (matched, sizes)
                }
                None => (vec![0; cands.len()], vec![0; cands.len()]),
            }
        };
        let prompt = text.as_ref().map_or(0.0, |t| t.text_len() as f64 / per);
        let common = matched.iter().copied().min().unwrap_or(0) as f64 / per;
        let session = match (&self.ledger, req.key) {
            (Some(_), Some(k)) => Some(ledger::session_key(k, req.model)),
            _ => None,
        };
        let view = self.ledger_view(cands, session, text.as_ref().map(|t| t.chunks()));
        // the prompt's tip: its last whole chunk, when no candidate held it
        let tip = match (&self.ledger, &text) {
            (Some(_), Some(t)) => {
                let held = matched.iter().copied().max().unwrap_or(0);
                let chunks = t.chunks();
                chunks
                    .last()
                    .copied()
                    .filter(|_| chunks.len() > super::chunks_in_bytes(held))
            }
            _ => None,
        };
        // `agentic`'s typical turn: what the continuing turns the engines reported added to
        // their prompts (the unit of a session's coming turns), and what they cost, their
        // reported uncached tokens (the unit of the fleet's load); either, until reported,
        // the candidates' mean uncached tokens of placements with text
        let placed = match (view.turn_growth, view.turn_tokens) {
            (Some(_), Some(_)) => None,
            _ => self.ledger.as_ref().map(|_| {
                let own: Vec<f64> = cands
                    .iter()
                    .filter_map(|w| snap.stats(*w))
                    .filter_map(|s| self.state(s).typical_own_tokens())
                    .collect();
                own.iter().sum::<f64>() / own.len().max(1) as f64
            }),
        };
        let in_ms = |t: Option<f64>| t.map_or(0.0, |t| fleet.base_ms + fleet.per_token_ms * t);
        let turn_ms = in_ms(view.turn_growth.or(placed));
        let turn_cost_ms = in_ms(view.turn_tokens.or(placed));
        let kv_pressure = agentic::kv_pressure(view.turn_tokens, view.turn_growth);
        let LedgerView {
            sets,
            session_rate,
            future_turns,
            turn_tokens,
            parent,
            ..
        } = view;
        let estimates = cands
            .iter()
            .zip(matched)
            .zip(sizes)
            .zip(sets)
            .map(|(((&w, m), cached_chars), (kv_set, turn_rate, sessions))| {
                let Some(stats) = snap.stats(w) else {
                    return Estimate {
                        worker: w,
                        own_tokens: prompt,
                        prediction: Prediction {
                            ttft_ms: f64::INFINITY,
                            ahead_tokens: 0.0,
                            decoding: 0.0,
                        },
                        cached_chars,
                        kv_set,
                        turn_rate,
                        sessions,
                        kv_cap: f64::INFINITY,
                        per_token_ms: fleet.per_token_ms,
                    };
                };
                let own = match &text {
                    Some(_) => (prompt - m as f64 / per).max(0.0),
                    // an unread turn: a continuing turn's size when the engines told it
                    None => turn_tokens.unwrap_or_else(|| self.state(stats).mean_own_tokens()),
                };
                let prediction = self
                    .state(stats)
                    .predict(now, stats.in_flight(), own, fleet);
                Estimate {
                    worker: w,
                    own_tokens: own,
                    prediction,
                    cached_chars,
                    kv_set,
                    turn_rate,
                    sessions,
                    kv_cap: stats
                        .kv_capacity_tokens()
                        .map_or(f64::INFINITY, |t| t as f64),
                    per_token_ms: self.state(stats).model(fleet).per_token_ms,
                }
            })
            .collect();
        Evaluation {
            with_text: text.is_some(),
            prompt_tokens: prompt,
            common_tokens: common.min(prompt),
            session_rate,
            future_turns,
            parent,
            tip,
            turn_ms,
            turn_cost_ms,
            kv_pressure,
            estimates,
        }
    }

    /// The candidate with the least predicted TTFT. Near-ties (within [`TIE_MS`] or [`TIE_REL`]
    /// of the best) go to the one with the least cached text (SMG's smallest tree: the most free
    /// cache, so distinct long prompts spread over the fleet instead of sharing a worker while
    /// another holds nothing), exact ties of that at random.
    pub(crate) fn best(&self, eval: &Evaluation, rng: &mut Rng) -> Option<WorkerId> {
        best_of(eval.estimates.iter(), rng)
    }

    /// Where a request without a pin goes: to the worker holding the most of its prompt (more
    /// than `--cache-threshold` of it), unless that worker is predicted clearly slower than the
    /// fastest (the move rule: `> move_factor x fastest + move_margin_ms`); otherwise, and when
    /// nobody holds enough, to the fastest. The guard is what keeps a loaded fleet stable: a
    /// placement that is a little faster now but copies a long prompt to another worker adds
    /// prefill work and evicts other prompts there, and when every worker is busy those copies
    /// feed on themselves.
    pub(crate) fn place(&self, eval: &Evaluation, rng: &mut Rng) -> Option<WorkerId> {
        if self.ledger.is_some() {
            return agentic::place(&self.cfg, eval, rng);
        }
        let fastest = self.best(eval, rng)?;
        let matched = |e: &Estimate| eval.prompt_tokens - e.own_tokens;
        let most = eval.estimates.iter().map(matched).fold(0.0, f64::max);
        if eval.prompt_tokens <= 0.0 || most <= self.cache_threshold * eval.prompt_tokens {
            return Some(fastest);
        }
        let holders = eval.estimates.iter().filter(|e| matched(e) >= most);
        let holder = best_of(holders, rng)?;
        let (h, f) = (eval.of(holder)?, eval.of(fastest)?);
        let clearly_slower = h.prediction.ttft_ms
            > self.cfg.move_factor * f.prediction.ttft_ms + self.cfg.move_margin_ms;
        Some(if clearly_slower { fastest } else { holder })
    }

    /// Where a key pinned to `pinned` should move, if staying is predicted to cost more than
    /// `move_factor x` the best other worker `+ move_margin_ms`.
    pub(crate) fn move_target(
        &self,
        eval: &Evaluation,
        pinned: WorkerId,
        rng: &mut Rng,
    ) -> Option<WorkerId> {
        if self.ledger.is_some() {
            return agentic::move_target(&self.cfg, eval, pinned, rng);
        }
        let stay = eval.of(pinned)?.prediction.ttft_ms;
        let others = eval.estimates.iter().filter(|e| e.worker != pinned);
        let to = best_of(others, rng)?;
        let alt = eval.of(to)?.prediction.ttft_ms;
        (stay > self.cfg.move_factor * alt + self.cfg.move_margin_ms).then_some(to)
    }

    /// The check without the body: whether `pinned`'s queue is not clearly worse than every
    /// other candidate's (see the module docs).
    pub(crate) fn pinned_is_fine(
        &self,
        snap: &WorkerSnapshot,
        cands: &[WorkerId],
        pinned: WorkerId,
        now: Duration,
    ) -> bool {
        let now = ms(now);
        let fleet = self.fleet.model();
        let queue_only = |w: WorkerId| {
            snap.stats(w).map_or(f64::INFINITY, |s| {
                self.state(s)
                    .predict(now, s.in_flight(), 0.0, fleet)
                    .ttft_ms
            })
        };
        let stay = queue_only(pinned);
        cands
            .iter()
            .filter(|w| **w != pinned)
            .all(|&w| stay <= self.cfg.move_factor * queue_only(w) + self.cfg.move_margin_ms)
    }

    /// The request goes to `chosen`: it becomes a tenant of the text, and its prefill joins
    /// `chosen`'s queue. Returns the pending id and the queue, for the lease.
    pub(crate) fn commit(
        &self,
        req: &PickRequest<'_>,
        eval: &Evaluation,
        snap: &WorkerSnapshot,
        chosen: WorkerId,
    ) -> Option<(u64, Arc<TtftStats>)> {
        let stats = snap.stats(chosen)?;
        if let Some(t) = req.hashes() {
            // a worker holds no more than its KV capacity (reported, or learned from its
            // answers: `feedback.rs`), in index bytes
            let cap = super::feedback::kv_cap_bytes(Some(stats), self.bytes_per_token(req));
            let mut tree = self.index.lock();
            if let Some(model) = tree.model(req.model, snap) {
                tree.insert_with_prior(model, &t, chosen, cap, req.prior);
            }
        }
        let est = eval.of(chosen)?;
        if let (Some(ledger), Some(key)) = (&self.ledger, req.key) {
            let prompt = eval.with_text.then_some(eval.prompt_tokens as u64);
            let held = (eval.prompt_tokens - est.own_tokens).max(eval.common_tokens);
            let key = ledger::session_key(key, req.model);
            let now = u64::try_from(req.now.as_millis()).unwrap_or(u64::MAX);
            let mut l = ledger.lock().unwrap_or_else(PoisonError::into_inner);
            l.record(key, chosen, prompt, held.max(0.0) as u64, now);
            if let Some(tip) = eval.tip {
                l.set_tip(key, tip);
            }
        }
        let streaming = match req.stream {
            Some(true) => Streaming::Yes,
            Some(false) => Streaming::No,
            None => Streaming::Unknown,
        };
        let queue = self.state(stats);
        let id = queue.dispatch(
            ms(req.now),
            est.own_tokens,
            eval.with_text,
            est.prediction,
            streaming,
        );
        Some((id, queue))
    }
}

fn best_of<'a>(
    estimates: impl Iterator<Item = &'a Estimate> + Clone,
    rng: &mut Rng,
) -> Option<WorkerId> {
    let best = estimates
        .clone()
        .map(|e| e.prediction.ttft_ms)
        .min_by(f64::total_cmp)?;
    let near = |e: &&Estimate| {
        let t = e.prediction.ttft_ms;
        t <= best + TIE_MS.max(best * TIE_REL) || t == best
    };
    let least = estimates
        .clone()
        .filter(near)
        .map(|e| e.cached_chars)
        .min()?;
    let pool = || {
        estimates
            .clone()
            .filter(near)
            .filter(move |e| e.cached_chars == least)
    };
    let n = pool().count();
    pool().nth(rng.below(n)).map(|e| e.worker)
}

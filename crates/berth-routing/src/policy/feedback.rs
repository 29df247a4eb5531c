//! Learning from what the engine says it cached (`--cache-feedback`).
//!
//! `cache_aware` and `ttft_aware` route on a prefix index built from the gateway's own routing
//! history: a guess that does not see evictions, other clients, restarts or flushes. Engines
//! report the truth per request (OpenAI `usage.prompt_tokens_details.cached_tokens`, SGLang
//! `meta_info.cached_tokens`, llama.cpp `timings.cache_n`); the gateway reads it from the
//! answer and hands it here with what the index predicted for that worker
//! ([`Expectation`], taken before the request's own insert):
//!
//! - a *shortfall* (reported clearly below predicted) means the worker lacked part of the
//!   prefix when it started the request: the index drops that worker's entries hanging below
//!   the lost part that no request sent since used (`prefix_index/correct.rs`; the prompt's
//!   own path stays, the worker has just recomputed it); engines cache whole blocks, so a
//!   report less than [`SLACK_TOKENS`] short of where the prompt branches off a prefix other
//!   prompts share reaches that branch point (`Index::cut_at_branch`);
//! - a *confirmation* or a *surplus* (another replica or client warmed the worker) needs no
//!   correction: the request's own insert already records the whole prompt there.
//!
//! The effective KV estimate moves only on evidence about eviction ([`KvEvidence`]): the index
//! marks what answers showed each worker holding; a shortfall on a marked prefix is an
//! eviction (the estimate moves a quarter of the way down toward what the worker evidently had
//! room for: what the index holds of it used after the lost part, plus this prompt), a full
//! confirmation of marked prefixes moves it back up; a shortfall on an unmarked prefix is an
//! optimistic guess (a prompt recorded when sent, not yet computed) and teaches nothing; a
//! loss of a marked prompt's first chunk is a flush or a restart (the worker's marks are
//! cleared, the estimate stays).
//!
//! The turns that stream unread on `ttft_aware`'s pinned path (no prediction from the index)
//! are compared with the session's previous answer (`feedback/sessions.rs`); under `on` their
//! answers also touch the session's last read prompt in the index (its *anchor*) as deep as the
//! answer reported cached, so the index's recency follows what the engine keeps using (touching
//! the whole path on a shortfall kept the histories the engine had lost recent in the index,
//! whose bound then evicted the shared system prompts the engine still held: session 8), and
//! under `ttft_aware` a session whose
//! unread turn fell short has its next turn read and decided with its text (it may move off a
//! worker that lost its history). `agentic` does not re-read (session 7): it decided such a
//! turn as the unread turn it would have been (`PickRequest::feedback_read`), so reading it
//! served only the index: the session's whole history went into the worker's share of it
//! (bounded by the worker's KV capacity, whole segments dropped least recently used first,
//! where the engine drops blocks) and was corrected from its answer. Under KV pressure that
//! took shared system prompts the engine still held out of the index; new sessions of those
//! prompts saw no holder, copied them elsewhere, and that fed on itself (docs/benchmarks.md,
//! session 7: without the insert, or without corrections, the runs held).
//!
//! Tokens become index bytes through the request's own ratio (prompt bytes / reported prompt
//! tokens) when the answer reports its prompt tokens, else the configured estimate (4 bytes
//! per token with `x-smg-routing-tokens`, which index token bytes).
//!
//! The effective KV estimate ([`next_kv_estimate`]) starts at the worker's reported capacity
//! (`max_total_num_tokens`) and stays within [capacity / 4, capacity] (without a reported
//! capacity, within [bound / 4, bound] of the per-worker tree bound). `ttft_aware` bounds a
//! worker's share of the index by it only when the worker reports no capacity: the sample
//! counts what the index saw used after the lost part, and the index does not see the turns
//! that stream unread on the pinned path, so the estimate runs low; bounding by it cost cached
//! share under KV pressure (docs/benchmarks.md). It is exported either way.

use super::prefix_index::{Prior, bytes_of_chunks, chunks_in_bytes};
use super::{Policy, PrefixHashes};
use crate::{WorkerId, WorkerSnapshot, WorkerStats};

mod sessions;

use sessions::{Anchor, Sessions};
pub use sessions::{SHARDS as SESSION_SHARDS, SLOTS as SESSION_SLOTS};

/// Tokens of slack before a difference counts (engines cache in blocks of 16 to 64 tokens
/// and may recompute a prompt's last token), plus [`SLACK_SHARE`] of the prediction.
pub const SLACK_TOKENS: f64 = 64.0;
/// Share of the prediction a difference must exceed to count.
pub const SLACK_SHARE: f64 = 0.05;
/// How far one shortfall moves the KV estimate toward its sample.
const DOWN: f64 = 0.25;
/// How far one confirmation moves the KV estimate back toward its prior.
const UP: f64 = 0.05;
/// The estimate never goes below the prior divided by this.
const FLOOR_DIV: u64 = 4;

/// What `--cache-feedback` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FeedbackMode {
    /// Answers are not read.
    Off,
    /// Answers are read and compared (metrics), nothing is corrected (the default: correcting
    /// has not yet been shown to pay, docs/benchmarks.md).
    #[default]
    Measure,
    /// Answers are read, compared, and correct the index and the KV estimate.
    On,
}

impl FeedbackMode {
    /// Every mode.
    pub const ALL: [Self; 3] = [Self::Off, Self::Measure, Self::On];

    /// The flag value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Measure => "measure",
            Self::On => "on",
        }
    }
}

impl std::str::FromStr for FeedbackMode {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, crate::Error> {
        Self::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| {
                crate::Error::config(
                    "--cache-feedback",
                    format!("unknown value {s:?}; expected off, measure or on"),
                )
            })
    }
}

/// What the index predicted for one dispatched request (carried by its lease to the answer).
#[derive(Debug, Clone)]
pub struct Expectation {
    pub(crate) worker: WorkerId,
    pub(crate) hashes: PrefixHashes,
    pub(crate) prior: Prior,
    /// Index bytes per token when the answer does not report its prompt tokens.
    pub(crate) bytes_per_token: f64,
}

impl Expectation {
    /// Bytes of the prompt the worker was predicted to hold.
    pub fn predicted_bytes(&self) -> usize {
        self.prior.bytes()
    }
}

/// What a request's answer is compared with: the index's prediction (when the router read the
/// prompt) and the pinned session it belongs to (its previous answer). Carried by the lease.
#[derive(Debug, Clone)]
pub struct Ticket {
    pub(crate) worker: WorkerId,
    pub(crate) expectation: Option<Expectation>,
    pub(crate) session: Option<u128>,
}

impl Ticket {
    /// The worker the request went to.
    pub fn worker(&self) -> WorkerId {
        self.worker
    }

    /// Whether the index predicted something for this request.
    pub fn has_expectation(&self) -> bool {
        self.expectation.is_some()
    }
}

/// The router's feedback state: the mode and the sessions' previous answers.
#[derive(Debug)]
pub(crate) struct Feedback {
    pub(crate) mode: FeedbackMode,
    sessions: Option<Sessions>,
    /// Tokens the KV estimate may reach when the worker reports no capacity, in index bytes
    /// (`--max-tree-size`).
    ceiling_bytes: usize,
    /// Whether a pinned session's shortfall makes its next turn read (`on`, and a policy that
    /// decides that turn with its text).
    rereads: bool,
}

impl Feedback {
    /// The state for `policy`: off unless the policy keeps a prefix index. `decides_read_turns`:
    /// whether the policy decides a pinned turn read for the feedback with its text (only
    /// then is it re-read, see the module docs).
    pub(crate) fn new(
        mode: FeedbackMode,
        policy: &Policy,
        decides_read_turns: bool,
        ceiling_bytes: usize,
    ) -> Self {
        let mode = if policy.uses_prefix_index() {
            mode
        } else {
            FeedbackMode::Off
        };
        Self {
            mode,
            sessions: (mode != FeedbackMode::Off).then(Sessions::default),
            ceiling_bytes,
            rereads: mode == FeedbackMode::On && decides_read_turns,
        }
    }

    /// Whether answers are read.
    pub(crate) fn reads(&self) -> bool {
        self.mode != FeedbackMode::Off
    }

    /// Whether a session's shortfall makes its next turn read (`on`, `ttft_aware`).
    pub(crate) fn rereads(&self) -> bool {
        self.rereads
    }

    /// Whether the previous answer of pinned session `key` reported a shortfall and its next
    /// turn is therefore read ([`Feedback::rereads`]), so the index learns from it.
    pub(crate) fn session_short(&self, key: u128) -> bool {
        self.rereads
            && self
                .sessions
                .as_ref()
                .and_then(|s| s.get(key))
                .is_some_and(|p| p.shortfall)
    }

    /// The prompt tokens the previous answer of pinned session `key` reported, when it came
    /// from `worker`.
    pub(crate) fn previous_prompt(&self, key: u128, worker: WorkerId) -> Option<u64> {
        let p = self.sessions.as_ref()?.get(key)?;
        (p.worker == worker && p.prompt_tokens > 0).then_some(u64::from(p.prompt_tokens))
    }

    /// Compares an answer with what was predicted for it and, under `on`, corrects.
    pub(crate) fn observe(
        &self,
        policy: &Policy,
        ticket: Ticket,
        report: Report,
        snap: &WorkerSnapshot,
    ) -> Option<Observation> {
        if !self.reads() {
            return None;
        }
        let (obs, anchor) = match &ticket.expectation {
            Some(exp) => self.observe_index(policy, exp, &report, snap),
            None => (self.observe_session(&ticket, &report, policy), None),
        };
        if let (Some(key), Some(sessions), Some(p)) =
            (ticket.session, &self.sessions, report.prompt_tokens)
        {
            let short = obs.is_some_and(|o| o.from_session && o.verdict == Verdict::Shortfall);
            sessions.record(key, ticket.worker, p, short, anchor);
        }
        obs
    }

    fn observe_session(
        &self,
        ticket: &Ticket,
        report: &Report,
        policy: &Policy,
    ) -> Option<Observation> {
        let prev = self.sessions.as_ref()?.get(ticket.session?)?;
        if prev.worker != ticket.worker || prev.prompt_tokens == 0 {
            return None;
        }
        let predicted = f64::from(prev.prompt_tokens);
        let v = verdict(predicted, report.cached_tokens as f64);
        if self.mode == FeedbackMode::On
            && let (Some(a), Some(index)) = (prev.anchor, policy.index())
        {
            // the worker has just used the session's prefix as far as it reported it cached:
            // so does the index (not deeper: what it lost must age out of the index as it did
            // out of the worker, not stay recent there and push out what the worker holds)
            let depth = a.depth as usize;
            let keep = if a.tokens == 0 || report.cached_tokens >= u64::from(a.tokens) {
                depth
            } else {
                let per = bytes_of_chunks(depth) as f64 / f64::from(a.tokens);
                kept_chunks(report.cached_tokens, per).min(depth)
            };
            let mut tree = index.lock();
            let held = tree.touch_held(a.model, ticket.worker, depth, a.hash, keep);
            if held && v != Verdict::Shortfall {
                // and it had kept all of the previous turn
                tree.answered(a.model, ticket.worker, depth, a.hash);
            }
        }
        Some(Observation {
            worker: ticket.worker,
            predicted_tokens: predicted,
            reported_tokens: report.cached_tokens,
            verdict: v,
            corrected_chunks: 0,
            from_session: true,
        })
    }

    fn observe_index(
        &self,
        policy: &Policy,
        exp: &Expectation,
        report: &Report,
        snap: &WorkerSnapshot,
    ) -> (Option<Observation>, Option<Anchor>) {
        let Some(index) = policy.index() else {
            return (None, None);
        };
        let per = bytes_per_token(exp.hashes.text_len(), report, exp.bytes_per_token);
        let predicted = exp.prior.bytes() as f64 / per;
        let v = verdict(predicted, report.cached_tokens as f64);
        let mut obs = Observation {
            worker: exp.worker,
            predicted_tokens: predicted,
            reported_tokens: report.cached_tokens,
            verdict: v,
            corrected_chunks: 0,
            from_session: false,
        };
        let stats = snap.stats(exp.worker);
        if self.mode != FeedbackMode::On || stats.is_none() {
            return (Some(obs), None);
        }
        let mut evidence = None;
        let mut tree = index.lock();
        let model = exp.prior.model;
        if v == Verdict::Shortfall {
            let keep = kept_chunks(report.cached_tokens, per);
            // engines cache whole blocks (up to `SLACK_TOKENS`): a report that far short of
            // where the prompt branches off a prefix other prompts share reached the branch
            let reach = kept_chunks(report.cached_tokens + SLACK_TOKENS as u64, per);
            let cut = tree.cut_at_branch(model, &exp.hashes, exp.worker, keep, reach);
            let c = tree.correct(&exp.hashes, exp.worker, &exp.prior, cut);
            obs.corrected_chunks = c.dropped;
            if keep == 0 && exp.prior.answered > 0 {
                // the worker lost even the prompt's first chunk, which an engine evicting least
                // recently used blocks loses last, of what an earlier answer had shown it
                // holding: a flush or a restart, no capacity change
                tree.forget_answers(model, exp.worker);
            } else if cut < exp.prior.answered {
                // it lost part of what an earlier answer had shown it holding, an eviction:
                // the room it evidently had is what it kept of ours used after the lost part,
                // and this prompt
                let prompt = report
                    .prompt_tokens
                    .map_or(exp.hashes.text_len() as f64 / per, |p| p as f64);
                evidence = c.newer_bytes.map(|b| KvEvidence::Evicted {
                    room: b as f64 / per + prompt,
                });
            }
        } else if v == Verdict::Confirmed
            && exp.prior.answered > 0
            && exp.prior.answered >= exp.prior.chunks
        {
            // it still held all of it that an earlier answer had shown
            evidence = Some(KvEvidence::Kept);
        }
        let anchor = tree
            .held_end(model, &exp.hashes, exp.worker)
            .map(|(depth, hash)| {
                // the worker holds this whole prompt now
                tree.answered(model, exp.worker, depth, hash);
                Anchor {
                    model,
                    depth: u32::try_from(depth).unwrap_or(u32::MAX),
                    hash,
                    tokens: (bytes_of_chunks(depth) as f64 / per) as u32,
                }
            });
        drop(tree);
        if let (Some(s), Some(evidence)) = (stats, evidence) {
            let ceiling = (self.ceiling_bytes as f64 / per) as u64;
            if let Some(next) = next_kv_estimate(
                s.kv_capacity_tokens(),
                ceiling,
                s.learned_kv_tokens(),
                evidence,
            ) {
                s.set_learned_kv_tokens(next);
            }
        }
        (Some(obs), anchor)
    }
}

/// The KV bound a policy applies to a worker's share of its index, in index bytes.
pub(crate) fn kv_cap_bytes(stats: Option<&WorkerStats>, bytes_per_token: f64) -> usize {
    stats
        .and_then(WorkerStats::effective_kv_tokens)
        .map_or(usize::MAX, |tokens| {
            (tokens as f64 * bytes_per_token) as usize
        })
}

/// What an answer reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Report {
    /// Prompt tokens the engine found cached.
    pub cached_tokens: u64,
    /// The prompt's tokens, when reported.
    pub prompt_tokens: Option<u64>,
}

/// How a report compared with the prediction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Within the slack.
    Confirmed,
    /// Reported clearly less: the worker lost part of the prefix.
    Shortfall,
    /// Reported clearly more: something else warmed the worker.
    Surplus,
}

impl Verdict {
    /// Every verdict.
    pub const ALL: [Self; 3] = [Self::Confirmed, Self::Shortfall, Self::Surplus];

    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Confirmed => "confirmed",
            Self::Shortfall => "shortfall",
            Self::Surplus => "surplus",
        }
    }
}

/// One compared answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observation {
    /// The worker that answered.
    pub worker: WorkerId,
    /// Tokens the index (or the session's previous turn) predicted cached.
    pub predicted_tokens: f64,
    /// Tokens the engine reported cached.
    pub reported_tokens: u64,
    /// The comparison.
    pub verdict: Verdict,
    /// Index chunks dropped by the correction (0 under `measure`).
    pub corrected_chunks: usize,
    /// Whether the prediction came from the session's previous turn (a pinned request whose
    /// body was not read), not from the index.
    pub from_session: bool,
}

/// Compares `reported` with `predicted` tokens.
pub fn verdict(predicted: f64, reported: f64) -> Verdict {
    let slack = SLACK_TOKENS + SLACK_SHARE * predicted;
    if reported + slack < predicted {
        Verdict::Shortfall
    } else if reported > predicted + slack {
        Verdict::Surplus
    } else {
        Verdict::Confirmed
    }
}

/// Index bytes per token for this request: its own ratio when the answer reported its prompt
/// tokens, else `fallback`.
pub(crate) fn bytes_per_token(text_len: usize, report: &Report, fallback: f64) -> f64 {
    match report.prompt_tokens {
        Some(p) if p > 0 && text_len > 0 => text_len as f64 / p as f64,
        _ => fallback,
    }
}

/// The whole chunks of the prompt within `reported` tokens.
pub(crate) fn kept_chunks(reported: u64, per: f64) -> usize {
    chunks_in_bytes((reported as f64 * per) as usize)
}

/// What one answer says about its worker's KV capacity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KvEvidence {
    /// The worker evicted part of a prefix an earlier answer had shown it holding, having had
    /// room for about `room` tokens.
    Evicted {
        /// Tokens the worker evidently had room for.
        room: f64,
    },
    /// The worker still held all of the prompt an earlier answer had shown it holding.
    Kept,
}

/// The next effective KV estimate of a worker (tokens).
///
/// `capacity`: what the worker reports (`max_total_num_tokens`), the prior and the ceiling;
/// `ceiling` bounds it without one. Only evidence about eviction moves it: an eviction a
/// quarter of the way down toward the room the worker had (never up), a prefix kept 5% of the
/// way back up toward the ceiling; within [ceiling / 4, ceiling].
pub fn next_kv_estimate(
    capacity: Option<u64>,
    ceiling: u64,
    current: Option<u64>,
    evidence: KvEvidence,
) -> Option<u64> {
    let hi = capacity.unwrap_or(ceiling).max(1);
    let lo = (hi / FLOOR_DIV).max(1);
    let next = match (evidence, current.or(capacity)) {
        (KvEvidence::Evicted { room }, Some(est)) => {
            let est = est as f64;
            if room < est {
                est - DOWN * (est - room)
            } else {
                est
            }
        }
        (KvEvidence::Evicted { room }, None) => room,
        (KvEvidence::Kept, Some(est)) => {
            let est = est as f64;
            est + (UP * (hi as f64 - est)).max(1.0)
        }
        (KvEvidence::Kept, None) => return None,
    };
    Some((next.round() as u64).clamp(lo, hi))
}

#[cfg(test)]
mod tests;

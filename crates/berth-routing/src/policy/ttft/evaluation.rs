//! One request's predictions over the candidates: an [`Estimate`] per worker, gathered in an
//! [`Evaluation`] (what `ttft_aware` and `agentic` decide on).

use super::cost::Prediction;
use crate::WorkerId;

/// One candidate's prediction for one request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Estimate {
    pub(crate) worker: WorkerId,
    pub(crate) own_tokens: f64,
    pub(crate) prediction: Prediction,
    /// Characters the worker holds in the prefix index (the near-tie break: least cached).
    pub(crate) cached_chars: usize,
    /// `agentic`: the tokens the worker's live sessions hold (the session ledger).
    pub(crate) kv_set: f64,
    /// `agentic`: the turns per second the worker's live sessions send (the session ledger).
    pub(crate) turn_rate: f64,
    /// `agentic`: the live sessions the worker carries (the session ledger).
    pub(crate) sessions: u32,
    /// The worker's KV capacity in tokens (infinite when it did not say).
    pub(crate) kv_cap: f64,
    /// The worker's prefill cost per token, ms (what an eviction costs when the evicted
    /// tokens are sent again).
    pub(crate) per_token_ms: f64,
}

/// Every candidate's prediction for one request, in candidate order.
#[derive(Debug, Clone)]
pub(crate) struct Evaluation {
    /// Whether the request's prompt was known (text or tokens).
    pub(crate) with_text: bool,
    /// Prompt tokens (0 when unknown).
    pub(crate) prompt_tokens: f64,
    /// Tokens of the prompt's prefix that every candidate holds (worth nothing to placement).
    pub(crate) common_tokens: f64,
    /// `agentic`: the request's session's turns per second and the turns it took before this
    /// one (zeros for a new or keyless one).
    pub(crate) session_rate: (f64, u32),
    /// `agentic`: the turns the request's session is expected to send after this one (the
    /// ledger's expected turns per session less one; 0 for a keyless request or `ttft_aware`).
    pub(crate) future_turns: f64,
    /// `agentic`: the worker of the live session whose conversation this new session's prompt
    /// continues (a sub-agent's parent: `ledger.rs`, tips), if any.
    pub(crate) parent: Option<WorkerId>,
    /// `agentic`: the prompt's last whole chunk, when no candidate's prefix index held it (the
    /// session's tip, `ledger.rs`).
    pub(crate) tip: Option<u64>,
    /// `agentic`: what one typical turn's prefill takes, ms: the fleet's base cost plus its
    /// per-token cost times what a continuing turn adds to its prompt (the engines' reports),
    /// else the candidates' mean uncached tokens per placement; 0 for `ttft_aware`. The unit
    /// of a new session's coming turns and of the placement band.
    pub(crate) turn_ms: f64,
    /// `agentic`: what one typical turn costs the workers' prefill, ms: the same, with what a
    /// continuing turn *cost* (its reported uncached tokens, a history its worker evicted and
    /// re-prefilled included) in place of what it added; 0 for `ttft_aware`. The unit of the
    /// fleet's load (`agentic::load`): the workers are busy with what the turns cost.
    pub(crate) turn_cost_ms: f64,
    /// `agentic`: the engines report that the fleet's KV no longer holds its live sessions'
    /// histories: a continuing turn re-prefills more than it adds ([`super::agentic::kv_pressure`]).
    /// Placement then keeps a new session with the workers holding its prompt unless staying
    /// there is clearly worse (`agentic.rs`, "Under KV pressure"). False without reports.
    pub(crate) kv_pressure: bool,
    pub(crate) estimates: Vec<Estimate>,
}

impl Evaluation {
    pub(crate) fn of(&self, w: WorkerId) -> Option<&Estimate> {
        self.estimates.iter().find(|e| e.worker == w)
    }

    /// The same evaluation over the candidates `keep` accepts (overload protection).
    pub(crate) fn restricted(&self, keep: impl Fn(WorkerId) -> bool) -> Self {
        Self {
            estimates: self
                .estimates
                .iter()
                .filter(|e| keep(e.worker))
                .copied()
                .collect(),
            ..*self
        }
    }
}

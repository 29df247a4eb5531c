//! Per-worker state of `ttft_aware`: the prefill queue the gateway has sent, and the learned
//! cost model that turns it into milliseconds.
//!
//! **Queue.** Every request `ttft_aware` places is *pending* on its worker from dispatch until
//! its first response byte, with its estimated uncached prompt tokens. The gateway sees the
//! first byte itself, so the queue needs no polling of the worker. A request whose response is
//! not a stream only shows its first byte when it is complete, so its tokens count only until
//! its predicted time to first token has passed (twice that when the gateway did not read the
//! body and cannot tell). The work left in the queue is the pending tokens' cost minus the time
//! the worker has already done on the oldest one: prefill is served in order, so the head of the
//! queue started when it was sent or when the worker last produced a first byte, whichever is
//! later, and at most its own cost is done. (Subtracting all the time since the oldest was sent
//! would count work spent on requests that already left the queue: a saturated worker would look
//! idle.)
//!
//! **Cost model.** Predicted TTFT =
//! `speed x (base + per_token x (queued + own uncached tokens) + per_decode x decoding)`.
//! The three coefficients are the fleet's
//! (`FleetCost`), learned online from the first-byte times of every streamed response by least
//! squares over exponentially weighted sufficient statistics (weight [`LEARN_RATE`] per sample).
//! The statistics start as one sample's worth of pseudo-data that the starting values (flags)
//! fit exactly, so the model starts at them and their weight decays like any old sample's (about
//! 5% after 60 first bytes); a tiny ridge towards them keeps a coefficient the samples cannot
//! tell apart (e.g. the decode cost when nothing ever decodes) where it started. No coefficient
//! goes below zero.
//!
//! `speed` is per worker: its weighted mean first-byte time over what the fleet's model predicts
//! for its weighted mean features (the model is linear, so that is its mean prediction, with
//! the model as it is now rather than as it was when each sample came), so
//! a worker on a slower GPU, or one shared with traffic this gateway does not see, is predicted
//! slower. It counts only after [`SPEED_MIN_SAMPLES`] first bytes and only outside
//! [`SPEED_DEAD_ZONE`]: identical workers measure a little differently by chance, and a
//! per-worker fit would let that noise send every new session to whichever worker happened to
//! look fastest, leaving an unmeasured one idle for good.

use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::queue::{Pending, PrefillQueue};

/// Weight of the newest sample in the exponentially weighted statistics (about the last 20
/// first-byte times dominate).
pub const LEARN_RATE: f64 = 0.05;

/// First bytes a worker must have shown before its own speed counts.
pub const SPEED_MIN_SAMPLES: u32 = 20;

/// Speeds within this range count as the fleet's (1.0).
pub const SPEED_DEAD_ZONE: (f64, f64) = (0.8, 1.25);

/// Ridge towards the starting values, for conditioning only.
const RIDGE: f64 = 1e-4;

/// The coefficients of the TTFT model, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostModel {
    /// Fixed time to a first byte (network, scheduling, one decode step).
    pub base_ms: f64,
    /// Prefill time per uncached prompt token.
    pub per_token_ms: f64,
    /// Added per request decoding on the worker (decode steps interleaved with prefill).
    pub per_decode_ms: f64,
}

impl CostModel {
    fn as_vec(self) -> [f64; 3] {
        [self.base_ms, self.per_token_ms * 1000.0, self.per_decode_ms]
    }

    fn from_vec(v: [f64; 3]) -> Self {
        Self {
            base_ms: v[0].max(0.0),
            per_token_ms: (v[1] / 1000.0).max(1e-6),
            per_decode_ms: v[2].max(0.0),
        }
    }
}

/// What one placement expects on one worker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Prediction {
    /// Predicted time to first token, ms.
    pub(crate) ttft_ms: f64,
    /// Tokens of prefill queued ahead of this request.
    pub(crate) ahead_tokens: f64,
    /// Requests past their prefill.
    pub(crate) decoding: f64,
}

/// The fleet's pooled cost model: learned from every worker's first bytes, it is what every
/// worker predicts with (times its speed). Decisions read the current model from atomics
/// without a lock; only a first byte (learning) takes the mutex, then publishes the new model.
/// A reader racing a publish may see coefficients of two consecutive models mixed, each a
/// valid estimate.
#[derive(Debug)]
pub(crate) struct FleetCost {
    prior: CostModel,
    inner: Mutex<FleetInner>,
    current: [AtomicU64; 3],
}

#[derive(Debug, Default)]
struct FleetInner {
    learned: Option<Learned>,
    means: Means,
}

/// Exponentially weighted means of features and first-byte times (the first sample sets them).
#[derive(Debug, Default, Clone, Copy)]
struct Means {
    x: [f64; 3],
    y: f64,
    samples: u32,
}

impl Means {
    fn observe(&mut self, x: [f64; 3], y: f64) {
        let w = if self.samples == 0 { 1.0 } else { LEARN_RATE };
        for (m, v) in self.x.iter_mut().zip(x) {
            *m += w * (v - *m);
        }
        self.y += w * (y - self.y);
        self.samples = self.samples.saturating_add(1);
    }
}

impl FleetCost {
    pub(crate) fn new(prior: CostModel) -> Self {
        Self {
            prior,
            inner: Mutex::default(),
            current: [
                AtomicU64::new(prior.base_ms.to_bits()),
                AtomicU64::new(prior.per_token_ms.to_bits()),
                AtomicU64::new(prior.per_decode_ms.to_bits()),
            ],
        }
    }

    /// The pooled model in force (see [`Self::compute`]), read without a lock.
    pub(crate) fn model(&self) -> CostModel {
        let [b, t, d] = &self.current;
        CostModel {
            base_ms: f64::from_bits(b.load(AtomicOrdering::Acquire)),
            per_token_ms: f64::from_bits(t.load(AtomicOrdering::Acquire)),
            per_decode_ms: f64::from_bits(d.load(AtomicOrdering::Acquire)),
        }
    }

    /// The pooled model (the configured prior until a first byte was measured), scaled so that
    /// at the fleet's mean features it predicts the fleet's mean first-byte time: the fit's pull
    /// towards its starting values then never makes the workers that were measured look faster
    /// than the model, which is what each worker's speed is relative to.
    fn compute(&self, inner: &FleetInner) -> CostModel {
        let Some(l) = inner.learned else {
            return self.prior;
        };
        let at_mean = l.model.at(inner.means.x);
        if inner.means.samples == 0 || at_mean <= 1e-9 {
            return l.model;
        }
        l.model.scaled((inner.means.y / at_mean).clamp(0.1, 10.0))
    }

    fn observe(&self, x: [f64; 3], y: f64) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner
            .learned
            .get_or_insert_with(|| Learned::new(self.prior))
            .observe(x, y, self.prior);
        inner.means.observe(x, y);
        let m = self.compute(&inner);
        for (a, v) in self
            .current
            .iter()
            .zip([m.base_ms, m.per_token_ms, m.per_decode_ms])
        {
            a.store(v.to_bits(), AtomicOrdering::Release);
        }
    }
}

/// The per-worker state (inside [`crate::WorkerStats`]).
#[derive(Debug, Default)]
pub(crate) struct TtftStats(Mutex<Inner>);

#[derive(Debug)]
struct Inner {
    pending: PrefillQueue,
    next_id: u64,
    /// This worker's first bytes.
    means: Means,
    /// When this worker last produced a first byte (the head of its queue started then).
    last_first_byte_ms: f64,
    /// Weighted mean of own uncached tokens of the requests placed with text, for requests
    /// routed without their body.
    mean_own_tokens: f64,
    /// The total weight `mean_own_tokens`'s samples carry (`1 - (1 - LEARN_RATE)^n` after `n`:
    /// the mean starts at 0, so divided by this it is unbiased from its first sample).
    own_weight: f64,
}

impl Default for Inner {
    fn default() -> Self {
        Self {
            pending: PrefillQueue::default(),
            next_id: 0,
            means: Means::default(),
            last_first_byte_ms: f64::NEG_INFINITY,
            mean_own_tokens: 0.0,
            own_weight: 0.0,
        }
    }
}

impl Inner {
    /// The speed factor in force against the fleet's model `fleet`.
    fn speed(&self, fleet: CostModel) -> f64 {
        if self.means.samples < SPEED_MIN_SAMPLES {
            return 1.0;
        }
        let speed = (self.means.y / fleet.at(self.means.x).max(1e-9)).clamp(0.1, 10.0);
        let (lo, hi) = SPEED_DEAD_ZONE;
        if (lo..=hi).contains(&speed) {
            1.0
        } else {
            speed
        }
    }
}

impl CostModel {
    fn scaled(self, by: f64) -> Self {
        Self {
            base_ms: self.base_ms * by,
            per_token_ms: self.per_token_ms * by,
            per_decode_ms: self.per_decode_ms * by,
        }
    }

    fn at(self, x: [f64; 3]) -> f64 {
        let v = self.as_vec();
        v.iter().zip(x).map(|(a, b)| a * b).sum()
    }
}

/// Exponentially weighted sufficient statistics of `y = x . theta` and their solution.
#[derive(Debug, Clone, Copy)]
struct Learned {
    xx: [[f64; 3]; 3],
    xy: [f64; 3],
    model: CostModel,
}

/// Whether a placed request's response is known to be a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Streaming {
    /// Yes: it counts as queued until its first byte.
    Yes,
    /// No: it counts until its predicted first byte.
    No,
    /// Unknown (body not read): it counts until twice its predicted first byte.
    Unknown,
}

impl TtftStats {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cost model in force for this worker: the fleet's, times its speed.
    pub(crate) fn model(&self, fleet: CostModel) -> CostModel {
        fleet.scaled(self.lock().speed(fleet))
    }

    /// Mean own uncached tokens of recent placements with text.
    pub(crate) fn mean_own_tokens(&self) -> f64 {
        self.lock().mean_own_tokens
    }

    /// Mean own uncached tokens of recent placements with text, unbiased by the mean's start
    /// at 0 (`None` before the first).
    pub(crate) fn typical_own_tokens(&self) -> Option<f64> {
        let inner = self.lock();
        (inner.own_weight > 0.0).then(|| inner.mean_own_tokens / inner.own_weight)
    }

    /// Predicts a request with `own_tokens` uncached tokens on this worker at `now_ms`, with
    /// `in_flight` requests of this gateway on it.
    pub(crate) fn predict(
        &self,
        now_ms: f64,
        in_flight: u32,
        own_tokens: f64,
        fleet: CostModel,
    ) -> Prediction {
        let mut inner = self.lock();
        let m = fleet.scaled(inner.speed(fleet));
        inner.pending.expire(now_ms);
        let (queued, active, head) = inner.pending.totals();
        let done_on_head = head.map_or(0.0, |h| {
            let started = h.sent_ms.max(inner.last_first_byte_ms);
            (now_ms - started).clamp(0.0, m.per_token_ms * h.own_tokens)
        });
        let queue_ms = (m.per_token_ms * queued - done_on_head).max(0.0);
        let ahead_tokens = queue_ms / m.per_token_ms;
        let decoding = f64::from(in_flight.saturating_sub(active));
        Prediction {
            ttft_ms: m.base_ms
                + m.per_token_ms * (ahead_tokens + own_tokens)
                + m.per_decode_ms * decoding,
            ahead_tokens,
            decoding,
        }
    }

    /// Records a dispatched request; returns its id for [`Self::first_byte`] / [`Self::end`].
    pub(crate) fn dispatch(
        &self,
        now_ms: f64,
        own_tokens: f64,
        with_text: bool,
        predicted: Prediction,
        streaming: Streaming,
    ) -> u64 {
        let mut inner = self.lock();
        inner.next_id += 1;
        let id = inner.next_id;
        if with_text {
            inner.mean_own_tokens += LEARN_RATE * (own_tokens - inner.mean_own_tokens);
            inner.own_weight += LEARN_RATE * (1.0 - inner.own_weight);
        }
        let horizon = predicted.ttft_ms.max(1.0);
        inner.pending.push(
            id,
            Pending {
                own_tokens,
                ahead_tokens: predicted.ahead_tokens,
                decoding: predicted.decoding,
                sent_ms: now_ms,
                counts_until_ms: match streaming {
                    Streaming::Yes => None,
                    Streaming::No => Some(now_ms + horizon),
                    Streaming::Unknown => Some(now_ms + 2.0 * horizon),
                },
            },
        );
        id
    }

    /// The request's first response byte arrived at `now_ms`: it leaves the queue, and when
    /// `learn` (a streamed response, so the byte is the first token) its time teaches the
    /// fleet's model and this worker's speed.
    pub(crate) fn first_byte(&self, id: u64, now_ms: f64, learn: bool, fleet: &FleetCost) {
        let mut inner = self.lock();
        let Some(p) = inner.pending.remove(id) else {
            return;
        };
        inner.last_first_byte_ms = inner.last_first_byte_ms.max(now_ms);
        if learn {
            let x = [1.0, (p.ahead_tokens + p.own_tokens) / 1000.0, p.decoding];
            let y = (now_ms - p.sent_ms).max(0.0);
            inner.means.observe(x, y);
            fleet.observe(x, y);
        }
    }

    /// The request ended (or failed) without a first byte: it leaves the queue.
    pub(crate) fn end(&self, id: u64) {
        self.lock().pending.remove(id);
    }

    /// Requests pending on this worker (tests).
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.lock().pending.len()
    }
}

impl Learned {
    /// One sample's worth of pseudo-data at unit features that `prior` fits exactly.
    fn new(prior: CostModel) -> Self {
        let mut xx = [[0.0; 3]; 3];
        for (i, row) in xx.iter_mut().enumerate() {
            row[i] = 1.0;
        }
        Self {
            xx,
            xy: prior.as_vec(),
            model: prior,
        }
    }

    fn observe(&mut self, x: [f64; 3], y: f64, prior: CostModel) {
        for i in 0..3 {
            for j in 0..3 {
                self.xx[i][j] += LEARN_RATE * (x[i] * x[j] - self.xx[i][j]);
            }
            self.xy[i] += LEARN_RATE * (x[i] * y - self.xy[i]);
        }
        // (XX + r I) theta = XY + r theta0
        let p = prior.as_vec();
        let mut a = self.xx;
        let mut b = self.xy;
        for i in 0..3 {
            a[i][i] += RIDGE;
            b[i] += RIDGE * p[i];
        }
        if let Some(theta) = solve3(a, b) {
            self.model = CostModel::from_vec(theta);
        }
    }
}

/// Solves `a x = b` by Gaussian elimination with partial pivoting; `None` when singular.
fn solve3(mut a: [[f64; 3]; 3], mut b: [f64; 3]) -> Option<[f64; 3]> {
    for col in 0..3 {
        let pivot = (col..3).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        for row in col + 1..3 {
            let f = a[row][col] / a[col][col];
            let top = a[col];
            for (v, t) in a[row].iter_mut().zip(top).skip(col) {
                *v -= f * t;
            }
            b[row] -= f * b[col];
        }
    }
    let mut x = [0.0; 3];
    for row in (0..3).rev() {
        let s: f64 = (row + 1..3).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - s) / a[row][row];
    }
    x.iter().all(|v| v.is_finite()).then_some(x)
}

#[cfg(test)]
mod tests;

//! The summary of a run, computed from its records.
//!
//! Warm-up records are excluded from every figure (they still count as a session's previous
//! turn for stickiness, since the router saw them). Definitions:
//!
//! - *cached-token ratio*: total cached prompt tokens over total prompt tokens, over successful
//!   requests whose response reported both (token-weighted, not a mean of ratios);
//! - *stickiness*: among successful turns after a session's first successful turn, the share
//!   served by the same worker as the session's previous successful turn (both must name one);
//! - *worker*: `x-smg-routed-worker-id`, else `x-sim-worker-id` (a run straight at a worker);
//! - *load imbalance*: the busiest worker's request count over the mean across the fleet: the
//!   `--expected-workers` given, or else the workers that served at least one request (a worker
//!   that got nothing is invisible to the bench unless it is told the fleet size);
//! - *uncached tokens per worker*: the prefill work each worker did, the sum of `prompt_tokens -
//!   cached_tokens` over its successful measured requests that reported both; its max/mean is
//!   over the same fleet as the load figure. Request counts hide it: a worker that gets every
//!   cold prefix (a new system prompt, a sub-agent placed away from its parent) can serve its
//!   share of requests and still do most of the fleet's prefill, serialized;
//! - *ideal cached ratio* (trace replay): the ideal cached tokens over the prompt tokens as
//!   sent (both counted by the bench as the simulated worker tokenizes), over successful
//!   measured requests; see [`crate::trace::ideal`];
//! - *throughputs*: successful requests and their output tokens over the window from the first
//!   measured send to the last measured end.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::metrics::percentiles::Percentiles;
use crate::metrics::record::RequestRecord;

/// Stickiness counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Stickiness {
    /// Turns after the first whose worker and previous worker are both known.
    pub eligible: u64,
    /// Of those, served by the same worker as the previous turn.
    pub same: u64,
    /// `same / eligible`, when anything was eligible.
    pub ratio: Option<f64>,
}

/// Figures for one turn index across sessions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnStat {
    /// Zero-based turn index.
    pub turn_index: u32,
    /// Successful measured requests at this index.
    pub requests: u64,
    /// Mean prompt tokens reported.
    pub mean_prompt_tokens: Option<f64>,
    /// Cached-token ratio at this index.
    pub cached_ratio: Option<f64>,
}

/// Everything a run reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Measured requests (warm-up excluded), successes and failures.
    pub requests: u64,
    /// Successful measured requests.
    pub ok: u64,
    /// Failed measured requests.
    pub failed: u64,
    /// Warm-up requests excluded.
    pub warmup: u64,
    /// Distinct sessions with at least one measured request.
    pub sessions: u64,
    /// Measured window, seconds.
    pub duration_s: f64,
    /// Successful requests per second.
    pub request_throughput: f64,
    /// Output tokens per second.
    pub output_token_throughput: f64,
    /// Time to first token, ms.
    pub ttft_ms: Option<Percentiles>,
    /// Inter-token latency, ms.
    pub itl_ms: Option<Percentiles>,
    /// End-to-end latency, ms.
    pub e2e_ms: Option<Percentiles>,
    /// Prompt tokens reported, total.
    pub prompt_tokens: u64,
    /// Cached prompt tokens reported, total.
    pub cached_tokens: u64,
    /// Cached-token ratio.
    pub cached_ratio: Option<f64>,
    /// Trace replay: the cached share one unbounded prefix cache would reach on the prompts as
    /// sent (successful measured requests); compare with `cached_ratio`.
    pub ideal_cached_ratio: Option<f64>,
    /// Per turn index.
    pub by_turn: Vec<TurnStat>,
    /// Stickiness.
    pub stickiness: Stickiness,
    /// Measured requests per worker.
    pub workers: BTreeMap<String, u64>,
    /// Workers counted in the mean: `--expected-workers`, or those seen if more.
    pub fleet_size: u64,
    /// Busiest worker's count over the mean across `fleet_size` workers.
    pub load_max_over_mean: Option<f64>,
    /// Uncached prompt tokens (prefill work) per worker.
    pub uncached_tokens_per_worker: BTreeMap<String, u64>,
    /// Busiest worker's uncached prompt tokens over the mean across `fleet_size` workers.
    pub uncached_max_over_mean: Option<f64>,
    /// Failures by `status code` (`transport` when no response arrived).
    pub errors: BTreeMap<String, u64>,
}

#[derive(Default)]
struct TokenSums {
    requests: u64,
    prompt_n: u64,
    prompt: u64,
    cached_prompt: u64,
    cached: u64,
}

impl TokenSums {
    fn add(&mut self, r: &RequestRecord) {
        self.requests += 1;
        if let Some(p) = r.prompt_tokens {
            self.prompt_n += 1;
            self.prompt += p;
            if let Some(c) = r.cached_tokens {
                self.cached_prompt += p;
                self.cached += c;
            }
        }
    }

    fn ratio(&self) -> Option<f64> {
        (self.cached_prompt > 0).then(|| self.cached as f64 / self.cached_prompt as f64)
    }
}

impl Summary {
    /// Summarizes `records` (any order); `expected_workers` is the fleet size when known.
    pub fn from_records(records: &[RequestRecord], expected_workers: Option<u64>) -> Self {
        let measured: Vec<&RequestRecord> = records.iter().filter(|r| !r.warmup).collect();
        let ok: Vec<&RequestRecord> = measured.iter().copied().filter(|r| r.ok).collect();
        let start = measured
            .iter()
            .map(|r| r.start_ms)
            .fold(f64::INFINITY, f64::min);
        let end = measured
            .iter()
            .map(|r| r.end_ms())
            .fold(f64::NEG_INFINITY, f64::max);
        let duration_s = if end > start {
            (end - start) / 1000.0
        } else {
            0.0
        };
        let per_s = |n: f64| {
            if duration_s > 0.0 {
                n / duration_s
            } else {
                0.0
            }
        };
        let output: u64 = ok.iter().filter_map(|r| r.output_tokens).sum();

        let mut totals = TokenSums::default();
        let mut by_turn: BTreeMap<u32, TokenSums> = BTreeMap::new();
        for r in &ok {
            totals.add(r);
            by_turn.entry(r.turn_index).or_default().add(r);
        }

        let mut workers: BTreeMap<String, u64> = BTreeMap::new();
        for w in measured.iter().filter_map(|r| r.worker()) {
            *workers.entry(w.to_owned()).or_default() += 1;
        }
        let fleet_size = expected_workers.unwrap_or(0).max(workers.len() as u64);
        let load_max_over_mean = max_over_mean(&workers, fleet_size);
        let mut uncached: BTreeMap<String, u64> = BTreeMap::new();
        for r in &ok {
            if let (Some(w), Some(p), Some(c)) = (r.worker(), r.prompt_tokens, r.cached_tokens) {
                *uncached.entry(w.to_owned()).or_default() += p.saturating_sub(c);
            }
        }
        let uncached_max_over_mean = max_over_mean(&uncached, fleet_size);

        let mut errors: BTreeMap<String, u64> = BTreeMap::new();
        for r in measured.iter().filter(|r| !r.ok) {
            let status = r
                .status
                .map_or_else(|| "transport".to_owned(), |s| s.to_string());
            let key = match &r.error_code {
                Some(code) if r.status.is_some() => format!("{status} {code}"),
                _ => status,
            };
            *errors.entry(key).or_default() += 1;
        }

        let (ideal_cached, ideal_prompt) = ok
            .iter()
            .filter_map(|r| r.ideal_cached_tokens.zip(r.ideal_prompt_tokens))
            .fold((0u64, 0u64), |(c, p), (rc, rp)| (c + rc, p + rp));
        let sessions = measured
            .iter()
            .map(|r| r.session_id.as_str())
            .collect::<std::collections::HashSet<_>>();
        Self {
            requests: measured.len() as u64,
            ok: ok.len() as u64,
            failed: (measured.len() - ok.len()) as u64,
            warmup: (records.len() - measured.len()) as u64,
            sessions: sessions.len() as u64,
            duration_s,
            request_throughput: per_s(ok.len() as f64),
            output_token_throughput: per_s(output as f64),
            ttft_ms: Percentiles::of(ok.iter().filter_map(|r| r.ttft_ms)),
            itl_ms: Percentiles::of(ok.iter().filter_map(|r| r.itl_ms)),
            e2e_ms: Percentiles::of(ok.iter().map(|r| r.e2e_ms)),
            prompt_tokens: totals.prompt,
            cached_tokens: totals.cached,
            cached_ratio: totals.ratio(),
            ideal_cached_ratio: (ideal_prompt > 0)
                .then(|| ideal_cached as f64 / ideal_prompt as f64),
            by_turn: by_turn
                .into_iter()
                .map(|(turn_index, s)| TurnStat {
                    turn_index,
                    requests: s.requests,
                    mean_prompt_tokens: (s.prompt_n > 0)
                        .then(|| s.prompt as f64 / s.prompt_n as f64),
                    cached_ratio: s.ratio(),
                })
                .collect(),
            stickiness: stickiness(records),
            workers,
            fleet_size,
            load_max_over_mean,
            uncached_tokens_per_worker: uncached,
            uncached_max_over_mean,
            errors,
        }
    }
}

/// The largest value over the mean across `fleet` workers (those absent count as 0); `None`
/// when nothing was counted.
fn max_over_mean(per_worker: &BTreeMap<String, u64>, fleet: u64) -> Option<f64> {
    let total: u64 = per_worker.values().sum();
    (total > 0 && fleet > 0).then(|| {
        let max = per_worker.values().copied().max().unwrap_or(0) as f64;
        max / (total as f64 / fleet as f64)
    })
}

/// Stickiness over all records (warm-up turns count only as a previous turn).
pub fn stickiness(records: &[RequestRecord]) -> Stickiness {
    let mut sessions: HashMap<&str, Vec<&RequestRecord>> = HashMap::new();
    for r in records.iter().filter(|r| r.ok) {
        sessions.entry(r.session_id.as_str()).or_default().push(r);
    }
    let mut s = Stickiness::default();
    for turns in sessions.values_mut() {
        turns.sort_by_key(|r| (r.turn_index, r.retry));
        for pair in turns.windows(2) {
            let (prev, cur) = (pair[0], pair[1]);
            if cur.warmup {
                continue;
            }
            if let (Some(a), Some(b)) = (prev.worker(), cur.worker()) {
                s.eligible += 1;
                s.same += u64::from(a == b);
            }
        }
    }
    s.ratio = (s.eligible > 0).then(|| s.same as f64 / s.eligible as f64);
    s
}

#[cfg(test)]
mod tests;

//! Worker loads as the workers report them, and SMG 1.13's worker overload protection.
//!
//! The gateway polls every worker's `GET /v1/loads` (SGLang's older `/get_load`) in the
//! background and hands the core each round's answers as one immutable [`WorkerLoads`]: per
//! worker, its queued (waiting) requests and its KV token usage. Nothing here polls or reads a
//! clock; a decision reads the loads it was given.
//!
//! **Overload protection** ([`OverloadConfig`], SMG's `--worker-overload-waiting-requests` 8,
//! `--worker-overload-token-usage` 0.8, on by default): a worker at or above either threshold is
//! left out of placement while another candidate is under both. When every candidate is over
//! them, the request is refused ([`Screen::Shed`], `--worker-overload-shed`) or placed anyway
//! ([`Screen::AllOver`]). A worker without a polled load (not answered yet, or its last poll
//! failed) counts as under: protection never takes out a worker it knows nothing about.
//!
//! `ttft_aware` and `agentic` screen on the waiting queue only: they price KV occupancy
//! themselves (the prefix index bounded by each worker's capacity, the session ledger's working
//! sets and what a placement would evict), and a KV usage polled every 10 s says little about
//! room (a full prefix cache is mostly evictable: SGLang leaves the evictable part out of
//! `token_usage`, other engines and berth's sim worker do not), so vetoing on it sent their
//! placements to the workers that happened to fill last, for up to a poll interval.

use super::WorkerId;

/// One worker's load as it reported it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct WorkerLoad {
    /// Requests queued on the worker, not yet running (`num_waiting_reqs`, summed across
    /// data-parallel ranks when one worker stands for several).
    pub waiting_reqs: u32,
    /// KV cache token usage in [0, 1] (`token_usage`, the mean across ranks).
    pub token_usage: f64,
}

/// The loads of one poll round, immutable (the gateway swaps in a new one each round).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkerLoads {
    /// Sorted by worker id, one entry per worker at most.
    entries: Vec<(WorkerId, WorkerLoad)>,
}

impl WorkerLoads {
    /// The loads of a round (a later entry for the same worker replaces an earlier one).
    pub fn new(mut entries: Vec<(WorkerId, WorkerLoad)>) -> Self {
        entries.reverse();
        entries.sort_by_key(|(w, _)| *w);
        entries.dedup_by_key(|(w, _)| *w);
        Self { entries }
    }

    /// `w`'s load, when it answered.
    pub fn get(&self, w: WorkerId) -> Option<&WorkerLoad> {
        self.entries
            .binary_search_by_key(&w, |(id, _)| *id)
            .ok()
            .map(|i| &self.entries[i].1)
    }

    /// Every worker's load, by id.
    pub fn iter(&self) -> impl Iterator<Item = &(WorkerId, WorkerLoad)> {
        self.entries.iter()
    }

    /// Whether no worker answered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// SMG 1.13's worker overload protection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OverloadConfig {
    /// On unless `--disable-worker-overload-protection`.
    pub enabled: bool,
    /// `--worker-overload-waiting-requests`: queued requests at or above which a worker is
    /// overloaded (>= 1).
    pub waiting_requests: u32,
    /// `--worker-overload-token-usage`: KV token usage at or above which a worker is
    /// overloaded, in (0, 1].
    pub token_usage: f64,
    /// `--worker-overload-shed`: refuse (503) when every candidate is overloaded.
    pub shed: bool,
}

/// SMG's defaults.
pub const DEFAULT_OVERLOAD_WAITING_REQUESTS: u32 = 8;
/// SMG's default.
pub const DEFAULT_OVERLOAD_TOKEN_USAGE: f64 = 0.8;

impl Default for OverloadConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            waiting_requests: DEFAULT_OVERLOAD_WAITING_REQUESTS,
            token_usage: DEFAULT_OVERLOAD_TOKEN_USAGE,
            shed: false,
        }
    }
}

impl OverloadConfig {
    /// Whether `load` is at or above either threshold.
    pub fn is_over(&self, load: &WorkerLoad) -> bool {
        load.waiting_reqs >= self.waiting_requests || load.token_usage >= self.token_usage
    }

    /// Which of `cands` placement may use under `loads`. With `usage` false only the waiting
    /// queue counts (the policies that price KV occupancy themselves).
    pub fn screen(&self, cands: &[WorkerId], loads: Option<&WorkerLoads>, usage: bool) -> Screen {
        let Some(loads) = loads.filter(|_| self.enabled) else {
            return Screen::All;
        };
        let is_over = |l: &WorkerLoad| {
            l.waiting_reqs >= self.waiting_requests || usage && l.token_usage >= self.token_usage
        };
        let over = |w: &WorkerId| loads.get(*w).is_some_and(is_over);
        let n_over = cands.iter().filter(|w| over(w)).count();
        if n_over == 0 {
            Screen::All
        } else if n_over < cands.len() {
            Screen::Under(cands.iter().copied().filter(|w| !over(w)).collect())
        } else if self.shed {
            Screen::Shed
        } else {
            Screen::AllOver
        }
    }
}

/// The outcome of overload protection for one decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Screen {
    /// No candidate is overloaded (or protection is off, or nothing was polled).
    All,
    /// Some are: placement uses only these (sorted, non-empty).
    Under(Vec<WorkerId>),
    /// Every candidate is overloaded: placed anyway.
    AllOver,
    /// Every candidate is overloaded and `--worker-overload-shed` is on: refused.
    Shed,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(waiting: u32, usage: f64) -> WorkerLoad {
        WorkerLoad {
            waiting_reqs: waiting,
            token_usage: usage,
        }
    }

    const W: [WorkerId; 3] = [WorkerId(0), WorkerId(1), WorkerId(2)];

    #[test]
    fn the_thresholds_are_inclusive() {
        let c = OverloadConfig::default();
        assert!(!c.is_over(&load(7, 0.79)));
        assert!(c.is_over(&load(8, 0.0)));
        assert!(c.is_over(&load(0, 0.8)));
    }

    #[test]
    fn an_overloaded_worker_is_left_out_while_another_is_under_both() {
        let c = OverloadConfig::default();
        let loads = WorkerLoads::new(vec![
            (W[0], load(9, 0.1)),
            (W[1], load(0, 0.95)),
            (W[2], load(2, 0.5)),
        ]);
        assert_eq!(c.screen(&W, Some(&loads), true), Screen::Under(vec![W[2]]));
        // nothing over: everyone
        let calm = WorkerLoads::new(vec![(W[0], load(1, 0.1)), (W[2], load(7, 0.79))]);
        assert_eq!(c.screen(&W, Some(&calm), true), Screen::All);
        // a worker that did not answer counts as under
        let partial = WorkerLoads::new(vec![(W[0], load(9, 0.1)), (W[1], load(9, 0.1))]);
        assert_eq!(
            c.screen(&W, Some(&partial), true),
            Screen::Under(vec![W[2]])
        );
    }

    #[test]
    fn all_over_places_anyway_or_sheds() {
        let loads = WorkerLoads::new(W.iter().map(|w| (*w, load(8, 0.9))).collect());
        let c = OverloadConfig::default();
        assert_eq!(c.screen(&W, Some(&loads), true), Screen::AllOver);
        let shed = OverloadConfig { shed: true, ..c };
        assert_eq!(shed.screen(&W, Some(&loads), true), Screen::Shed);
        // only the candidates count: a single under worker elsewhere does not help
        assert_eq!(shed.screen(&W[..2], Some(&loads), true), Screen::Shed);
    }

    #[test]
    fn without_usage_only_the_queue_counts() {
        let c = OverloadConfig::default();
        let loads = WorkerLoads::new(vec![(W[0], load(0, 1.0)), (W[1], load(8, 0.0))]);
        assert_eq!(
            c.screen(&W, Some(&loads), false),
            Screen::Under(vec![W[0], W[2]])
        );
        assert_eq!(c.screen(&W, Some(&loads), true), Screen::Under(vec![W[2]]));
    }

    #[test]
    fn off_or_unpolled_screens_nothing() {
        let loads = WorkerLoads::new(W.iter().map(|w| (*w, load(100, 1.0))).collect());
        let off = OverloadConfig {
            enabled: false,
            shed: true,
            ..OverloadConfig::default()
        };
        assert_eq!(off.screen(&W, Some(&loads), true), Screen::All);
        assert_eq!(
            OverloadConfig::default().screen(&W, None, true),
            Screen::All
        );
    }

    #[test]
    fn a_round_keeps_one_entry_per_worker_the_last_given() {
        let l = WorkerLoads::new(vec![
            (W[2], load(1, 0.0)),
            (W[0], load(2, 0.0)),
            (W[2], load(3, 0.0)),
        ]);
        assert_eq!(l.iter().count(), 2);
        assert_eq!(l.get(W[2]).map(|l| l.waiting_reqs), Some(3));
        assert_eq!(l.get(W[1]), None);
    }
}

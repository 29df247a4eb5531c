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
//! **The requests sent since the round count as queued while they await their first byte**
//! (berth's addition): a round is up to `--load-monitor-interval` (10 s) old, and SMG's rule
//! alone sends *every* placement to the workers that were under at the round until the next
//! one. Under KV pressure (the agentic coding trace over KV, `cache_aware`: half the placements
//! vetoed) that put the whole traffic on one worker for a whole poll interval, 15-17 requests
//! deep, its TTFT 7-8 s: the tail of every run (docs/benchmarks.md, issue #17 session 6). Each
//! round records the requests this gateway had in flight to each worker
//! ([`WorkerLoad::in_flight`]) and, of those, the ones whose answer had not yet sent its first
//! byte ([`WorkerLoad::awaiting`]); a worker's waiting count is the round's plus what it has
//! awaiting a first byte above the round's, so an under worker takes at most
//! `waiting_requests` more requests that it has not started answering before every candidate
//! is over and the policy's own rule (the fewest in flight) places. A request that has had its
//! first byte is running (decoding), not queued: counting every request in flight since the
//! round as queued (session 6's rule) vetoed workers for their ordinary concurrency, most of all
//! in the first poll interval, whose round is taken before any traffic (nothing in flight): on
//! an engine with 64 running slots and nothing waiting, 8 streams decoding at once made a
//! worker "overloaded"; under KV pressure those vetoes sent sub-agents off their parent's
//! worker and new sessions off their group's holder, and each such copy of a shared prompt
//! evicted another there: the collapse of the `kvpressure` benchmark in every
//! `--cache-feedback` mode (docs/benchmarks.md, issue #17 session 8). The other half of the
//! same herd: a worker over on KV usage at the round stayed out for the whole interval after
//! its requests had finished. KV in use (SGLang's `token_usage`, berth's sim worker's) is held
//! by running requests, so with fewer requests in flight than at the round, the round's usage
//! counts in proportion (none in flight: none held; more than at the round: the round's usage,
//! the queue rule above covers the rest). Requests other clients send the worker are seen only
//! at the next round.
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
    /// Requests this gateway had in flight to the worker when the round was taken (0 when
    /// unknown): with fewer in flight now, the round's KV usage counts in proportion.
    pub in_flight: u32,
    /// Of those, the requests whose answer had not yet sent its first byte: what the worker
    /// has awaiting a first byte above this count was sent since the round and counts as
    /// queued until the next round (0 when unknown).
    pub awaiting: u32,
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
    /// queue counts (the policies that price KV occupancy themselves). `flight`: each worker's
    /// requests in flight through this gateway now and, of those, the ones awaiting their
    /// answer's first byte; what it has awaiting above the round's [`WorkerLoad::awaiting`]
    /// was sent since the round and counts as queued, so a worker under the thresholds at a
    /// round takes at most `waiting_requests` more that it has not started answering before it
    /// counts as over too, not every placement until the next round (a request answering, past
    /// its first byte, is running, not queued); with fewer in flight than at the round, its KV
    /// usage counts in proportion (see the module docs).
    pub fn screen(
        &self,
        cands: &[WorkerId],
        loads: Option<&WorkerLoads>,
        usage: bool,
        flight: impl Fn(WorkerId) -> (u32, u32),
    ) -> Screen {
        let Some(loads) = loads.filter(|_| self.enabled) else {
            return Screen::All;
        };
        let is_over = |w: WorkerId, l: &WorkerLoad| {
            let (now, awaiting) = flight(w);
            let since = awaiting.saturating_sub(l.awaiting);
            // KV in use is held by running requests: what finished since released its share
            let held = if l.in_flight > 0 && now < l.in_flight {
                f64::from(now) / f64::from(l.in_flight)
            } else {
                1.0
            };
            l.waiting_reqs.saturating_add(since) >= self.waiting_requests
                || usage && l.token_usage * held >= self.token_usage
        };
        let over = |w: &WorkerId| loads.get(*w).is_some_and(|l| is_over(*w, l));
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
            in_flight: 0,
            awaiting: 0,
        }
    }

    const W: [WorkerId; 3] = [WorkerId(0), WorkerId(1), WorkerId(2)];

    /// Nothing in flight through the gateway.
    fn none(_: WorkerId) -> (u32, u32) {
        (0, 0)
    }

    #[test]
    fn requests_sent_since_the_round_count_as_queued_until_their_first_byte() {
        let c = OverloadConfig::default();
        // at the round W0 was under (2 waiting, 3 in flight through us, none answering yet),
        // W1 and W2 over
        let round = |w0_in_flight| {
            WorkerLoads::new(vec![
                (
                    W[0],
                    WorkerLoad {
                        in_flight: w0_in_flight,
                        awaiting: w0_in_flight,
                        ..load(2, 0.1)
                    },
                ),
                (W[1], load(0, 0.9)),
                (W[2], load(9, 0.1)),
            ])
        };
        let loads = round(3);
        // `n` in flight on W0 now, none of them answering yet
        let now = |n: u32| move |w: WorkerId| if w == W[0] { (n, n) } else { (1, 1) };
        // 5 more sent there since: 7 queued, still under
        assert_eq!(
            c.screen(&W, Some(&loads), true, now(8)),
            Screen::Under(vec![W[0]])
        );
        // 6 more: 8 queued, as over as the others; the policy places among all
        assert_eq!(c.screen(&W, Some(&loads), true, now(9)), Screen::AllOver);
        assert_eq!(
            c.screen(&W, Some(&loads), false, now(9)),
            Screen::Under(vec![W[1]])
        );
        // fewer in flight than at the round (answers came back): the round's queue stands
        assert_eq!(
            c.screen(&W, Some(&round(20)), true, now(9)),
            Screen::Under(vec![W[0]])
        );
    }

    #[test]
    fn requests_past_their_first_byte_are_running_not_queued() {
        let c = OverloadConfig::default();
        // a round taken before any traffic: nothing waiting, nothing in flight through us
        let idle = WorkerLoads::new(W.iter().map(|w| (*w, load(0, 0.1))).collect());
        // since then W0 took 12 requests: all answering (decoding) it is not queueing
        let decoding = |w: WorkerId| if w == W[0] { (12, 0) } else { (2, 0) };
        assert_eq!(c.screen(&W, Some(&idle), false, decoding), Screen::All);
        assert_eq!(c.screen(&W, Some(&idle), true, decoding), Screen::All);
        // 7 of them still awaiting their first byte: still under; 8: over
        let waiting = |n: u32| move |w: WorkerId| if w == W[0] { (12, n) } else { (2, 0) };
        assert_eq!(c.screen(&W, Some(&idle), false, waiting(7)), Screen::All);
        assert_eq!(
            c.screen(&W, Some(&idle), false, waiting(8)),
            Screen::Under(vec![W[1], W[2]])
        );
    }

    #[test]
    fn kv_usage_counts_in_proportion_to_the_requests_still_in_flight() {
        let c = OverloadConfig::default();
        // at the round W1 had 0.9 of its KV in use by the 4 requests we had in flight there
        let loads = WorkerLoads::new(vec![
            (W[0], load(0, 0.1)),
            (
                W[1],
                WorkerLoad {
                    in_flight: 4,
                    ..load(0, 0.9)
                },
            ),
            (W[2], load(9, 0.1)),
        ]);
        let w1 = |n: u32| move |w: WorkerId| if w == W[1] { (n, 0) } else { (0, 0) };
        // all 4 (or more) still running: over
        assert_eq!(
            c.screen(&W, Some(&loads), true, w1(4)),
            Screen::Under(vec![W[0]])
        );
        assert_eq!(
            c.screen(&W, Some(&loads), true, w1(6)),
            Screen::Under(vec![W[0]])
        );
        // 0.9 x 3/4 = 0.675: under again
        assert_eq!(
            c.screen(&W, Some(&loads), true, w1(3)),
            Screen::Under(vec![W[0], W[1]])
        );
        // nothing in flight at the round: the round's usage stands (someone else's requests)
        let other = WorkerLoads::new(vec![(W[0], load(0, 0.1)), (W[1], load(0, 0.9))]);
        assert_eq!(
            c.screen(&W, Some(&other), true, w1(0)),
            Screen::Under(vec![W[0], W[2]])
        );
    }

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
        assert_eq!(
            c.screen(&W, Some(&loads), true, none),
            Screen::Under(vec![W[2]])
        );
        // nothing over: everyone
        let calm = WorkerLoads::new(vec![(W[0], load(1, 0.1)), (W[2], load(7, 0.79))]);
        assert_eq!(c.screen(&W, Some(&calm), true, none), Screen::All);
        // a worker that did not answer counts as under
        let partial = WorkerLoads::new(vec![(W[0], load(9, 0.1)), (W[1], load(9, 0.1))]);
        assert_eq!(
            c.screen(&W, Some(&partial), true, none),
            Screen::Under(vec![W[2]])
        );
    }

    #[test]
    fn all_over_places_anyway_or_sheds() {
        let loads = WorkerLoads::new(W.iter().map(|w| (*w, load(8, 0.9))).collect());
        let c = OverloadConfig::default();
        assert_eq!(c.screen(&W, Some(&loads), true, none), Screen::AllOver);
        let shed = OverloadConfig { shed: true, ..c };
        assert_eq!(shed.screen(&W, Some(&loads), true, none), Screen::Shed);
        // only the candidates count: a single under worker elsewhere does not help
        assert_eq!(shed.screen(&W[..2], Some(&loads), true, none), Screen::Shed);
    }

    #[test]
    fn without_usage_only_the_queue_counts() {
        let c = OverloadConfig::default();
        let loads = WorkerLoads::new(vec![(W[0], load(0, 1.0)), (W[1], load(8, 0.0))]);
        assert_eq!(
            c.screen(&W, Some(&loads), false, none),
            Screen::Under(vec![W[0], W[2]])
        );
        assert_eq!(
            c.screen(&W, Some(&loads), true, none),
            Screen::Under(vec![W[2]])
        );
    }

    #[test]
    fn off_or_unpolled_screens_nothing() {
        let loads = WorkerLoads::new(W.iter().map(|w| (*w, load(100, 1.0))).collect());
        let off = OverloadConfig {
            enabled: false,
            shed: true,
            ..OverloadConfig::default()
        };
        assert_eq!(off.screen(&W, Some(&loads), true, none), Screen::All);
        assert_eq!(
            OverloadConfig::default().screen(&W, None, true, none),
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

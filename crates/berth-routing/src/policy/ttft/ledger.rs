//! `agentic`'s session ledger: the KV working set each worker carries.
//!
//! A live session keeps its whole history resident on its worker (its next turn resends it), so
//! what a worker must hold is the sum of its live sessions' last prompt sizes: its *working
//! set*. A prefix several sessions share is held once, so a session counts only what it added:
//! its last prompt less its *base*, the prefix of its first prompt its worker already held from
//! other sessions (a system prompt, a parent agent's conversation). The ledger keeps, per keyed
//! session, its worker, base and counted tokens, and per worker the sum; a worker change moves
//! the session's tokens with it.
//!
//! A session counts as live until it has been idle for [`LIVE_GAPS`] times the fleet's typical
//! gap between a session's turns (an exponentially weighted mean of the gaps observed), within
//! [`MIN_LIVE_MS`] and [`MAX_LIVE_MS`] (the upper bound before any gap was seen): sessions that
//! ended stop counting about as fast as the traffic turns over, whether turns come every 200 ms
//! or every minute.
//!
//! Each session also carries its *turn rate* (turns per second: the inverse of its own typical
//! gap between turns, the fleet's typical gap until it has one), and each worker the sum over
//! its live sessions: the share of the fleet's turns the worker can expect, what `agentic`'s
//! turn-boundary rebalance reads (`agentic.rs`).
//!
//! And it keeps how many turns a session takes (*expected turns*, what placement weighs a new
//! session's life by, `agentic.rs`): the exponentially weighted mean of the turns of the
//! sessions that ended (went idle for the live window), or the mean turns the live sessions
//! have taken so far when that is more (sessions that end first are the short ones, so the
//! mean of ended sessions runs low while a trace is young; the live sessions' count so far is
//! a lower bound of their length).
//!
//! And two sizes of a *continuing turn* (a pinned session's turn that streamed unread, on the
//! worker that holds its history: what most of an agentic fleet's turns are, and what the
//! gateway cannot size itself since it does not read them), each an exponentially weighted
//! mean over the engines' reports:
//!
//! - what such a turn *cost*, its reported uncached tokens (what an unread turn counts for in
//!   a worker's queue, and the unit of the fleet's load: the workers are busy with it),
//!   history the engine evicted included;
//! - what it *added*, the tokens its prompt grew by since the session's previous answer on
//!   that worker (at most its uncached tokens): the *typical continuing turn* placement prices
//!   a session's coming turns (and its band) by. The history a turn re-prefills because
//!   its worker evicted it is a cost of the KV pressure placement creates, priced where it
//!   arises (the overflow, `agentic.rs`); counted in the typical turn as well, each eviction
//!   made the next copy look cheaper than keeping a session with its group, and the copies
//!   evicted more (docs/benchmarks.md, #17 session 9).
//!
//! And where each live session's conversation has got to, its *tip*: the chained hash of the
//! last whole chunk of its latest prompt whose text was read, when no worker's prefix index
//! held that chunk before (text of this conversation alone, not a prefix other sessions
//! share). A new key whose prompt's chunk chain passes through a live session's tip and goes
//! on continues that session's conversation (a sub-agent started with its parent's
//! conversation, or a client that re-keyed it): [`Ledger::parent_of`] names that session and
//! its worker, and placement keeps it there (`agentic.rs`). One conversation goes on one way
//! (the parent's answer comes next, whichever sub-agent resends it), so a tip that new
//! sessions continue with different chunks is a prefix they share, not a conversation (the
//! first session of a group whose first prompt was the group's shared prompt alone, with less
//! than a chunk of its own): it names no parent from then on. Nor does a tip two live
//! sessions share.
//!
//! Bounded: at most [`MAX_SESSIONS`] sessions (past it the least recently used goes), and the
//! expiry queue at most [`QUEUE_PER_SESSION`] entries per session (a session is queued again
//! only after a quarter of the live window). Pure: times are milliseconds the caller passes.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};

use crate::{IdBuildHasher, WorkerId};

/// A session stops counting once idle for this many typical gaps between turns...
pub const LIVE_GAPS: f64 = 4.0;
/// ...but never sooner than this (ms)...
pub const MIN_LIVE_MS: u64 = 1_000;
/// ...nor later than this (ms; also the window before any gap was seen).
pub const MAX_LIVE_MS: u64 = 600_000;
/// Weight of the newest gap in the typical gap.
const GAP_RATE: f64 = 0.05;
/// Sessions the ledger remembers at most.
pub const MAX_SESSIONS: usize = 1 << 16;
/// Expiry queue entries per remembered session at most.
const QUEUE_PER_SESSION: usize = 5;
/// Weight of a session's newest gap in its own typical gap.
const SESSION_GAP_RATE: f64 = 0.3;

#[derive(Debug, Clone, Copy)]
struct Session {
    worker: WorkerId,
    /// Tokens counted: the last prompt less `base`.
    tokens: u64,
    /// Prefix tokens of the first prompt its worker already held from other sessions.
    base: u64,
    last_used: u64,
    /// When the session was last pushed on the expiry queue.
    queued_at: u64,
    /// Its own typical gap between turns, ms (none before its second turn).
    gap_ms: Option<f64>,
    /// Turns per second counted on its worker.
    rate: f64,
    /// Turns recorded.
    turns: u32,
    /// Where its conversation has got to (module docs), once a prompt of it was read.
    tip: Option<u64>,
}

/// The live sessions whose conversation got to one tip, and how new sessions went on from it.
#[derive(Debug, Clone, Copy, Default)]
struct Tip {
    /// How many.
    sessions: u32,
    /// The XOR of their keys: the one session's key when there is one.
    keys: u128,
    /// The chunk the first new session that passed through it went on with.
    next: Option<u64>,
    /// A new session went on with another chunk: a shared prefix, no one's conversation.
    split: bool,
}

/// The ledger's key of a session: its routing key within its model (a 128-bit hash).
pub(crate) fn session_key(key: &(impl AsRef<[u8]> + ?Sized), model: Option<&str>) -> u128 {
    let model = model.unwrap_or("");
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&(model.len() as u64).to_le_bytes());
    h.update(model.as_bytes());
    h.update(key.as_ref());
    h.digest128()
}

/// What the ledger holds (for metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LedgerStats {
    /// Live sessions remembered.
    pub sessions: usize,
    /// Sessions dropped because the ledger was full, since start.
    pub dropped_full: u64,
}

/// The per-session and per-worker working sets.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    sessions: HashMap<u128, Session>,
    per_worker: HashMap<WorkerId, u64>,
    /// Per worker, the sum of its live sessions' turn rates.
    rate_per_worker: HashMap<WorkerId, f64>,
    /// Per worker, its live sessions.
    sessions_per_worker: HashMap<WorkerId, u32>,
    /// (session, when queued), oldest first.
    expiry: VecDeque<(u128, u64)>,
    /// The typical gap between a session's turns, ms (none seen yet: `None`).
    gap_ms: Option<f64>,
    /// The typical turns of a session that ended (none ended yet: `None`).
    ended_turns: Option<f64>,
    /// Turns taken so far by the live sessions, summed.
    live_turns: u64,
    /// Per tip (a chunk hash: secret-seeded, so the id hasher), what the module docs say.
    tips: HashMap<u64, Tip, IdBuildHasher>,
    /// A continuing turn's reported uncached tokens (none reported yet: `None`).
    turn_tokens: Option<f64>,
    /// The tokens a continuing turn's prompt grew by (none reported yet: `None`).
    turn_growth: Option<f64>,
    dropped_full: u64,
}

impl Ledger {
    /// The tokens `w`'s live sessions hold.
    pub(crate) fn working_set(&self, w: WorkerId) -> u64 {
        self.per_worker.get(&w).copied().unwrap_or(0)
    }

    /// The turns per second `w`'s live sessions are expected to send.
    pub(crate) fn turn_rate(&self, w: WorkerId) -> f64 {
        self.rate_per_worker.get(&w).copied().unwrap_or(0.0)
    }

    /// How many live sessions `w` carries.
    pub(crate) fn sessions_on(&self, w: WorkerId) -> u32 {
        self.sessions_per_worker.get(&w).copied().unwrap_or(0)
    }

    /// Whether the ledger holds session `key` (a live one).
    pub(crate) fn holds(&self, key: u128) -> bool {
        self.sessions.contains_key(&key)
    }

    /// The turns per second of session `key` and the turns it took so far ((0, 0) when
    /// unknown).
    pub(crate) fn session_rate(&self, key: u128) -> (f64, u32) {
        self.sessions
            .get(&key)
            .map_or((0.0, 0), |s| (s.rate, s.turns))
    }

    /// How many turns a session takes, at least 1 (module docs).
    pub(crate) fn expected_turns(&self) -> f64 {
        let live = match self.sessions.len() {
            0 => 0.0,
            n => self.live_turns as f64 / n as f64,
        };
        self.ended_turns.unwrap_or(0.0).max(live).max(1.0)
    }

    /// An engine reported `uncached` tokens for a continuing turn whose prompt grew by
    /// `growth` tokens since the session's previous answer (`None`: that answer is not known,
    /// or the prompt shrank) (module docs).
    pub(crate) fn observe_turn(&mut self, uncached: f64, growth: Option<f64>) {
        fn mean(m: &mut Option<f64>, x: f64) {
            if x.is_finite() && x >= 0.0 {
                *m = Some(m.map_or(x, |m| m + GAP_RATE * (x - m)));
            }
        }
        mean(&mut self.turn_tokens, uncached);
        if let Some(g) = growth {
            mean(&mut self.turn_growth, g.min(uncached));
        }
    }

    /// A continuing turn's reported uncached tokens, once an engine reported one.
    pub(crate) fn turn_tokens(&self) -> Option<f64> {
        self.turn_tokens
    }

    /// The typical continuing turn: the tokens it adds to its session's prompt, once an engine
    /// reported one.
    pub(crate) fn turn_growth(&self) -> Option<f64> {
        self.turn_growth
    }

    /// The live session whose conversation a new session's prompt continues, and its worker:
    /// of the tips on the prompt's chunk chain `chunks` that one live session alone has and
    /// that the prompt goes on from, the last (a sub-agent of a sub-agent continues the deeper
    /// conversation). A tip the prompt goes on from with another chunk than the first new
    /// session that passed through it did is split (module docs). `None` when no tip is left.
    pub(crate) fn parent_of(&mut self, chunks: &[u64]) -> Option<(u128, WorkerId)> {
        if self.tips.is_empty() {
            return None;
        }
        for (i, h) in chunks.iter().enumerate().rev() {
            let Some(next) = chunks.get(i + 1).copied() else {
                continue; // the prompt ends there: the same prompt again, not a continuation
            };
            let Some(tip) = self.tips.get_mut(h) else {
                continue;
            };
            if tip.split {
                continue;
            }
            if *tip.next.get_or_insert(next) != next {
                tip.split = true;
                continue;
            }
            if tip.sessions == 1
                && let Some(s) = self.sessions.get(&tip.keys)
            {
                return Some((tip.keys, s.worker));
            }
        }
        None
    }

    /// Session `key`'s conversation has got to `tip` (module docs); nothing for a session the
    /// ledger does not hold.
    pub(crate) fn set_tip(&mut self, key: u128, tip: u64) {
        let Some(s) = self.sessions.get_mut(&key) else {
            return;
        };
        let Some(old) = s.tip.replace(tip) else {
            self.add_tip(tip, key);
            return;
        };
        if old != tip {
            self.drop_tip(old, key);
            self.add_tip(tip, key);
        }
    }

    fn add_tip(&mut self, tip: u64, key: u128) {
        let t = self.tips.entry(tip).or_default();
        t.sessions += 1;
        t.keys ^= key;
    }

    fn drop_tip(&mut self, tip: u64, key: u128) {
        if let Entry::Occupied(mut e) = self.tips.entry(tip) {
            let t = e.get_mut();
            t.sessions = t.sessions.saturating_sub(1);
            t.keys ^= key;
            if t.sessions == 0 {
                e.remove();
            }
        }
    }

    fn add_rate(&mut self, w: WorkerId, rate: f64) {
        *self.rate_per_worker.entry(w).or_insert(0.0) += rate;
    }

    fn sub_rate(&mut self, w: WorkerId, rate: f64) {
        if let Some(r) = self.rate_per_worker.get_mut(&w) {
            *r -= rate;
            // sums of floats drift: what is left of a worker's last session is nothing
            if *r <= 1e-9 {
                self.rate_per_worker.remove(&w);
            }
        }
    }

    /// Turns per second of a session whose typical gap is `gap_ms` (the fleet's when the
    /// session has none yet; 0 while neither is known).
    fn rate_of(&self, gap_ms: Option<f64>) -> f64 {
        gap_ms
            .or(self.gap_ms)
            .map_or(0.0, |g| 1000.0 / g.max(MIN_LIVE_MS as f64 / LIVE_GAPS))
    }

    pub(crate) fn stats(&self) -> LedgerStats {
        LedgerStats {
            sessions: self.sessions.len(),
            dropped_full: self.dropped_full,
        }
    }

    fn add(&mut self, w: WorkerId, tokens: u64) {
        *self.per_worker.entry(w).or_insert(0) += tokens;
        *self.sessions_per_worker.entry(w).or_insert(0) += 1;
    }

    fn sub(&mut self, w: WorkerId, tokens: u64) {
        if let Some(t) = self.per_worker.get_mut(&w) {
            *t = t.saturating_sub(tokens);
            if *t == 0 {
                self.per_worker.remove(&w);
            }
        }
        if let Some(n) = self.sessions_per_worker.get_mut(&w) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.sessions_per_worker.remove(&w);
            }
        }
    }

    /// Drops session `key`; `ended` when it went idle (its turns then count in the typical
    /// session's length), not when the ledger was full.
    fn forget(&mut self, key: u128, ended: bool) {
        if let Some(s) = self.sessions.remove(&key) {
            if let Some(tip) = s.tip {
                self.drop_tip(tip, key);
            }
            self.sub(s.worker, s.tokens);
            self.sub_rate(s.worker, s.rate);
            self.live_turns = self.live_turns.saturating_sub(u64::from(s.turns));
            if ended {
                let t = f64::from(s.turns);
                self.ended_turns = Some(self.ended_turns.map_or(t, |m| m + GAP_RATE * (t - m)));
            }
        }
    }

    /// How long an idle session still counts, ms.
    pub(crate) fn live_window_ms(&self) -> u64 {
        self.gap_ms.map_or(MAX_LIVE_MS, |g| {
            ((g * LIVE_GAPS) as u64).clamp(MIN_LIVE_MS, MAX_LIVE_MS)
        })
    }

    /// Drops the sessions idle for the live window at `now`.
    pub(crate) fn expire(&mut self, now: u64) {
        let window = self.live_window_ms();
        while let Some(&(key, at)) = self.expiry.front() {
            if now.saturating_sub(at) < window {
                break;
            }
            self.expiry.pop_front();
            let Some(s) = self.sessions.get_mut(&key).filter(|s| s.queued_at == at) else {
                continue; // a stale entry: the session was queued again or forgotten
            };
            if now.saturating_sub(s.last_used) >= window {
                self.forget(key, true);
            } else {
                // used since it was queued without being queued again: due from its last use
                s.queued_at = s.last_used;
                self.expiry.push_back((key, s.last_used));
            }
        }
    }

    /// Session `key`'s turn went to `w` at `now`; `prompt` is its prompt's tokens (`None`:
    /// unknown, the last known size stays), `held` how many of them `w` already held (the
    /// session's base when this is its first turn).
    pub(crate) fn record(
        &mut self,
        key: u128,
        w: WorkerId,
        prompt: Option<u64>,
        held: u64,
        now: u64,
    ) {
        let prev = self.sessions.get(&key).copied();
        let mut session_gap = None;
        if let Some(p) = prev {
            let gap = now.saturating_sub(p.last_used) as f64;
            self.gap_ms = Some(self.gap_ms.map_or(gap, |g| g + GAP_RATE * (gap - g)));
            session_gap = Some(p.gap_ms.map_or(gap, |g| g + SESSION_GAP_RATE * (gap - g)));
        }
        self.expire(now);
        let prev = self.sessions.get(&key).copied();
        if prev.is_none() && self.sessions.len() >= MAX_SESSIONS {
            self.drop_oldest();
        }
        let base = prev.map_or(held, |p| p.base);
        let tokens = match (prompt, prev) {
            (Some(t), _) => t.saturating_sub(base),
            (None, Some(p)) => p.tokens,
            (None, None) => 0,
        };
        if let Some(p) = prev {
            self.sub(p.worker, p.tokens);
            self.sub_rate(p.worker, p.rate);
        }
        self.add(w, tokens);
        let rate = self.rate_of(session_gap);
        self.add_rate(w, rate);
        self.live_turns += 1;
        let window = self.live_window_ms();
        let requeue = prev.is_none_or(|p| now.saturating_sub(p.queued_at) >= window / 4);
        let queued_at = if requeue {
            now
        } else {
            prev.map_or(now, |p| p.queued_at)
        };
        self.sessions.insert(
            key,
            Session {
                worker: w,
                tokens,
                base,
                last_used: now,
                queued_at,
                gap_ms: session_gap,
                rate,
                turns: prev.map_or(1, |p| p.turns.saturating_add(1)),
                tip: prev.and_then(|p| p.tip),
            },
        );
        if requeue {
            self.expiry.push_back((key, now));
            if self.expiry.len() > QUEUE_PER_SESSION * MAX_SESSIONS {
                // never reached with the requeue period; a hard bound all the same
                if let Some((k, _)) = self.expiry.pop_front() {
                    self.forget(k, false);
                }
            }
        }
    }

    /// Forgets the least recently used session among the oldest queued ones.
    fn drop_oldest(&mut self) {
        while let Some((key, at)) = self.expiry.pop_front() {
            if self.sessions.get(&key).is_some_and(|s| s.queued_at == at) {
                self.forget(key, false);
                self.dropped_full += 1;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;

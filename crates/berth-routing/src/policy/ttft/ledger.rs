//! `agentic`'s session ledger: the KV working set each worker carries.
//!
//! A live session keeps its whole history resident on its worker (its next turn resends it), so
//! what a worker must hold is the sum of its live sessions' last prompt sizes: its *working
//! set*. The ledger keeps, per keyed session, its worker and its last prompt's tokens, and per
//! worker the sum. A session counts as live until [`LIVE_SECS`] after its last turn (a coding
//! agent's human pauses last minutes); a worker change moves its tokens with it.
//!
//! Bounded: at most [`MAX_SESSIONS`] sessions (past it the least recently used goes), and the
//! expiry queue at most [`QUEUE_PER_SESSION`] entries per session (a session is queued again
//! only after a quarter of [`LIVE_SECS`]). Pure: times are seconds the caller passes.

use std::collections::{HashMap, VecDeque};

use crate::WorkerId;

/// A session stops counting this long after its last turn.
pub const LIVE_SECS: u32 = 600;
/// Sessions the ledger remembers at most.
pub const MAX_SESSIONS: usize = 1 << 16;
/// Expiry queue entries per remembered session at most.
const QUEUE_PER_SESSION: usize = 5;

#[derive(Debug, Clone, Copy)]
struct Session {
    worker: WorkerId,
    tokens: u64,
    last_used: u32,
    /// When the session was last pushed on the expiry queue.
    queued_at: u32,
}

/// The ledger's key of a session: its routing key within its model (a 128-bit hash).
pub(crate) fn session_key(key: &str, model: Option<&str>) -> u128 {
    let model = model.unwrap_or("");
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&(model.len() as u64).to_le_bytes());
    h.update(model.as_bytes());
    h.update(key.as_bytes());
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
    /// (session, when queued), oldest first.
    expiry: VecDeque<(u128, u32)>,
    dropped_full: u64,
}

impl Ledger {
    /// The tokens `w`'s live sessions hold.
    pub(crate) fn working_set(&self, w: WorkerId) -> u64 {
        self.per_worker.get(&w).copied().unwrap_or(0)
    }

    pub(crate) fn stats(&self) -> LedgerStats {
        LedgerStats {
            sessions: self.sessions.len(),
            dropped_full: self.dropped_full,
        }
    }

    fn add(&mut self, w: WorkerId, tokens: u64) {
        *self.per_worker.entry(w).or_insert(0) += tokens;
    }

    fn sub(&mut self, w: WorkerId, tokens: u64) {
        if let Some(t) = self.per_worker.get_mut(&w) {
            *t = t.saturating_sub(tokens);
            if *t == 0 {
                self.per_worker.remove(&w);
            }
        }
    }

    fn forget(&mut self, key: u128) {
        if let Some(s) = self.sessions.remove(&key) {
            self.sub(s.worker, s.tokens);
        }
    }

    /// Drops the sessions idle for [`LIVE_SECS`] at `now`.
    pub(crate) fn expire(&mut self, now: u32) {
        while let Some(&(key, at)) = self.expiry.front() {
            if now.saturating_sub(at) < LIVE_SECS {
                break;
            }
            self.expiry.pop_front();
            let Some(s) = self.sessions.get_mut(&key).filter(|s| s.queued_at == at) else {
                continue; // a stale entry: the session was queued again or forgotten
            };
            if now.saturating_sub(s.last_used) >= LIVE_SECS {
                self.forget(key);
            } else {
                // used since it was queued without being queued again: due from its last use
                s.queued_at = s.last_used;
                self.expiry.push_back((key, s.last_used));
            }
        }
    }

    /// Session `key`'s turn went to `w` at `now`; `tokens` is its prompt (`None`: unknown, the
    /// last known size stays).
    pub(crate) fn record(&mut self, key: u128, w: WorkerId, tokens: Option<u64>, now: u32) {
        self.expire(now);
        let prev = self.sessions.get(&key).copied();
        if prev.is_none() && self.sessions.len() >= MAX_SESSIONS {
            self.drop_oldest();
        }
        let tokens = tokens.or(prev.map(|p| p.tokens)).unwrap_or(0);
        if let Some(p) = prev {
            self.sub(p.worker, p.tokens);
        }
        self.add(w, tokens);
        let requeue = prev.is_none_or(|p| now.saturating_sub(p.queued_at) >= LIVE_SECS / 4);
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
                last_used: now,
                queued_at,
            },
        );
        if requeue {
            self.expiry.push_back((key, now));
            if self.expiry.len() > QUEUE_PER_SESSION * MAX_SESSIONS {
                // never reached with the requeue period; a hard bound all the same
                if let Some((k, _)) = self.expiry.pop_front() {
                    self.forget(k);
                }
            }
        }
    }

    /// Forgets the least recently used session among the oldest queued ones.
    fn drop_oldest(&mut self) {
        while let Some((key, at)) = self.expiry.pop_front() {
            if self.sessions.get(&key).is_some_and(|s| s.queued_at == at) {
                self.forget(key);
                self.dropped_full += 1;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: WorkerId = WorkerId(0);
    const B: WorkerId = WorkerId(1);

    #[test]
    fn a_session_counts_its_last_prompt_on_its_worker() {
        let mut l = Ledger::default();
        l.record(1, A, Some(1000), 0);
        l.record(2, A, Some(500), 1);
        l.record(3, B, Some(700), 1);
        assert_eq!((l.working_set(A), l.working_set(B)), (1500, 700));
        // the next turn replaces the last size, it does not add to it
        l.record(1, A, Some(1200), 2);
        assert_eq!(l.working_set(A), 1700);
        // an unread turn keeps the size
        l.record(1, A, None, 3);
        assert_eq!(l.working_set(A), 1700);
        // a move takes the session's tokens along
        l.record(1, B, Some(1300), 4);
        assert_eq!((l.working_set(A), l.working_set(B)), (500, 2000));
        assert_eq!(l.stats().sessions, 3);
    }

    #[test]
    fn idle_sessions_stop_counting() {
        let mut l = Ledger::default();
        l.record(1, A, Some(1000), 0);
        l.record(2, A, Some(400), 0);
        // session 2 keeps talking (more often than the requeue period), session 1 goes quiet
        for t in (10..=LIVE_SECS + 100).step_by(10) {
            l.record(2, A, Some(400), t);
        }
        l.expire(LIVE_SECS + 100);
        assert_eq!(l.working_set(A), 400);
        assert_eq!(l.stats().sessions, 1);
        l.expire(3 * LIVE_SECS);
        assert_eq!(l.working_set(A), 0);
        assert_eq!(l.stats().sessions, 0);
        assert!(l.expiry.is_empty());
        // a session used just after it was queued is still due from its last use
        l.record(3, B, Some(10), 5000);
        l.record(3, B, Some(20), 5001);
        l.expire(5000 + LIVE_SECS);
        assert_eq!(
            l.working_set(B),
            20,
            "used at 5001: live until {}",
            5001 + LIVE_SECS
        );
        l.expire(5001 + LIVE_SECS);
        assert_eq!(l.working_set(B), 0);
        assert!(l.expiry.is_empty());
    }

    #[test]
    fn sessions_are_keyed_by_key_within_model() {
        assert_eq!(session_key("k", Some("m")), session_key("k", Some("m")));
        assert_ne!(session_key("k", Some("m")), session_key("k", Some("n")));
        assert_ne!(session_key("k", None), session_key("j", None));
        assert_ne!(session_key("mk", Some("")), session_key("k", Some("m")));
    }

    #[test]
    fn the_ledger_is_bounded() {
        let mut l = Ledger::default();
        for k in 0..(MAX_SESSIONS as u128 + 10) {
            l.record(k, A, Some(1), 0);
        }
        assert_eq!(l.stats().sessions, MAX_SESSIONS);
        assert_eq!(l.stats().dropped_full, 10);
        assert_eq!(l.working_set(A), MAX_SESSIONS as u64);
        // the oldest went first
        assert!(!l.sessions.contains_key(&0) && l.sessions.contains_key(&10));
    }
}

//! One worker's prefill queue with running totals, so a prediction costs O(1) instead of a
//! scan of every pending request.
//!
//! A request *counts* (its tokens are queued prefill) from dispatch until its first byte, its
//! end, or, for a response that is not a stream, its expiry time. The queue keeps the sum of
//! counting tokens and their number as requests start and stop counting; expiries are applied
//! in time order from a heap when a prediction reads the totals, and the oldest counting
//! request (the head, whose work may be partly done) is the front of a dispatch-order list
//! whose entries that stopped counting are dropped when they reach the front. Every request
//! enters and leaves each structure once: O(1) amortized per request, O(log n) for an expiry.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use crate::id_hash::IdBuildHasher;

/// A request placed on the worker, until its first byte or end.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pending {
    pub(super) own_tokens: f64,
    pub(super) ahead_tokens: f64,
    pub(super) decoding: f64,
    pub(super) sent_ms: f64,
    /// When the request stops counting as queued prefill (responses that are not streams).
    pub(super) counts_until_ms: Option<f64>,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    p: Pending,
    counting: bool,
}

/// (expiry time, id), earliest first in a max-heap.
#[derive(Debug, Clone, Copy)]
struct Due(f64, u64);

impl PartialEq for Due {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Due {
    fn cmp(&self, o: &Self) -> Ordering {
        o.0.total_cmp(&self.0).then(o.1.cmp(&self.1))
    }
}

#[derive(Debug, Default)]
pub(super) struct PrefillQueue {
    pending: HashMap<u64, Entry, IdBuildHasher>,
    /// Ids in dispatch order; those no longer counting are skipped (and dropped at the front).
    order: VecDeque<u64>,
    expiries: BinaryHeap<Due>,
    queued: f64,
    active: u32,
}

impl PrefillQueue {
    pub(super) fn push(&mut self, id: u64, p: Pending) {
        if let Some(t) = p.counts_until_ms {
            self.expiries.push(Due(t, id));
        }
        self.pending.insert(id, Entry { p, counting: true });
        self.order.push_back(id);
        self.queued += p.own_tokens;
        self.active += 1;
    }

    fn stop_counting(&mut self, id: u64) {
        if let Some(e) = self.pending.get_mut(&id)
            && e.counting
        {
            e.counting = false;
            self.active -= 1;
            self.queued -= e.p.own_tokens;
            if self.active == 0 {
                // no drift left behind by the running sum
                self.queued = 0.0;
            }
        }
    }

    /// Stops counting the requests whose time is up at `now_ms` (`now < until` still counts).
    pub(super) fn expire(&mut self, now_ms: f64) {
        while let Some(&Due(t, id)) = self.expiries.peek() {
            if now_ms < t {
                break;
            }
            self.expiries.pop();
            self.stop_counting(id);
        }
        self.compact();
    }

    /// The request leaves (first byte or end).
    pub(super) fn remove(&mut self, id: u64) -> Option<Pending> {
        self.stop_counting(id);
        let p = self.pending.remove(&id).map(|e| e.p);
        self.compact();
        p
    }

    /// Drops entries that no longer count from the front of the order (and everywhere once
    /// they dominate it).
    fn compact(&mut self) {
        while let Some(id) = self.order.front() {
            if self.pending.get(id).is_some_and(|e| e.counting) {
                break;
            }
            self.order.pop_front();
        }
        if self.order.len() > 2 * self.active as usize + 64 {
            let pending = &self.pending;
            self.order
                .retain(|id| pending.get(id).is_some_and(|e| e.counting));
        }
        if self.expiries.len() > 2 * self.pending.len() + 64 {
            let pending = &self.pending;
            self.expiries.retain(|d| pending.contains_key(&d.1));
        }
    }

    /// Tokens of counting requests, their number, and the oldest of them.
    pub(super) fn totals(&self) -> (f64, u32, Option<&Pending>) {
        let head = self
            .order
            .front()
            .and_then(|id| self.pending.get(id))
            .filter(|e| e.counting)
            .map(|e| &e.p);
        (self.queued.max(0.0), self.active, head)
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(own: f64, sent: f64, until: Option<f64>) -> Pending {
        Pending {
            own_tokens: own,
            ahead_tokens: 0.0,
            decoding: 0.0,
            sent_ms: sent,
            counts_until_ms: until,
        }
    }

    #[test]
    fn totals_follow_starts_ends_and_expiries_and_stay_small() {
        let mut q = PrefillQueue::default();
        for id in 0..1000u64 {
            let until = (id % 2 == 1).then_some(id as f64 + 10.0);
            q.push(id, p(1.0 + id as f64, id as f64, until));
            // the even ones end out of order, a while after they started
            if id >= 20 && id % 2 == 0 {
                q.remove(id - 20);
            }
            q.expire(id as f64);
        }
        // counting: even ids 980..998 (10) and odd ids whose until (id + 10) > 999: 991..999 (5)
        let (queued, active, head) = q.totals();
        let want: f64 = (980..1000)
            .filter(|i| i % 2 == 0 || i + 10 > 999)
            .map(|i| 1.0 + i as f64)
            .sum();
        assert_eq!(active, 15);
        assert!((queued - want).abs() < 1e-6, "{queued} vs {want}");
        assert_eq!(head.map(|h| h.sent_ms), Some(980.0));
        // expired odd requests stay pending (they leave at their end) but no longer count
        assert_eq!(q.len(), 510);
        assert!(q.order.len() <= 2 * 15 + 64 + 1, "{}", q.order.len());
        for id in 0..1000 {
            q.remove(id);
        }
        assert_eq!((q.totals().0, q.totals().1, q.len()), (0.0, 0, 0));
        assert!(q.expiries.len() <= 64);
    }
}

//! Eviction and the byte budget of the prefix index (see `index.rs` for the structure).

use super::bytes_of_chunks;
use super::index::{Index, MIN_SLOTS, NONE, Seg, Tenant};

/// Why chunks leave the index (`reason` of the eviction counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexEviction {
    /// The process-wide byte budget was reached; the least recently used segment of any
    /// tenant went.
    Budget,
    /// A tenant reached its own bound (`--max-tree-size`, or the worker's KV capacity).
    TenantBound,
    /// The worker left the fleet, or its model is no longer served.
    WorkerRemoved,
    /// The worker reported fewer cached tokens than the index predicted (`correct.rs`).
    Reported,
}

impl IndexEviction {
    /// Every reason, for metric initialisation.
    pub const ALL: [Self; 4] = [
        Self::Budget,
        Self::TenantBound,
        Self::WorkerRemoved,
        Self::Reported,
    ];

    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Budget => "budget",
            Self::TenantBound => "tenant_bound",
            Self::WorkerRemoved => "worker_removed",
            Self::Reported => "reported",
        }
    }
}

impl Index {
    /// Evicts tenant `t`'s least recently used segment; false when it has none.
    pub(super) fn evict_lru_of(&mut self, t: u32, why: IndexEviction) -> bool {
        while let Some((s, tick)) = self.tenants[t as usize].lru.pop_front() {
            let seg = self.segs[s as usize];
            if seg.tenant == t && seg.tick == tick {
                self.kill(s, why);
                return true;
            }
        }
        false
    }

    pub(super) fn kill(&mut self, s: u32, why: IndexEviction) {
        let seg = &mut self.segs[s as usize];
        let (t, n) = (seg.tenant, (seg.end - seg.start) as usize);
        let bytes = bytes_of_chunks(seg.end as usize) - bytes_of_chunks(seg.start as usize);
        seg.tenant = NONE;
        self.tenants[t as usize].chunks -= n;
        self.tenants[t as usize].bytes -= bytes;
        self.tenants[t as usize].segs -= 1;
        self.live_chunks -= n;
        self.evicted[why as usize] += n as u64;
        self.dead.push(s);
    }

    /// Drops stale queue entries once they dominate a tenant's queue.
    pub(super) fn compact_queue(&mut self, t: u32) {
        let segs = &self.segs;
        let tn = &mut self.tenants[t as usize];
        if tn.lru.len() > 2 * tn.segs + 64 {
            tn.lru
                .retain(|&(s, tick)| segs[s as usize].tenant == t && segs[s as usize].tick == tick);
        }
    }

    /// Removes the entries of evicted segments from the table and frees their ids.
    pub(super) fn sweep(&mut self) {
        let segs = &self.segs;
        self.table.retain(|s| segs[s as usize].tenant != NONE);
        self.free.append(&mut self.dead);
    }

    /// Makes room for `extra` new entries within the byte budget, keeping the table's load at
    /// most 0.8: a full table grows by 1.4x while the budget allows (so the load stays above
    /// 0.57: at most 14 bytes of table per entry), else the least recently used segments of all
    /// tenants go down to a load of 0.65 and the table is swept in place. Returns how many fit.
    pub(super) fn make_room(&mut self, extra: usize) -> usize {
        let fits = |s: &Self, extra: usize| (s.table.len() + extra) * 5 <= s.table.capacity() * 4;
        if fits(self, extra) {
            return extra;
        }
        let max_slots =
            (self.budget.saturating_sub(self.overhead_bytes()) / size_of::<u64>()).max(MIN_SLOTS);
        let need = self.live_chunks + extra;
        let cap = self.table.capacity();
        // a sweep must leave at least 0.15 of the slots free, or it would repeat too soon
        if need * 20 > cap * 13 && cap < max_slots {
            let new_cap = (cap * 7 / 5).max(need * 7 / 4).min(max_slots);
            let segs = &self.segs;
            self.table = self
                .table
                .rebuilt(new_cap, |s| segs[s as usize].tenant != NONE);
            self.free.append(&mut self.dead);
        }
        let limit = self.table.capacity() * 13 / 20;
        let extra = extra.min(limit);
        while self.live_chunks + extra > limit && self.evict_global_lru() {}
        if !fits(self, extra) {
            self.sweep();
        }
        extra
    }

    /// Evicts the least recently used segment over all tenants.
    pub(super) fn evict_global_lru(&mut self) -> bool {
        let mut oldest: Option<(u64, u32)> = None;
        for t in 0..self.tenants.len() {
            let segs = &self.segs;
            let lru = &mut self.tenants[t].lru;
            // drop stale heads so the front is the tenant's true least recent segment
            while let Some(&(s, tick)) = lru.front() {
                let seg = &segs[s as usize];
                if seg.tenant == t as u32 && seg.tick == tick {
                    break;
                }
                lru.pop_front();
            }
            if let Some(&(_, tick)) = lru.front()
                && oldest.is_none_or(|(o, _)| tick < o)
            {
                oldest = Some((tick, t as u32));
            }
        }
        match oldest {
            Some((_, t)) => self.evict_lru_of(t, IndexEviction::Budget),
            None => false,
        }
    }

    /// Bytes besides the table: segments and recency queues.
    pub(super) fn overhead_bytes(&self) -> usize {
        self.segs.capacity() * size_of::<Seg>()
            + self
                .tenants
                .iter()
                .map(|t| t.lru.capacity() * size_of::<(u32, u64)>() + size_of::<Tenant>())
                .sum::<usize>()
    }
}

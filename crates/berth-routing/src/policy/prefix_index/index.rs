//! The index proper: tenants, segments, matching, insertion and the byte budget.
//!
//! A *tenant* is one (model, worker) pair. An insert records, for its tenant, only the chunks
//! the tenant did not hold yet, as one *segment* (a run of chunk depths `start..end` of one
//! text) hanging from the segment that holds the chunk before `start`. Segments form each
//! tenant's prefix tree; the table maps (tenant, chunk hash) to the holding segment.
//!
//! Recency is per segment: an insert touches the segments on its path (leaf first, so a
//! parent is always more recent than its children) instead of every cached chunk, and
//! eviction removes a tenant's least recently used segment, which therefore never has a live
//! child: a kept chunk's prefix is always kept, so a tenant's match length is monotone in the
//! chunk depth and a binary search finds it. An evicted segment's entries stay in the table as
//! stale slots (a lookup checks that the segment is alive) until a sweep removes them.

use std::collections::{HashMap, VecDeque};

use super::evict::IndexEviction;
use super::table::{MAX_SEG, Table};
use super::{IndexStats, PrefixHashes, bytes_of_chunks, chunks_in_bytes, key_of};
use crate::{WorkerId, WorkerSnapshot};

pub(super) const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
pub(super) struct Seg {
    /// Owning tenant; `NONE` once evicted.
    pub(super) tenant: u32,
    pub(super) parent: u32,
    pub(super) start: u32,
    pub(super) end: u32,
    pub(super) tick: u64,
    /// Whether an answer of the tenant's worker has shown it holding the whole segment since
    /// it was recorded (cached-token feedback: only a loss of such a segment is evidence of an
    /// eviction, `correct.rs`).
    pub(super) answered: bool,
}

#[derive(Debug)]
pub(super) struct Tenant {
    pub(super) model: u32,
    pub(super) worker: WorkerId,
    pub(super) chunks: usize,
    /// Bytes of prompt those chunks cover.
    pub(super) bytes: usize,
    /// Live segments.
    pub(super) segs: usize,
    /// (segment, tick when touched); stale when the segment's tick is newer or it is dead.
    pub(super) lru: VecDeque<(u32, u64)>,
    pub(super) removed: bool,
}

/// The smallest table (8 KiB).
pub(super) const MIN_SLOTS: usize = 1024;

#[derive(Debug)]
pub(crate) struct Index {
    pub(super) table: Table,
    pub(super) segs: Vec<Seg>,
    /// Ids of evicted segments; reusable once a sweep removed their entries.
    pub(super) dead: Vec<u32>,
    pub(super) free: Vec<u32>,
    pub(super) tenants: Vec<Tenant>,
    pub(super) by_tenant: HashMap<(u32, WorkerId), u32>,
    pub(super) models: HashMap<Box<str>, u32>,
    pub(super) tick: u64,
    pub(super) live_chunks: usize,
    pub(super) budget: usize,
    pub(super) max_per_tenant: usize,
    pub(super) evicted: [u64; 4],
    pub(super) seen_generation: u64,
}

impl Index {
    /// An index of at most `budget` bytes, each tenant holding at most `max_chars`.
    pub(crate) fn new(budget: usize, max_chars: usize) -> Self {
        Self {
            table: Table::with_capacity(MIN_SLOTS),
            segs: vec![Seg {
                tenant: NONE,
                parent: NONE,
                start: 0,
                end: 0,
                tick: 0,
                answered: false,
            }],
            dead: Vec::new(),
            free: Vec::new(),
            tenants: Vec::new(),
            by_tenant: HashMap::new(),
            models: HashMap::new(),
            tick: 0,
            live_chunks: 0,
            budget: budget.max(64 << 10),
            max_per_tenant: chunks_in_bytes(max_chars).max(1),
            evicted: [0; 4],
            seen_generation: u64::MAX,
        }
    }

    /// The index's id of `model` as this fleet serves it: `None` for a model no worker serves
    /// (nothing is indexed for it), one shared id when the workers declare no models.
    pub(crate) fn model(&mut self, model: Option<&str>, snap: &WorkerSnapshot) -> Option<u32> {
        self.sync(snap);
        let name = match model {
            Some(m) if snap.model_count() > 0 => {
                if !snap.serves_model(m) {
                    return None;
                }
                m
            }
            _ => "",
        };
        Some(self.model_named(name))
    }

    pub(crate) fn model_named(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.models.get(name) {
            return id;
        }
        let id = self.models.len() as u32;
        self.models.insert(name.into(), id);
        id
    }

    /// Purges the tenants of workers that left (or models no longer served) when the fleet
    /// changed since the last call.
    fn sync(&mut self, snap: &WorkerSnapshot) {
        if snap.generation() == self.seen_generation {
            return;
        }
        self.seen_generation = snap.generation();
        let gone_models: Vec<u32> = self
            .models
            .iter()
            .filter(|(name, _)| !name.is_empty() && !snap.serves_model(name))
            .map(|(_, id)| *id)
            .collect();
        for t in 0..self.tenants.len() {
            let tn = &self.tenants[t];
            if !tn.removed && (snap.get(tn.worker).is_none() || gone_models.contains(&tn.model)) {
                self.remove_tenant(t as u32);
            }
        }
    }

    fn remove_tenant(&mut self, t: u32) {
        let lru = std::mem::take(&mut self.tenants[t as usize].lru);
        for (s, _) in lru {
            if self.segs[s as usize].tenant == t {
                self.kill(s, IndexEviction::WorkerRemoved);
            }
        }
        self.tenants[t as usize].removed = true;
        let key = (
            self.tenants[t as usize].model,
            self.tenants[t as usize].worker,
        );
        self.by_tenant.remove(&key);
    }

    pub(super) fn tenant(&self, model: u32, w: WorkerId) -> Option<u32> {
        self.by_tenant.get(&(model, w)).copied()
    }

    fn tenant_or_new(&mut self, model: u32, w: WorkerId) -> u32 {
        if let Some(t) = self.tenant(model, w) {
            return t;
        }
        let t = self.tenants.len() as u32;
        self.tenants.push(Tenant {
            model,
            worker: w,
            chunks: 0,
            bytes: 0,
            segs: 0,
            lru: VecDeque::new(),
            removed: false,
        });
        self.by_tenant.insert((model, w), t);
        t
    }

    /// The live segment holding chunk `depth` (hash `h`) for tenant `t`.
    pub(super) fn holder(&self, t: u32, depth: usize, h: u64) -> Option<u32> {
        let s = self.table.get(key_of(h, t))?;
        let seg = &self.segs[s as usize];
        (seg.tenant == t && (seg.start as usize..seg.end as usize).contains(&depth)).then_some(s)
    }

    /// Chunks of `hashes` tenant `t` holds: the first depth it lacks (monotone, so a binary
    /// search of `O(log n)` lookups).
    pub(super) fn depth(&self, t: u32, hashes: &[u64]) -> usize {
        let (mut lo, mut hi) = (0, hashes.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.holder(t, mid, hashes[mid]).is_some() {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Matched bytes per candidate, in `cands` order.
    pub(crate) fn match_per_worker(
        &self,
        model: u32,
        text: &PrefixHashes,
        cands: &[WorkerId],
    ) -> Vec<usize> {
        cands
            .iter()
            .map(|w| {
                self.tenant(model, *w)
                    .map_or(0, |t| bytes_of_chunks(self.depth(t, text.chunks())))
            })
            .collect()
    }

    /// Matched bytes of the longest match, and the candidates holding it.
    pub(crate) fn longest_match(
        &self,
        model: u32,
        text: &PrefixHashes,
        cands: &[WorkerId],
    ) -> (usize, Vec<WorkerId>) {
        let hashes = text.chunks();
        let mut best = 0;
        let mut holders = Vec::new();
        for &w in cands {
            let Some(t) = self.tenant(model, w) else {
                continue;
            };
            // a candidate lacking the best depth so far cannot matter
            if best > 0 && self.holder(t, best - 1, hashes[best - 1]).is_none() {
                continue;
            }
            let d = self.depth(t, hashes);
            if d == 0 {
                continue;
            }
            if d > best {
                best = d;
                holders.clear();
            }
            holders.push(w);
        }
        (bytes_of_chunks(best), holders)
    }

    /// Characters `worker` holds for `model`.
    pub(crate) fn tenant_chars(&self, model: u32, worker: WorkerId) -> usize {
        self.tenant(model, worker)
            .map_or(0, |t| self.tenants[t as usize].bytes)
    }

    /// Makes `worker` a tenant of every prefix of the text (at most `cap` characters of it, and
    /// at most the index's own bound): records the chunks it lacks as one segment, touches the
    /// segments it already had on that path, then evicts beyond the bounds.
    pub(crate) fn insert(&mut self, model: u32, text: &PrefixHashes, worker: WorkerId, cap: usize) {
        let cap = chunks_in_bytes(cap).clamp(1, self.max_per_tenant);
        let hashes = &text.chunks()[..text.chunks().len().min(cap)];
        if hashes.is_empty() {
            return;
        }
        let t = self.tenant_or_new(model, worker);
        let (mut have, mut parent) = self.path(t, hashes);
        if parent != NONE {
            self.touch(parent);
        }
        if have < hashes.len() {
            self.reserve_seg();
            let room = self.make_room(hashes.len() - have);
            if parent != NONE && self.segs[parent as usize].tenant != t {
                // making room evicted the path itself (a budget about one text's size)
                (have, parent) = self.path(t, hashes);
            }
            let end = hashes.len().min(have + room);
            if end > have {
                let s = self.new_seg(t, parent, have, end);
                for &h in &hashes[have..end] {
                    self.table.set(key_of(h, t), s);
                }
                self.tenants[t as usize].chunks += end - have;
                self.tenants[t as usize].bytes += bytes_of_chunks(end) - bytes_of_chunks(have);
                self.live_chunks += end - have;
                self.touch(s);
            }
        }
        while self.tenants[t as usize].bytes > bytes_of_chunks(cap) {
            if !self.evict_lru_of(t, IndexEviction::TenantBound) {
                break;
            }
        }
        self.compact_queue(t);
    }

    /// How much of `hashes` tenant `t` holds, and the segment holding its last chunk.
    fn path(&self, t: u32, hashes: &[u64]) -> (usize, u32) {
        match self.depth(t, hashes) {
            0 => (0, NONE),
            d => (d, self.holder(t, d - 1, hashes[d - 1]).unwrap_or(NONE)),
        }
    }

    /// Makes sure a segment id is free (2^24 segments: only a budget far above 128 MiB gets
    /// anywhere near).
    fn reserve_seg(&mut self) {
        if self.free.is_empty() && self.segs.len() > MAX_SEG as usize {
            if self.dead.is_empty() {
                self.evict_global_lru();
            }
            self.sweep();
        }
    }

    pub(super) fn new_seg(&mut self, t: u32, parent: u32, start: usize, end: usize) -> u32 {
        self.tenants[t as usize].segs += 1;
        let seg = Seg {
            tenant: t,
            parent,
            start: start as u32,
            end: end as u32,
            tick: 0,
            answered: false,
        };
        match self.free.pop() {
            Some(s) => {
                self.segs[s as usize] = seg;
                s
            }
            None => {
                self.segs.push(seg);
                (self.segs.len() - 1) as u32
            }
        }
    }

    /// Marks `s` and its ancestors used now, leaf first (so parents are more recent).
    pub(super) fn touch(&mut self, mut s: u32) {
        while s != NONE {
            self.tick += 1;
            let seg = &mut self.segs[s as usize];
            seg.tick = self.tick;
            let (t, parent) = (seg.tenant, seg.parent);
            self.tenants[t as usize].lru.push_back((s, self.tick));
            s = parent;
        }
    }

    /// Entries of a tenant's recency queue (tests).
    #[cfg(test)]
    pub(crate) fn queue_len(&self, model: u32, worker: WorkerId) -> usize {
        self.tenant(model, worker)
            .map_or(0, |t| self.tenants[t as usize].lru.len())
    }

    pub(crate) fn stats(&self) -> IndexStats {
        IndexStats {
            bytes: self.table.bytes() + self.overhead_bytes(),
            chunks: self.live_chunks,
            evicted_chunks: self.evicted,
        }
    }
}

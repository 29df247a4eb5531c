//! Correcting the index from what a worker said it had cached (the feedback of
//! `policy/feedback.rs`).
//!
//! Before a request goes to a worker, [`Index::prior`] records what the index believes that
//! worker holds of the prompt: the chunks, and the segments on that path with their recency
//! *before* this request touched them. When the answer reports fewer cached tokens than that,
//! the worker lost the prompt from chunk `keep` on, and [`Index::correct`] drops:
//!
//! 1. the tenant's segments now holding chunk `keep` or deeper of this prompt (the segment that
//!    holds `keep` goes whole: the caller inserts the prompt again, since the worker has just
//!    computed it, which restores the part before `keep`);
//! 2. every segment of the tenant last used no later than the lost chunk was (before this
//!    request; bounded by the recency of the first path segment starting at `keep` or deeper):
//!    an engine that evicts least recently used blocks first (SGLang's radix cache, vLLM's
//!    prefix cache, llama.cpp's slots, berth's sim) lost those before it lost this one.
//!    Parents are always more recent than their children, so this never strands a child;
//! 3. every segment hanging below a dropped one (branches other requests added since), so a
//!    kept chunk's prefix is still always kept and matching stays a binary search.
//!
//! A reported length of zero is the same rule from chunk 0: after a flush or a restart, the
//! first answer drops everything the worker was believed to hold that is older than this
//! prompt's last use.

use super::evict::IndexEviction;
use super::index::{Index, NONE};
use super::{PrefixHashes, bytes_of_chunks, key_of};
use crate::WorkerId;

/// What the index believed a worker held of one prompt just before the request went there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prior {
    /// The index's id of the request's model.
    pub(crate) model: u32,
    /// Whole chunks of the prompt the worker was believed to hold.
    pub(crate) chunks: usize,
    /// The segments on that path, root first: (first chunk depth, recency tick before the
    /// request touched it).
    pub(crate) path: Vec<(u32, u64)>,
}

impl Prior {
    /// Bytes of prompt the worker was believed to hold.
    pub fn bytes(&self) -> usize {
        bytes_of_chunks(self.chunks)
    }
}

impl Index {
    /// What tenant (`model`, `worker`) holds of `text` now (call it before inserting).
    pub(crate) fn prior(&self, model: u32, text: &PrefixHashes, worker: WorkerId) -> Prior {
        let Some(t) = self.tenant(model, worker) else {
            return Prior {
                model,
                ..Prior::default()
            };
        };
        let hashes = text.chunks();
        let chunks = self.depth(t, hashes);
        let mut path = Vec::new();
        let mut s = match chunks {
            0 => NONE,
            d => self.holder(t, d - 1, hashes[d - 1]).unwrap_or(NONE),
        };
        while s != NONE {
            let seg = &self.segs[s as usize];
            path.push((seg.start, seg.tick));
            s = seg.parent;
        }
        path.reverse();
        Prior {
            model,
            chunks,
            path,
        }
    }

    /// The worker held only the first `keep` chunks of `text` where `prior` said more: drops
    /// what it must have lost (see the module docs). Returns the chunks dropped.
    pub(crate) fn correct(
        &mut self,
        text: &PrefixHashes,
        worker: WorkerId,
        prior: &Prior,
        keep: usize,
    ) -> usize {
        if keep >= prior.chunks {
            return 0;
        }
        let Some(t) = self.tenant(prior.model, worker) else {
            return 0;
        };
        let before = self.tenants[t as usize].chunks;
        let why = IndexEviction::Reported;
        // 1. this prompt's path from chunk `keep` on, as the index holds it now
        let hashes = text.chunks();
        let d = self.depth(t, hashes);
        let mut s = match d {
            d if d > keep => self.holder(t, d - 1, hashes[d - 1]).unwrap_or(NONE),
            _ => NONE,
        };
        let mut live = self.live_segments(t);
        while s != NONE {
            let seg = self.segs[s as usize];
            if seg.end as usize <= keep {
                break;
            }
            if (seg.start as usize) < keep {
                // the segment holding `keep` keeps what comes before it
                let head = self.split(t, s, keep, &hashes[seg.start as usize..keep], &live);
                live.push(head);
            } else {
                self.kill(s, why);
            }
            s = seg.parent;
        }
        // 2. everything used before chunk `keep` last was: the first path segment starting at
        //    `keep` or deeper was last used no later than that chunk (every use of it used the
        //    chunk), so its recency is a safe bound (exact when a segment starts at `keep`; a
        //    segment starting before `keep` may have been used since for its head alone)
        let cut_tick = prior
            .path
            .iter()
            .find(|(start, _)| *start as usize >= keep)
            .map(|(_, tick)| *tick);
        if let Some(cut) = cut_tick {
            for &x in &live {
                if self.segs[x as usize].tenant == t && self.segs[x as usize].tick <= cut {
                    self.kill(x, why);
                }
            }
        }
        // 3. whatever hangs below a dropped segment
        for &x in &live {
            if self.segs[x as usize].tenant == t && !self.rooted(t, x) {
                self.kill(x, why);
            }
        }
        self.compact_queue(t);
        before - self.tenants[t as usize].chunks
    }

    /// Replaces live segment `s` of tenant `t` by its chunks before `keep` (`head`: their
    /// hashes): a new segment in its place (same parent, same recency) takes the children
    /// hanging from those chunks; the rest of `s` is dropped. Returns the new segment.
    fn split(&mut self, t: u32, s: u32, keep: usize, head: &[u64], live: &[u32]) -> u32 {
        let seg = self.segs[s as usize];
        self.kill(s, IndexEviction::Reported);
        let n = keep - seg.start as usize;
        self.evicted[IndexEviction::Reported as usize] -= n as u64;
        let new = self.new_seg(t, seg.parent, seg.start as usize, keep);
        for &h in head {
            self.table.set(key_of(h, t), new);
        }
        let tn = &mut self.tenants[t as usize];
        tn.chunks += n;
        tn.bytes += bytes_of_chunks(keep) - bytes_of_chunks(seg.start as usize);
        self.live_chunks += n;
        self.segs[new as usize].tick = seg.tick;
        self.tenants[t as usize].lru.push_back((new, seg.tick));
        for &c in live {
            let child = &mut self.segs[c as usize];
            if child.tenant == t && child.parent == s && child.start as usize <= keep {
                child.parent = new;
            }
        }
        new
    }

    /// Tenant `t`'s live segments (each once: its newest queue entry).
    fn live_segments(&self, t: u32) -> Vec<u32> {
        self.tenants[t as usize]
            .lru
            .iter()
            .filter(|&&(s, tick)| {
                let seg = &self.segs[s as usize];
                seg.tenant == t && seg.tick == tick
            })
            .map(|&(s, _)| s)
            .collect()
    }

    /// Whether every ancestor of live segment `s` is alive.
    fn rooted(&self, t: u32, s: u32) -> bool {
        let mut p = self.segs[s as usize].parent;
        while p != NONE {
            let seg = &self.segs[p as usize];
            if seg.tenant != t {
                return false;
            }
            p = seg.parent;
        }
        true
    }
}

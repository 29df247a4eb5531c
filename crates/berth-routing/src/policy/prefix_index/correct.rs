//! Correcting the index from what a worker said it had cached (the feedback of
//! `policy/feedback.rs`).
//!
//! Before a request goes to a worker, [`Index::prior`] records what the index believes that
//! worker holds of the prompt: the chunks, and the segments on that path with their recency
//! *before* this request touched them. When the answer reports fewer cached tokens than that,
//! the worker lost the prompt from chunk `keep` on, and [`Index::correct`] drops the tenant's
//! segments holding chunk `keep` or deeper of this prompt (the segment that holds `keep` keeps
//! its chunks before it, as a new segment in its place) and every segment hanging below a
//! dropped one (other branches: sub-agents, earlier turns' other continuations), so a kept
//! chunk's prefix is still always kept and matching stays a binary search. The caller then
//! records the prompt again, since the worker has just computed it.
//!
//! What the tenant held *used after* the lost chunk (by the path's recency before the request)
//! is also returned: with this prompt, that is about what the worker had room for when it
//! evicted the chunk, the sample of its effective KV capacity. It is not used to drop the older
//! segments an LRU engine would have lost first: the index's recency misses the turns that
//! stream unread on `ttft_aware`'s pinned path, so "older" there includes live sessions (in the
//! KV-pressure benchmark, dropping them cost cached share, docs/benchmarks.md).

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

/// What a correction did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Correction {
    /// Chunks dropped.
    pub(crate) dropped: usize,
    /// Bytes of the tenant's segments used after the lost chunk (see the module docs); `None`
    /// when nothing bounds when that chunk was last used.
    pub(crate) newer_bytes: Option<usize>,
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

    /// The deepest chunk of `text` tenant (`model`, `worker`) holds: its depth (chunks held)
    /// and hash; `None` when it holds none.
    pub(crate) fn held_end(
        &self,
        model: u32,
        text: &PrefixHashes,
        worker: WorkerId,
    ) -> Option<(usize, u64)> {
        let t = self.tenant(model, worker)?;
        let hashes = text.chunks();
        match self.depth(t, hashes) {
            0 => None,
            d => Some((d, hashes[d - 1])),
        }
    }

    /// The worker has just used the prefix ending in chunk `depth - 1` (hash `hash`) of a text
    /// the index held for it (an answer of a turn whose body was not read): touches that path.
    /// False when the index no longer holds it.
    pub(crate) fn touch_held(
        &mut self,
        model: u32,
        worker: WorkerId,
        depth: usize,
        hash: u64,
    ) -> bool {
        let Some(t) = self.tenant(model, worker) else {
            return false;
        };
        let Some(s) = depth.checked_sub(1).and_then(|d| self.holder(t, d, hash)) else {
            return false;
        };
        self.touch(s);
        self.compact_queue(t);
        true
    }

    /// The worker held only the first `keep` chunks of `text` where `prior` said more: drops
    /// what it must have lost (see the module docs).
    pub(crate) fn correct(
        &mut self,
        text: &PrefixHashes,
        worker: WorkerId,
        prior: &Prior,
        keep: usize,
    ) -> Correction {
        if keep >= prior.chunks {
            return Correction::default();
        }
        let Some(t) = self.tenant(prior.model, worker) else {
            return Correction::default();
        };
        let before = self.tenants[t as usize].chunks;
        let why = IndexEviction::Reported;
        // this prompt's path from chunk `keep` on, as the index holds it now
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
        // whatever hangs below a dropped segment
        for &x in &live {
            if self.segs[x as usize].tenant == t && !self.rooted(t, x) {
                self.kill(x, why);
            }
        }
        // what was used after the lost chunk last was: the first path segment starting at
        // `keep` or deeper was last used no later than that chunk (every use of it used the
        // chunk), so its recency is a safe bound (none: nothing bounds it)
        let newer_bytes = prior
            .path
            .iter()
            .find(|(start, _)| *start as usize >= keep)
            .map(|&(_, cut)| {
                live.iter()
                    .map(|&x| self.segs[x as usize])
                    .filter(|seg| seg.tenant == t && seg.tick > cut)
                    .map(|seg| {
                        bytes_of_chunks(seg.end as usize) - bytes_of_chunks(seg.start as usize)
                    })
                    .sum()
            });
        self.compact_queue(t);
        Correction {
            dropped: before - self.tenants[t as usize].chunks,
            newer_bytes,
        }
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

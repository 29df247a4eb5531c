//! Correcting the index from what a worker said it had cached (the feedback of
//! `policy/feedback.rs`).
//!
//! When a request goes to a worker, [`Index::insert_with_prior`] records what the index
//! believed that worker held of the prompt (the chunks, how many of them an earlier answer had
//! confirmed, the segments on that path with their recency *before* this request touched them)
//! and the index's clock just after the request's own insert. When the answer reports fewer
//! cached tokens than that, the worker lacked the prompt from chunk `keep` on *when it started
//! the request*, and [`Index::correct`] drops what it must have lost then: the tenant's
//! segments holding chunk `keep` or deeper of this prompt (the segment that holds `keep` keeps
//! its chunks before it, as a new segment in its place) and every segment hanging below them
//! (other branches: sub-agents, other sessions' turns), so a kept chunk's prefix is still
//! always kept and matching stays a binary search. The caller then records the prompt again,
//! since the worker has just computed it.
//!
//! Only what was not used since the request was sent is dropped. The answer comes back a whole
//! generation after the worker looked its prompt up; requests sent there in between that use
//! the same prefix find it again (this one's prefill recomputed it), and their inserts touched
//! those segments after this one's. Dropping them anyway made the index miss prefixes the
//! worker held: under KV pressure with `agentic`, a third of the index's predictions then came
//! out *below* what the worker reported (docs/benchmarks.md, session 4). A segment's recency is
//! never older than any segment below it, so what is kept is always rooted.
//!
//! Which segments an answer has shown held is kept per segment ([`Index::answered`]): a loss of
//! such a segment is evidence that the worker evicted it; a loss of a segment no answer has
//! shown is only an optimistic guess (a prompt recorded when it was sent, still queued or
//! never computed) and teaches nothing about the worker's capacity. A worker that lost even
//! the first chunk of a prompt an answer had shown (reported nothing cached) was flushed or
//! restarted ([`Index::forget_answers`]: nothing it was shown holding is certain any more).
//!
//! What the tenant held *used after* the lost chunk (by the path's recency before the request)
//! is also returned: with this prompt, that is about what the worker had room for when it
//! evicted the chunk, the sample of its effective KV capacity. It is not used to drop the older
//! segments an LRU engine would have lost first: the index's recency misses the turns that
//! stream unread on `ttft_aware`'s pinned path, so "older" there includes live sessions (in the
//! KV-pressure benchmark, dropping them cost cached share, docs/benchmarks.md).

use std::cell::OnceCell;

use super::evict::IndexEviction;
use super::index::{Index, NONE};
use super::{PrefixHashes, bytes_of_chunks};
use crate::WorkerId;

/// What the index believed a worker held of one prompt just before the request went there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prior {
    /// The index's id of the request's model.
    pub(crate) model: u32,
    /// Whole chunks of the prompt the worker was believed to hold.
    pub(crate) chunks: usize,
    /// How many of them an earlier answer of the worker had shown it holding.
    pub(crate) answered: usize,
    /// The segments on that path, root first: (first chunk depth, recency tick before the
    /// request touched it).
    pub(crate) path: Vec<(u32, u64)>,
    /// The index's clock just after the request's own insert: segments touched later were
    /// used by requests sent after it.
    pub(crate) sent: u64,
}

impl Prior {
    /// Bytes of prompt the worker was believed to hold.
    pub fn bytes(&self) -> usize {
        bytes_of_chunks(self.chunks)
    }

    /// Bytes of it an earlier answer of the worker had shown it holding.
    pub fn answered_bytes(&self) -> usize {
        bytes_of_chunks(self.answered)
    }
}

/// What a correction did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Correction {
    /// Chunks dropped.
    pub(crate) dropped: usize,
    /// Bytes of the tenant's other segments (off this prompt's path) used after the lost
    /// chunk (see the module docs); `None` when nothing bounds when that chunk was last used.
    pub(crate) newer_bytes: Option<usize>,
}

impl Index {
    /// What tenant (`model`, `worker`) holds of `text` now (call it before inserting).
    pub(crate) fn prior(&self, model: u32, text: &PrefixHashes, worker: WorkerId) -> Prior {
        let Some(t) = self.tenant(model, worker) else {
            return Prior {
                model,
                sent: self.tick,
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
        let mut answered = chunks;
        while s != NONE {
            let seg = &self.segs[s as usize];
            path.push((seg.start, seg.tick));
            if !seg.answered {
                answered = answered.min(seg.start as usize);
            }
            s = seg.parent;
        }
        path.reverse();
        Prior {
            model,
            chunks,
            answered,
            path,
            sent: self.tick,
        }
    }

    /// [`Index::insert`], and when `prior` is given, what the tenant held of `text` before
    /// (set into it, stamped with the index's clock after this insert).
    pub(crate) fn insert_with_prior(
        &mut self,
        model: u32,
        text: &PrefixHashes,
        worker: WorkerId,
        cap: usize,
        prior: Option<&OnceCell<Prior>>,
    ) {
        let before = prior.map(|_| self.prior(model, text, worker));
        self.insert(model, text, worker, cap);
        if let (Some(cell), Some(p)) = (prior, before) {
            let _ = cell.set(Prior {
                sent: self.tick,
                ..p
            });
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

    /// An answer of `worker` showed it holding the first `depth` chunks of a text whose chunk
    /// `depth - 1` has hash `hash`: marks the segments wholly within them as shown held.
    pub(crate) fn answered(&mut self, model: u32, worker: WorkerId, depth: usize, hash: u64) {
        let Some(t) = self.tenant(model, worker) else {
            return;
        };
        let mut s = depth
            .checked_sub(1)
            .and_then(|d| self.holder(t, d, hash))
            .unwrap_or(NONE);
        while s != NONE {
            let seg = &mut self.segs[s as usize];
            if seg.answered {
                break; // so is everything above it
            }
            if seg.end as usize <= depth {
                seg.answered = true;
            }
            s = seg.parent;
        }
    }

    /// The worker lost everything (a flush or a restart): nothing an earlier answer showed it
    /// holding is certain any more.
    pub(crate) fn forget_answers(&mut self, model: u32, worker: WorkerId) {
        let Some(t) = self.tenant(model, worker) else {
            return;
        };
        for s in self.live_segments(t) {
            self.segs[s as usize].answered = false;
        }
    }

    /// The worker has just used the prefix ending in chunk `depth - 1` (hash `hash`) of a text
    /// the index held for it (an answer of a turn whose body was not read), as far as its first
    /// `keep` chunks (what the answer reported cached): touches that path, from the deepest of
    /// its segments starting before `keep`. False when the index no longer holds it.
    pub(crate) fn touch_held(
        &mut self,
        model: u32,
        worker: WorkerId,
        depth: usize,
        hash: u64,
        keep: usize,
    ) -> bool {
        let Some(t) = self.tenant(model, worker) else {
            return false;
        };
        let Some(mut s) = depth.checked_sub(1).and_then(|d| self.holder(t, d, hash)) else {
            return false;
        };
        while s != NONE && self.segs[s as usize].start as usize >= keep {
            s = self.segs[s as usize].parent;
        }
        if s != NONE {
            self.touch(s);
            self.compact_queue(t);
        }
        true
    }

    /// Where a correction of `text` on tenant (`model`, `worker`) cuts when the answer reported
    /// its first `keep` chunks cached and an engine block more would reach chunk `reach`: the
    /// first point past `keep` and within `reach` where the prompt's path in the index branches
    /// (another prompt's segment hangs from it there, or the path goes on in a new segment),
    /// else `keep`. An engine caches whole blocks, so a prompt that shares a prefix with others
    /// finds at most the prefix's last whole block cached: the block holding the branch point
    /// is this prompt's own. A report that short of a branch point shows nothing lost before
    /// it; cutting inside the shared prefix instead dropped every other session hanging from a
    /// system prompt whenever one sub-agent found only that prompt (issue #17 session 13).
    pub(crate) fn cut_at_branch(
        &self,
        model: u32,
        text: &PrefixHashes,
        worker: WorkerId,
        keep: usize,
        reach: usize,
    ) -> usize {
        let Some(t) = self.tenant(model, worker) else {
            return keep;
        };
        let hashes = text.chunks();
        let d = self.depth(t, hashes);
        if d <= keep || reach <= keep {
            return keep;
        }
        // the prompt's path: each segment with the depth where the path leaves it
        let mut path = Vec::new();
        let (mut s, mut leave) = (self.holder(t, d - 1, hashes[d - 1]).unwrap_or(NONE), d);
        while s != NONE {
            path.push((s, leave));
            let seg = &self.segs[s as usize];
            leave = seg.start as usize;
            s = seg.parent;
        }
        let within = |at: usize| at > keep && at <= reach;
        let on_path = path
            .iter()
            .map(|&(s, _)| self.segs[s as usize].start as usize);
        // (the window first: the path is searched only for the few segments starting in it)
        let off_path = self.live_segments(t).into_iter().filter_map(|x| {
            let seg = &self.segs[x as usize];
            let at = seg.start as usize;
            if !within(at) {
                return None;
            }
            let (_, leave) = path.iter().find(|&&(p, _)| p == seg.parent)?;
            (at <= *leave).then_some(at)
        });
        on_path
            .chain(off_path)
            .filter(|&at| within(at))
            .min()
            .unwrap_or(keep)
    }

    /// The worker lacked `text` from chunk `keep` on when it started the request `prior` was
    /// taken for: drops what it must have lost then (see the module docs).
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
        // this prompt's path from chunk `keep` on, as the index holds it now, deepest first
        let hashes = text.chunks();
        let d = self.depth(t, hashes);
        let mut s = match d {
            d if d > keep => self.holder(t, d - 1, hashes[d - 1]).unwrap_or(NONE),
            _ => NONE,
        };
        let mut path = Vec::new();
        while s != NONE {
            let seg = self.segs[s as usize];
            if seg.end as usize <= keep {
                break;
            }
            path.push(s);
            s = seg.parent;
        }
        let live = self.live_segments(t);
        // the lost part: what hangs below the path's chunks from `keep` on, less what requests
        // sent after this one used since; the path itself stays (this request's prefill has
        // just recomputed it)
        let stale = |idx: &Self, x: u32| idx.segs[x as usize].tick <= prior.sent;
        let lost: Vec<u32> = live
            .iter()
            .copied()
            .filter(|&x| !path.contains(&x) && stale(self, x) && self.below_cut(x, &path, keep))
            .collect();
        for &x in &lost {
            self.kill(x, why);
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
                    .filter(|x| !path.contains(x))
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

    /// Whether live segment `x` holds chunks past the cut at `keep` of the prompt whose path
    /// from `keep` on is `path` (deepest first): it is one of them, or hangs below one (a
    /// child of the segment holding `keep` only when it hangs past `keep`).
    fn below_cut(&self, x: u32, path: &[u32], keep: usize) -> bool {
        let (mut child, mut s) = (NONE, x);
        while s != NONE {
            if path.contains(&s) {
                let seg = &self.segs[s as usize];
                return seg.start as usize >= keep
                    || (child != NONE && self.segs[child as usize].start as usize > keep);
            }
            child = s;
            s = self.segs[s as usize].parent;
        }
        false
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
}

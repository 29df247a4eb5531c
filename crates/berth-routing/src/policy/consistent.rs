//! The ring behind `consistent_hashing`.
//!
//! Each worker contributes [`VNODES`] points, hashed from its registered URL, so the ring
//! depends only on the set of URLs: every gateway replica that sees the same workers builds the
//! same ring and places every key identically. A key goes to the first point clockwise from
//! its hash whose worker is a candidate; skipping non-candidates is the same as building a
//! ring of the candidates alone, so a worker's absence moves only its own keys, and a new
//! worker takes only about 1/n of them. The hash is XXH3 with seed 0, fixed forever: the
//! golden tests fail if a refactor would move sessions.

use xxhash_rust::xxh3::xxh3_64;

use crate::WorkerId;

/// Points per worker: enough for a spread within a few percent at 4 to 256 workers.
pub const VNODES: usize = 160;

/// A sorted ring of `(point, worker)`.
#[derive(Debug, Default, Clone)]
pub struct Ring {
    points: Vec<(u64, WorkerId)>,
}

impl Ring {
    /// Builds the ring of the given workers.
    pub fn build<'a>(workers: impl Iterator<Item = (WorkerId, &'a str)>) -> Self {
        let mut points = Vec::new();
        let mut buf = Vec::with_capacity(128);
        for (id, url) in workers {
            for v in 0..VNODES {
                buf.clear();
                buf.extend_from_slice(url.as_bytes());
                buf.push(b'#');
                buf.extend_from_slice(v.to_string().as_bytes());
                points.push((xxh3_64(&buf), id));
            }
        }
        points.sort_unstable();
        Self { points }
    }

    /// The worker for `key` among `cands` (sorted by id), or `None` when no candidate is on
    /// the ring.
    pub fn lookup(&self, key: &[u8], cands: &[WorkerId]) -> Option<WorkerId> {
        if self.points.is_empty() || cands.is_empty() {
            return None;
        }
        let h = xxh3_64(key);
        let start = self.points.partition_point(|(p, _)| *p < h);
        let n = self.points.len();
        (0..n)
            .map(|i| self.points[(start + i) % n].1)
            .find(|w| cands.binary_search(w).is_ok())
    }
}

#[cfg(test)]
mod tests;

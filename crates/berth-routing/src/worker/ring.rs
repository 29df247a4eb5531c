//! The consistent-hash ring `consistent_hashing` places keys on (its design is described in
//! `policy/consistent.rs`). The worker snapshot builds one ring per membership change; the
//! policy looks keys up on it.

use xxhash_rust::xxh3::xxh3_64;

use super::WorkerId;

/// Points per worker: enough for a spread within a few percent at 4 to 256 workers.
pub(crate) const VNODES: usize = 160;

/// A sorted ring of `(point, worker)`.
#[derive(Debug, Default, Clone)]
pub(crate) struct Ring {
    pub(crate) points: Vec<(u64, WorkerId)>,
}

impl Ring {
    /// Builds the ring of the given workers.
    pub(crate) fn build<'a>(workers: impl Iterator<Item = (WorkerId, &'a str)>) -> Self {
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
    pub(crate) fn lookup(&self, key: &[u8], cands: &[WorkerId]) -> Option<WorkerId> {
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

//! Finding an id's position in a snapshot without sizing anything by the id's value.
//!
//! Ids are dense within a pool but need not start at 0 (PD's prefill pool starts at `1 << 24`)
//! and grow as workers come and go. The index is a vector over the span of ids present,
//! offset by the smallest (one load per lookup), as long as that span stays within a few times
//! the number of workers; a fleet whose ids are spread wider (long-lived workers beside many
//! removed ones) gets a sorted list searched in O(log n) instead. Either way its size is
//! proportional to the number of workers, not to the largest id.

use super::WorkerId;

/// Span of ids (in slots per worker, plus a constant) up to which the direct vector is used.
const DENSE_FACTOR: usize = 4;
const DENSE_SLACK: usize = 64;

/// Position of each id present.
#[derive(Debug, Clone)]
pub(crate) enum SlotIndex {
    /// `slot[id - base]` is the position (`u32::MAX`: absent).
    Dense { base: u32, slot: Vec<u32> },
    /// `(id, position)` sorted by id.
    Sparse(Vec<(u32, u32)>),
}

impl Default for SlotIndex {
    fn default() -> Self {
        Self::Dense {
            base: 0,
            slot: Vec::new(),
        }
    }
}

impl SlotIndex {
    /// The index of `ids` (in position order).
    pub(crate) fn new(ids: impl ExactSizeIterator<Item = WorkerId> + Clone) -> Self {
        let n = ids.len();
        let (Some(min), Some(max)) = (
            ids.clone().map(|i| i.0).min(),
            ids.clone().map(|i| i.0).max(),
        ) else {
            return Self::default();
        };
        let span = (max - min) as usize + 1;
        if span <= n * DENSE_FACTOR + DENSE_SLACK {
            let mut slot = vec![u32::MAX; span];
            for (pos, id) in ids.enumerate() {
                slot[(id.0 - min) as usize] = pos as u32;
            }
            Self::Dense { base: min, slot }
        } else {
            let mut sorted: Vec<(u32, u32)> = ids
                .enumerate()
                .map(|(pos, id)| (id.0, pos as u32))
                .collect();
            sorted.sort_unstable();
            Self::Sparse(sorted)
        }
    }

    /// The position of `id`, if present.
    pub(crate) fn get(&self, id: WorkerId) -> Option<usize> {
        match self {
            Self::Dense { base, slot } => {
                let i = id.0.checked_sub(*base)?;
                match slot.get(i as usize) {
                    Some(&p) if p != u32::MAX => Some(p as usize),
                    _ => None,
                }
            }
            Self::Sparse(sorted) => sorted
                .binary_search_by_key(&id.0, |(i, _)| *i)
                .ok()
                .map(|k| sorted[k].1 as usize),
        }
    }

    /// Heap bytes held.
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Self::Dense { slot, .. } => slot.capacity() * std::mem::size_of::<u32>(),
            Self::Sparse(sorted) => sorted.capacity() * std::mem::size_of::<(u32, u32)>(),
        }
    }
}

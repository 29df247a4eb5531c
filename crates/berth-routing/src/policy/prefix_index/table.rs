//! The slots of the prefix index: open addressing over bare `u64`s, 8 bytes a slot.
//!
//! A slot holds a 40-bit fingerprint of the (tenant, chunk) key and the 24-bit id of the
//! segment that holds the chunk; 0 is an empty slot (segment ids start at 1). The fingerprint
//! also names the home slot (multiply-shift onto any capacity, not only powers of two, so the
//! table can fill a byte budget), so entries can be moved and the table swept without the full
//! key. Linear probing; deletion shifts the rest of the cluster back (no tombstones).

/// Bits of a slot holding the segment id.
pub(super) const SEG_BITS: u32 = 24;
/// Segment ids are `1..MAX_SEG`.
pub(super) const MAX_SEG: u32 = (1 << SEG_BITS) - 1;
const FP_BITS: u32 = 64 - SEG_BITS;

#[derive(Debug)]
pub(super) struct Table {
    slots: Vec<u64>,
    len: usize,
}

impl Table {
    pub(super) fn with_capacity(cap: usize) -> Self {
        Self {
            slots: vec![0; cap.max(16)],
            len: 0,
        }
    }

    pub(super) fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Occupied slots (live and stale entries).
    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn bytes(&self) -> usize {
        self.slots.len() * size_of::<u64>()
    }

    fn fp(key: u64) -> u64 {
        key >> SEG_BITS
    }

    fn home_of_fp(&self, fp: u64) -> usize {
        ((u128::from(fp) * self.slots.len() as u128) >> FP_BITS) as usize
    }

    fn next(&self, i: usize) -> usize {
        if i + 1 == self.slots.len() { 0 } else { i + 1 }
    }

    /// The segment recorded for `key`.
    pub(super) fn get(&self, key: u64) -> Option<u32> {
        let fp = Self::fp(key);
        let mut i = self.home_of_fp(fp);
        loop {
            let v = self.slots[i];
            if v == 0 {
                return None;
            }
            if v >> SEG_BITS == fp {
                return Some((v & u64::from(MAX_SEG)) as u32);
            }
            i = self.next(i);
        }
    }

    /// Records `seg` for `key` (replacing what was recorded). The caller keeps the load below
    /// one, so a free slot always exists.
    pub(super) fn set(&mut self, key: u64, seg: u32) {
        debug_assert!(seg != 0 && seg <= MAX_SEG);
        let fp = Self::fp(key);
        let v = (fp << SEG_BITS) | u64::from(seg);
        let mut i = self.home_of_fp(fp);
        loop {
            let cur = self.slots[i];
            if cur == 0 {
                self.slots[i] = v;
                self.len += 1;
                return;
            }
            if cur >> SEG_BITS == fp {
                self.slots[i] = v;
                return;
            }
            i = self.next(i);
        }
    }

    /// Empties slot `i`, shifting later members of its cluster back.
    fn remove_at(&mut self, mut i: usize) {
        let mut j = i;
        loop {
            j = self.next(j);
            let v = self.slots[j];
            if v == 0 {
                break;
            }
            let h = self.home_of_fp(v >> SEG_BITS);
            // v may move back to i unless its home lies cyclically in (i, j]
            let stays = if i <= j {
                i < h && h <= j
            } else {
                i < h || h <= j
            };
            if !stays {
                self.slots[i] = v;
                i = j;
            }
        }
        self.slots[i] = 0;
        self.len -= 1;
    }

    /// Keeps only the entries whose segment `keep` accepts, in place.
    pub(super) fn retain(&mut self, keep: impl Fn(u32) -> bool) {
        let mut i = 0;
        while i < self.slots.len() {
            let v = self.slots[i];
            if v != 0 && !keep((v & u64::from(MAX_SEG)) as u32) {
                // the slot may now hold a shifted entry: look at it again
                self.remove_at(i);
                continue;
            }
            i += 1;
        }
    }

    /// A table of `cap` slots holding the entries `keep` accepts.
    pub(super) fn rebuilt(&self, cap: usize, keep: impl Fn(u32) -> bool) -> Self {
        let mut t = Self::with_capacity(cap);
        for &v in &self.slots {
            let seg = (v & u64::from(MAX_SEG)) as u32;
            if v != 0 && keep(seg) {
                let mut i = t.home_of_fp(v >> SEG_BITS);
                while t.slots[i] != 0 {
                    i = t.next(i);
                }
                t.slots[i] = v;
                t.len += 1;
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u64) -> u64 {
        // spread like real keys
        i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1
    }

    #[test]
    fn set_get_overwrite_and_sweep() {
        let mut t = Table::with_capacity(100);
        for i in 0..70 {
            t.set(key(i), (i % 5 + 1) as u32);
        }
        assert_eq!(t.len(), 70);
        for i in 0..70 {
            assert_eq!(t.get(key(i)), Some((i % 5 + 1) as u32));
        }
        assert_eq!(t.get(key(1000)), None);
        t.set(key(3), 9);
        assert_eq!((t.get(key(3)), t.len()), (Some(9), 70));
        // drop segments 1 and 2: every other entry stays findable
        t.retain(|s| s > 2);
        for i in 0..70 {
            let want = if i == 3 {
                Some(9)
            } else {
                Some((i % 5 + 1) as u32)
            };
            let want = want.filter(|s| *s > 2);
            assert_eq!(t.get(key(i)), want, "{i}");
        }
        let n = t.len();
        let r = t.rebuilt(400, |s| s != 9);
        assert_eq!(r.len(), n - 1);
        assert_eq!(r.get(key(3)), None);
        assert_eq!(r.get(key(4)), Some(5));
        assert_eq!(r.bytes(), 400 * 8);
    }
}

//! A small seeded pseudo-random generator.
//!
//! Every random choice in the core (random placement, power-of-two sampling, tie breaks,
//! capacity-eviction sampling) draws from an [`Rng`] the caller passes in, so a test can
//! replay a decision exactly. SplitMix64 is enough here: the choices need spread, not secrecy.

/// SplitMix64: one `u64` of state, full period, passes BigCrush when used as a stream.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator whose whole future output is fixed by `seed`.
    pub fn seeded(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform index in `0..n`; `n` must be non-zero.
    pub fn below(&mut self, n: usize) -> usize {
        debug_assert!(n > 0);
        // Lemire's multiply-shift: unbiased enough for n far below 2^64.
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let mut a = Rng::seeded(7);
        let mut b = Rng::seeded(7);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut r = Rng::seeded(1);
        let mut seen = [false; 5];
        for _ in 0..1000 {
            let i = r.below(5);
            seen[i] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }
}

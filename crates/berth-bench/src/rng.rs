//! A small seeded random number generator (SplitMix64).
//!
//! The workload must be reproducible from `--random-seed` regardless of how tasks interleave, so
//! every session derives its own generator from the seed and its position in the workload
//! ([`Rng::derive`]) instead of sharing one stream. SplitMix64 is tiny, fast and good enough for
//! synthetic text and lengths; nothing here is cryptographic.

/// A SplitMix64 generator.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// An independent generator for stream `stream` of this one's seed, without advancing it.
    pub fn derive(&self, stream: u64) -> Self {
        let mut mixer = Self::new(self.state ^ stream.wrapping_mul(0xA076_1D64_78BD_642F));
        Self::new(mixer.next_u64())
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform float in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A uniform integer in `[0, n)`; 0 when `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// 16 random bytes (for seeded UUIDs).
    pub fn bytes16(&mut self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.next_u64().to_le_bytes());
        out[8..].copy_from_slice(&self.next_u64().to_le_bytes());
        out
    }

    /// A normal sample (Box-Muller), rounded and clamped to at least `min`.
    pub fn normal_at_least(&mut self, mean: f64, stddev: f64, min: u64) -> u64 {
        let x = if stddev > 0.0 {
            let u1 = self.next_f64().max(f64::MIN_POSITIVE);
            let u2 = self.next_f64();
            mean + stddev * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
        } else {
            mean
        };
        let x = x.round();
        if x.is_finite() && x > min as f64 {
            x as u64
        } else {
            min
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_derived_streams_differ() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        assert_eq!(
            (0..10).map(|_| a.next_u64()).collect::<Vec<_>>(),
            (0..10).map(|_| b.next_u64()).collect::<Vec<_>>()
        );
        let root = Rng::new(42);
        assert_ne!(root.derive(1).next_u64(), root.derive(2).next_u64());
        assert_eq!(root.derive(1).next_u64(), root.derive(1).next_u64());
    }

    #[test]
    fn normal_has_roughly_the_right_mean_and_respects_min() {
        let mut r = Rng::new(7);
        let n = 20_000;
        let sum: u64 = (0..n).map(|_| r.normal_at_least(100.0, 10.0, 1)).sum();
        let mean = sum as f64 / n as f64;
        assert!((mean - 100.0).abs() < 1.0, "mean {mean}");
        assert!((0..1000).all(|_| r.normal_at_least(0.0, 5.0, 1) >= 1));
        assert_eq!(r.normal_at_least(3.0, 0.0, 1), 3);
    }
}

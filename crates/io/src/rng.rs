//! The one pseudo-random generator of linerate (field values, run orders,
//! test data): splitmix64, seedable and reproducible.

/// splitmix64 (Steele, Lea, Flood 2014): small, fast, passes BigCrush.
#[derive(Clone, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    #[inline(always)]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `[0, span)`; `span == 0` means the full 2^64.
    #[inline(always)]
    pub fn below(&mut self, span: u64) -> u64 {
        if span == 0 {
            return self.next_u64();
        }
        // lim = floor(2^64 / span) * span; wraps to 0 when span divides 2^64 (no rejection).
        let lim = (u64::MAX / span)
            .wrapping_add((u64::MAX % span + 1) / span)
            .wrapping_mul(span);
        loop {
            let r = self.next_u64();
            if lim == 0 || r < lim {
                return r % span;
            }
        }
    }
    /// Uniform in `(0, 1)` (never 0, for logarithms).
    #[inline(always)]
    pub fn unit_open(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) * (1.0 / (1u64 << 53) as f64)
    }
}

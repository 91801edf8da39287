//! What the oracles' test modules share: a fixed, dependency-free source of
//! varied inputs.

/// xorshift64*.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Uniform in [-1, 1).
    pub fn signed(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    /// Roughly normal, scale `sd` (a sum of four uniforms).
    pub fn normal(&mut self, sd: f32) -> f32 {
        (0..4).map(|_| self.signed()).sum::<f32>() * sd
    }
}

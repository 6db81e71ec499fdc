//! Portable seeded randomness: SplitMix64 seeds a xoshiro256++ stream per named purpose, so draws
//! in one component never shift another's and a seed means the same stream on every machine.

use std::sync::OnceLock;

#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// Stream `stream` of run seed `seed`.
    pub fn new(seed: u64, stream: u64) -> Self {
        let mut x = seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03);
        Rng { s: [splitmix64(&mut x), splitmix64(&mut x), splitmix64(&mut x), splitmix64(&mut x)] }
    }

    /// xoshiro256++
    pub fn next_u64(&mut self) -> u64 {
        let r = (self.s[0].wrapping_add(self.s[3])).rotate_left(23).wrapping_add(self.s[0]);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        r
    }

    /// Uniform in 0..n (Lemire's multiply-shift; n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in [0, 1), 53 bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A standard exponential variate, exact in distribution (as -ln U) by the ziggurat method
    /// (Marsaglia & Tsang 2000): 98.9% of the time one draw, two table reads and no libm call.
    #[inline]
    pub fn exp1(&mut self) -> f64 {
        let z = EXP_ZIGGURAT.get_or_init(ExpZiggurat::new);
        // layer i from the low 8 bits, the position in it from the top 53
        let r = self.next_u64();
        let i = (r & 0xff) as usize;
        let x = (r >> 11) as f64 / (1u64 << 53) as f64 * z.x[i];
        if x < z.x[i + 1] {
            return x;
        }
        self.exp1_outside(z, i, x)
    }

    /// `exp1` for a point of layer i right of x[i + 1] (out of line: 1.1% of draws).
    #[inline(never)]
    fn exp1_outside(&mut self, z: &ExpZiggurat, i: usize, x: f64) -> f64 {
        if i == 0 {
            // the tail beyond R: R plus a fresh variate (memorylessness)
            return ZIG_R + self.exp1();
        }
        // the wedge of layer i above the curve: a point under e^-x is accepted, else start over
        if z.f[i] + self.unit() * (z.f[i + 1] - z.f[i]) < libm::exp(-x) {
            x
        } else {
            self.exp1()
        }
    }
}

/// Right edge R of the ziggurat's base strip and the area V of each of its 256 layers, for the
/// density e^-x (Marsaglia & Tsang 2000).
const ZIG_R: f64 = 7.697_117_470_131_05;
const ZIG_V: f64 = 3.949_659_822_581_557e-3;

/// The layers, by index i: layer i >= 1 is the box [0, x[i]) x [f[i], f[i + 1]] with f = e^-x
/// (x falls to 0 at i = 256); layer 0 is the strip [0, R) x [0, e^-R] plus the tail beyond R,
/// of the same area, as a box of width x[0] = V / e^-R. A point of layer i left of x[i + 1]
/// lies under the curve.
struct ExpZiggurat {
    x: [f64; 257],
    f: [f64; 257],
}

static EXP_ZIGGURAT: OnceLock<ExpZiggurat> = OnceLock::new();

impl ExpZiggurat {
    fn new() -> Self {
        let (mut x, mut f) = ([0.0; 257], [0.0; 257]);
        x[1] = ZIG_R;
        f[1] = libm::exp(-ZIG_R);
        x[0] = ZIG_V / f[1];
        for i in 1..255 {
            // layer i has area V: x[i] (f[i + 1] - f[i]) = V
            f[i + 1] = f[i] + ZIG_V / x[i];
            x[i + 1] = -libm::log(f[i + 1]);
        }
        // the top layer closes at the peak (its area is V to within 1e-15)
        (x[256], f[256]) = (0.0, 1.0);
        ExpZiggurat { x, f }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn same_seed_same_stream_and_streams_differ() {
        let a: Vec<u64> = (0..4)
            .map({
                let mut r = Rng::new(7, 1);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..4)
            .map({
                let mut r = Rng::new(7, 1);
                move |_| r.next_u64()
            })
            .collect();
        let c: Vec<u64> = (0..4)
            .map({
                let mut r = Rng::new(7, 2);
                move |_| r.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        let mut r = Rng::new(1, 0);
        assert!((0..1000).all(|_| r.below(3) < 3));
    }

    /// The ziggurat's layers have equal areas and close at the peak.
    #[test]
    fn exp_ziggurat_layers_have_equal_area() {
        let z = ExpZiggurat::new();
        assert!((z.x[0] * z.f[1] - ZIG_V).abs() < 1e-15);
        for i in 1..256 {
            assert!(z.x[i + 1] < z.x[i] && z.f[i + 1] > z.f[i]);
            assert!((z.x[i] * (z.f[i + 1] - z.f[i]) - ZIG_V).abs() < 1e-14, "layer {i}");
        }
        assert!((-libm::log(z.f[255]) - z.x[255]).abs() < 1e-15);
    }

    /// exp1 follows the standard exponential: its survival function at several points, the
    /// tail beyond R included, and its mean.
    #[test]
    fn exp1_is_standard_exponential() {
        let mut r = Rng::new(11, 0);
        let n = 4_000_000;
        let v: Vec<f64> = (0..n).map(|_| r.exp1()).collect();
        for t in [0.01, 0.1, 0.5, 1.0, 2.0, 4.0, 7.0, 7.697, 8.5, 10.0, 12.0] {
            let want = libm::exp(-t);
            let got = v.iter().filter(|&&x| x > t).count() as f64 / n as f64;
            // within 5 standard errors
            assert!((got - want).abs() < 5.0 * (want * (1.0 - want) / n as f64).sqrt() + 1e-9, "P(E > {t}) = {got}, want {want}");
        }
        let mean = v.iter().sum::<f64>() / n as f64;
        assert!((mean - 1.0).abs() < 5.0 / (n as f64).sqrt(), "mean {mean}");
        assert!(v.iter().all(|&x| x >= 0.0));
    }
}

//! Helpers for tests and benchmarks: a deterministic RNG that never produces zeros by default.
//!
//! Not part of the compiler: rutile's own tests, benchmarks and the runtime's device tests
//! share it so that their inputs come from one generator. [`Rng`] is splitmix64: small, fast,
//! and the same sequence on every platform for a given seed. Its float samplers never return
//! zero (a zero input hides sign, scale and division errors and makes relative comparisons
//! meaningless); its integer samplers cover their whole range, zero included.

pub mod philox;

use crate::{
    CacheModifier, Kernel,
    ScalarType::{F16, F32, I32},
    Value,
};
use half::f16;

/// What the runtime specializes a launch on for these interpreter arguments (Triton's
/// specialization): integers divisible by 16 or equal to 1, buffers (at offset 0, 16-byte
/// aligned) divisible; how tests lower a kernel as a GPU launch with these arguments would.
pub fn runtime_spec(args: &[crate::interp::ArgValue]) -> crate::target::Specialization {
    use crate::interp::ArgValue;
    crate::target::Specialization {
        divisible_by_16: args
            .iter()
            .map(|a| match a {
                ArgValue::Int(v) => v % 16 == 0,
                ArgValue::Ptr { offset, .. } => *offset == 0,
                _ => false,
            })
            .collect(),
        equal_to_1: args.iter().map(|a| matches!(a, ArgValue::Int(1))).collect(),
    }
}

/// The interpreter arguments of the matmul seed on row-major `m x k` and `k x n` operands
/// and an `m x n` output in buffers 0, 1 and 2 (each at offset 0).
pub fn row_major_matmul_args(m: usize, n: usize, k: usize) -> Vec<crate::interp::ArgValue> {
    use crate::interp::ArgValue;
    let ptrs = (0..3).map(|buffer| ArgValue::Ptr { buffer, offset: 0 });
    ptrs.chain(crate::seeds::matmul_row_major_args(m, n, k).map(|v| ArgValue::Int(v as i64)))
        .collect()
}

/// `n` floats drawn from [-1, 1] (never zero) in a buffer of `elem`: an fp8 type, f16,
/// bf16, or f32 for any other type (the operands of a `dot`).
pub fn float_buffer(rng: &mut Rng, elem: crate::ScalarType, n: usize) -> crate::interp::HostBuffer {
    use crate::interp::HostBuffer;
    let v = rng.f32s(n, -1.0, 1.0);
    match elem {
        F16 => HostBuffer::from_slice(&v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>()),
        crate::ScalarType::BF16 => {
            HostBuffer::from_slice(&v.iter().map(|&x| half::bf16::from_f32(x)).collect::<Vec<_>>())
        }
        _ if elem.is_fp8() => {
            let f = crate::fp8::format_of(elem).expect("an fp8 type");
            let bytes = v.iter().map(|&x| f.encode(x as f64)).collect();
            HostBuffer::from_bytes(elem, bytes).expect("one byte an element")
        }
        _ => HostBuffer::from_slice(&v),
    }
}

/// A buffer of fp8, f16, bf16 or f32 values (as [`float_buffer`] makes them) as f64.
pub fn float_values(b: &crate::interp::HostBuffer) -> Vec<f64> {
    match b.elem() {
        F16 => b.to_vec::<f16>().unwrap().iter().map(|v| v.to_f64()).collect(),
        crate::ScalarType::BF16 => b.to_vec::<half::bf16>().unwrap().iter().map(|v| v.to_f64()).collect(),
        e if e.is_fp8() => {
            let f = crate::fp8::format_of(e).expect("an fp8 type");
            b.as_bytes().iter().map(|&x| f.decode(x)).collect()
        }
        _ => b.to_vec::<f32>().unwrap().iter().map(|&v| v as f64).collect(),
    }
}

/// Asserts that the floats of `got` are those of `want` within `tol` of the largest `want`
/// (at least 1e-3): sums of products that differ only in rounding order. `at` names the case.
pub fn assert_close_to_largest(got: &crate::interp::HostBuffer, want: &crate::interp::HostBuffer, tol: f64, at: &str) {
    let (g, w) = (float_values(got), float_values(want));
    assert_eq!(g.len(), w.len(), "{at}: lengths");
    let scale = w.iter().fold(1e-3f64, |s, v| s.max(v.abs()));
    for (i, (g, w)) in g.iter().zip(&w).enumerate() {
        assert!((g - w).abs() <= tol * scale, "{at}: element {i}: {g} against {w}");
    }
}

/// splitmix64, for reproducible test inputs.
///
/// ```
/// use rutile_ir::testing::Rng;
///
/// let mut rng = Rng::new(1);
/// let x = rng.f32s(1000, -1.0, 1.0);
/// assert!(x.iter().all(|&v| (-1.0..=1.0).contains(&v) && v != 0.0));
/// assert_eq!(Rng::new(1).f32s(1000, -1.0, 1.0), x);
/// ```
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator whose sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`; the bias of the remainder is negligible for small `n`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in [0, 1) and never zero: 53 random bits, offset by half a step.
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi) (up to rounding at `hi`), never zero.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        assert!(lo < hi, "empty range [{lo}, {hi})");
        loop {
            let x = lo + (hi - lo) * self.unit();
            if x != 0.0 {
                return x;
            }
        }
    }

    /// `n` f32s uniform in [lo, hi) (up to rounding at `hi`), none zero.
    pub fn f32s(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n)
            .map(|_| self.nonzero(|r| r.uniform(lo.into(), hi.into()) as f32, |v| v == 0.0))
            .collect()
    }

    /// `n` f16s uniform in [lo, hi] (`hi` only through rounding), none zero.
    pub fn f16s(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f16> {
        (0..n)
            .map(|_| {
                self.nonzero(
                    |r| f16::from_f64(r.uniform(lo.into(), hi.into())),
                    |v| v.to_f32() == 0.0,
                )
            })
            .collect()
    }

    /// `n` integers uniform in `lo..hi`.
    pub fn i32s(&mut self, n: usize, lo: i32, hi: i32) -> Vec<i32> {
        assert!(lo < hi, "empty range {lo}..{hi}");
        (0..n)
            .map(|_| (lo as i64 + self.below((hi as i64 - lo as i64) as u64) as i64) as i32)
            .collect()
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }

    /// A sample of `draw` that `is_zero` rejects no more: rounding to a narrow type can turn
    /// a small non-zero value into zero.
    fn nonzero<T>(&mut self, mut draw: impl FnMut(&mut Rng) -> T, is_zero: impl Fn(T) -> bool) -> T
    where
        T: Copy,
    {
        loop {
            let v = draw(self);
            if !is_zero(v) {
                return v;
            }
        }
    }
}

/// One 2-D step of [`random_kernel_steps`]: the program's `block` elements of `a` as an
/// `[r, c]` tile (loaded with a random cache modifier), combined with its row or column
/// reductions by broadcasting (or with `x` where the mask holds), stored to `c` as f16.
/// The load and the store each walk the program's elements row-major or column-major
/// (then contiguous along the tile's other axis), so that loads and stores differ in
/// their contiguous axis and values change layout between them.
fn tile_2d<'b>(
    k: &'b crate::KernelBuilder,
    rng: &mut Rng,
    block: i32,
    (a, c, n, x): (Value<'b>, Value<'b>, Value<'b>, Value<'b>),
) {
    let (r, cols) = match block {
        16 => (4, 4),
        64 => (8, 8),
        128 => (8, 16),
        _ => (16, 16),
    };
    let rows = k.arange(0, r).expand_dims(1);
    let cs = k.arange(0, cols).expand_dims(0);
    let row_major = k.program_id(0) * block + rows * cols + cs;
    let column_major = k.program_id(0) * block + cs * r + rows;
    let (load_offs, offs) = match rng.below(3) {
        0 => (row_major, row_major),
        1 => (row_major, column_major),
        _ => (column_major, row_major),
    };
    let (load_mask, mask) = (load_offs.lt(n), offs.lt(n));
    let cache = [CacheModifier::Default, CacheModifier::Streaming][rng.below(2) as usize];
    let t = k.load_masked_with(a + load_offs, load_mask, 0.25, cache);
    let u = match rng.below(4) {
        0 => t - t.max(1).expand_dims(1),
        1 => t * t.sum(0).expand_dims(0) * 0.125,
        2 => k.where_(mask, (t * 0.5).exp(), x),
        _ => (t + t.min(0).expand_dims(0)).trans().trans() - t.sum(1).expand_dims(1),
    };
    k.store_masked(c + offs, u.to(F16), mask);
}

/// A random well-typed kernel (for fuzzing): parameters `a: *f32, b: *i32, c: *f16, n: i32,
/// x: f32`, over a grid of programs of one block each; values of one block shape in three
/// pools (i32 offsets, f32 data, masks: comparisons of values and of pointers), masked
/// loads and stores in bounds, reductions, loops and branches, the standard library's
/// compositions (`flip`, `xor_sum`, `softmax`), `asin`, `atan`, `expm1`, `log1p`, `rint` and
/// `isnan`, hints whose promises hold, a block pointer over the
/// program's own elements, and 2-D tiles of the same elements (broadcasts of row and column
/// reductions) stored to `c`.
pub fn random_kernel(seed: u64) -> Result<Kernel, crate::BuildError> {
    random_kernel_steps(seed, usize::MAX)
}

/// [`random_kernel`] cut to its first `max_steps` random ops: the same seed with fewer
/// steps gives a prefix of the same program, which is how a failing kernel is shrunk.
pub fn random_kernel_steps(seed: u64, max_steps: usize) -> Result<Kernel, crate::BuildError> {
    Kernel::build("careful", |k| {
        let mut rng = Rng::new(seed);
        let block = [16i32, 64, 128, 256][rng.below(4) as usize];
        let (a, b) = (k.arg_ptr("a", F32), k.arg_ptr("b", I32));
        let c = k.arg_ptr("c", F16);
        let n = k.arg_i32("n");
        let x = k.arg_scalar("x", F32);
        let offs = k.program_id(0) * block + k.arange(0, block);
        let mask = offs.lt(n);
        let mut ints = vec![offs, k.load_masked(b + offs, mask, 1)];
        let mut floats = vec![
            k.load_masked(a + offs, mask, 0.5),
            k.full(&[block as u32], 2.0, F32) * x,
        ];
        let mut masks = vec![mask];
        let steps = (3 + rng.below(12) as usize).min(max_steps);
        for _ in 0..steps {
            let i = |rng: &mut Rng, v: &[Value<'_>]| rng.below(v.len() as u64) as usize;
            let (fi, fj, ii, mi) = (
                i(&mut rng, &floats),
                i(&mut rng, &floats),
                i(&mut rng, &ints),
                i(&mut rng, &masks),
            );
            let (f, g, j, m) = (floats[fi], floats[fj], ints[ii], masks[mi]);
            match rng.below(21) {
                0 => floats.push(f + g * 0.5),
                1 => floats.push(k.where_(m, f, g)),
                2 => floats.push((f - f.max(0)).exp()),
                3 => floats.push(f / (g.abs() + 1.0)),
                4 => ints.push((j * 3 + 1) % 7),
                5 => ints.push(j.minimum(offs) & 1023),
                // A comparison of values, or of pointers into one buffer (by offset).
                6 if rng.below(2) == 0 => masks.push(f.lt(g) | m),
                6 => masks.push((a + j).le(a + offs) | m),
                7 => floats.push(j.to(F32) + f.sum(0)),
                8 => k.store_masked(a + offs, f, m & mask),
                9 => {
                    let r = k.for_range(0, 3, 1, &[f], |_, c| vec![c[0] * 0.5 + g]);
                    floats.push(r[0]);
                }
                10 => {
                    let r = k.if_else(n.gt(10), || vec![f], || vec![g]);
                    floats.push(r[0]);
                }
                11 | 12 => tile_2d(k, &mut rng, block, (a, c, n, x)),
                13 => ints.push(f.argmax(0) + j),
                // The standard library's compositions, the inverse trigonometric functions
                // and a block pointer over this program's own elements.
                14 => floats.push(f.flip(0) - g),
                15 => ints.push(j ^ j.xor_sum(0, false)),
                16 => floats.push(f.softmax(0, false) * g),
                17 => floats.push((f / (f.abs() + 1.0)).asin() + g.atan()),
                // libdevice's functions built from ops, a rounding op and a classification.
                18 => floats.push(k.where_(f.isnan(), g, (f * 0.25).expm1() + g.abs().log1p() + f.rint())),
                // Hints whose promises hold: the offsets' runs, and multiples of 4.
                19 => {
                    let runs = offs.max_contiguous(block).multiple_of(block);
                    floats.push(k.load_masked(a + runs, mask, 0.5) * g);
                    ints.push((j * 4).multiple_of(4) + 1);
                }
                _ => {
                    let p = k.make_block_ptr(a, (n,), (1,), (k.program_id(0) * block,), &[block as u32], &[0]);
                    floats.push(k.load_block(&p, &[0], crate::Padding::Zero) + f);
                }
            }
        }
        let last = *floats.last().unwrap();
        k.store_masked(a + offs, last, mask);
        k.store_masked(b + offs, *ints.last().unwrap(), mask);
    })
}

/// `c = a @ b` of one 64 x 64 x 64 block (parameters `a`, `b`, `c`), A of E4M3 and B of
/// E5M2, B along K in memory where `b_along_k` (element `(k, n)` at `n * 64 + k`), else
/// along N: the two fp8 formats in one `dot`.
pub fn mixed_fp8_dot(b_along_k: bool) -> crate::Kernel {
    use crate::ScalarType::{F32, F8E4M3, F8E5M2};
    let (sbk, sbn) = if b_along_k { (1, 64) } else { (64, 1) };
    crate::Kernel::build("mixed_fp8_dot", |k| {
        let (pa, pb, pc) = (k.arg_ptr("a", F8E4M3), k.arg_ptr("b", F8E5M2), k.arg_ptr("c", F32));
        let r = k.arange(0, 64);
        let av = k.load(pa + (r.expand_dims(1) * 64 + r.expand_dims(0)));
        let bv = k.load(pb + (r.expand_dims(1) * sbk + r.expand_dims(0) * sbn));
        k.store(pc + (r.expand_dims(1) * 64 + r.expand_dims(0)), k.dot(av, bv));
    })
    .expect("the kernel builds")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_hold_and_zeros_never_come() {
        let mut rng = Rng::new(7);
        for _ in 0..10_000 {
            let u = rng.unit();
            assert!(u > 0.0 && u < 1.0);
            assert!(rng.below(3) < 3);
        }
        assert!(rng
            .f32s(10_000, -1e-3, 1e-3)
            .iter()
            .all(|&v| v != 0.0 && v.abs() <= 1e-3));
        // Many of these round to zero in f16; none may come back.
        assert!(rng.f16s(1000, -1e-8, 1e-7).iter().all(|&v| v.to_f32() != 0.0));
        let ints = rng.i32s(10_000, -2, 3);
        assert!(ints.iter().all(|v| (-2..3).contains(v)));
        assert!((-2..3).all(|v| ints.contains(&v)));
    }

    #[test]
    fn the_sequence_is_splitmix64() {
        // The first outputs of splitmix64 seeded with 0, from its reference implementation.
        let mut rng = Rng::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }
}

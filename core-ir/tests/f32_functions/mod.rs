//! What the tests of the math functions built from ops share: an element-wise kernel of
//! one or two f32 operands run in the interpreter and lowered through the simulator, and
//! errors in ulps against f64.

#![allow(dead_code)] // each test file uses its own part

use rutile_ir::interp::{self, simt, ArgValue, HostBuffer};
use rutile_ir::lower::lower;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType::{self, F32};
use rutile_ir::{Kernel, KernelBuilder, Value};

pub const BLOCK: i32 = 1024;

/// A function of two f32 blocks, as the tests write them.
pub trait Binary: for<'b> Fn(&'b KernelBuilder, Value<'b>, Value<'b>) -> Value<'b> {}
impl<F: for<'b> Fn(&'b KernelBuilder, Value<'b>, Value<'b>) -> Value<'b>> Binary for F {}

/// `f(y, x)` element by element over `y` and `x` (f32), in the interpreter.
pub fn apply(f: impl Binary, y: &[f32], x: &[f32]) -> Vec<f32> {
    let kernel = kernel(&f);
    let (args, mut bufs) = launch(y, x);
    interp::run(&kernel, grid(y.len()), &args, &mut bufs).unwrap_or_else(|e| panic!("{e}"));
    bufs[2].to_vec::<f32>().unwrap()
}

/// `f(x)` element by element over `x` (f32), in the interpreter.
pub fn apply1(f: impl for<'b> Fn(Value<'b>) -> Value<'b>, x: &[f32]) -> Vec<f32> {
    apply(|_, y, _| f(y), x, x)
}

/// The kernel storing `f(y, x)` for the loaded `y` and `x` (f32).
pub fn kernel(f: &impl Binary) -> Kernel {
    kernel_of(F32, BLOCK, f)
}

/// [`kernel`] on elements of type `t`, `block` of them a program.
pub fn kernel_of(t: ScalarType, block: i32, f: &impl Binary) -> Kernel {
    Kernel::build("elementwise_function", |k| {
        let (py, px, out) = (k.arg_ptr("y", t), k.arg_ptr("x", t), k.arg_ptr("out", t));
        let n = k.arg_i32("n");
        let offs = k.program_id(0) * block + k.arange(0, block);
        let mask = offs.lt(n);
        let (y, x) = (k.load_masked(py + offs, mask, 0.0), k.load_masked(px + offs, mask, 0.0));
        k.store_masked(out + offs, f(k, y, x), mask);
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

fn grid(n: usize) -> [u32; 3] {
    [(n as u32).div_ceil(BLOCK as u32), 1, 1]
}

fn launch(y: &[f32], x: &[f32]) -> (Vec<ArgValue>, Vec<HostBuffer>) {
    let ptr = |buffer| ArgValue::Ptr { buffer, offset: 0 };
    let args = vec![ptr(0), ptr(1), ptr(2), ArgValue::Int(y.len() as i64)];
    let bufs = vec![
        HostBuffer::from_slice(y),
        HostBuffer::from_slice(x),
        HostBuffer::zeros(F32, y.len()),
    ];
    (args, bufs)
}

/// Asserts that `f` lowered for a Vulkan and an NVIDIA target computes, in the simulator,
/// the interpreter's bits on `y` and `x`.
pub fn assert_lowering_matches(name: &str, f: impl Binary, y: &[f32], x: &[f32]) {
    let (args, bufs) = launch(y, x);
    interpreted_and_lowered_agree(name, &kernel(&f), grid(y.len()), &args, &bufs, 2);
}

/// Runs `kernel` in the interpreter and, lowered for a Vulkan and an NVIDIA target, in the
/// simulator, on `bufs`; asserts that buffer `output` comes out the same bit for bit, and
/// returns the interpreter's buffers.
pub fn interpreted_and_lowered_agree(
    what: &str,
    kernel: &Kernel,
    grid: [u32; 3],
    args: &[ArgValue],
    bufs: &[HostBuffer],
    output: usize,
) -> Vec<HostBuffer> {
    let mut want = bufs.to_vec();
    interp::run(kernel, grid, args, &mut want).unwrap_or_else(|e| panic!("{what}: {e}"));
    for target in [Target::vulkan(32, 4, 48 * 1024), Target::nvidia(4, 48 * 1024)] {
        let lowered = lower(kernel, &target, &Specialization::none(args.len())).unwrap();
        let mut got = bufs.to_vec();
        simt::run_threads(&lowered, grid, args, &mut got).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(
            got[output].as_bytes(),
            want[output].as_bytes(),
            "{what} lowered for {} warps",
            target.num_warps
        );
    }
    want
}

/// `|got - want|` in ulps of `want` rounded to f32 (the spacing of f32 at it; at least the
/// smallest normal's).
pub fn ulps(got: f32, want: f64) -> f64 {
    if got.is_nan() && want.is_nan() || got as f64 == want {
        return 0.0;
    }
    // A NaN where a number is due, or the reverse (a comparison with NaN would let it pass).
    if got.is_nan() || want.is_nan() {
        return f64::INFINITY;
    }
    let w = (want as f32).abs().max(f32::MIN_POSITIVE);
    let spacing = (f32::from_bits(w.to_bits() + 1) - w) as f64;
    (got as f64 - want).abs() / spacing
}

/// The largest error in ulps of `f` against `exact` over `inputs` (`(y, x)` pairs), with
/// the pair where it is.
pub fn worst(f: impl Binary, exact: impl Fn(f64, f64) -> f64, inputs: &[(f32, f32)]) -> (f64, f32, f32) {
    let (y, x): (Vec<f32>, Vec<f32>) = inputs.iter().copied().unzip();
    let got = apply(f, &y, &x);
    let mut worst = (0.0, 0.0, 0.0);
    for ((&g, &yv), &xv) in got.iter().zip(&y).zip(&x) {
        let e = ulps(g, exact(yv as f64, xv as f64));
        if e > worst.0 {
            worst = (e, yv, xv);
        }
    }
    worst
}

/// The largest error in ulps of unary `f` against `exact` over `inputs`, with where it is.
pub fn worst1(f: impl for<'b> Fn(Value<'b>) -> Value<'b>, exact: impl Fn(f64) -> f64, inputs: &[f32]) -> (f64, f32) {
    let pairs: Vec<(f32, f32)> = inputs.iter().map(|&v| (v, 0.0)).collect();
    let (e, at, _) = worst(|_, y, _| f(y), |y, _| exact(y), &pairs);
    (e, at)
}

/// Uniform points in `[lo, hi]` and magnitudes spread over powers of two down to 2^-30,
/// of both signs.
pub fn points(rng: &mut Rng, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    let mut v = rng.f32s(n, lo, hi);
    v.extend((0..n / 4).map(|i| {
        let m = 2f32.powf(rng.f32s(1, -30.0, hi.abs().max(lo.abs()).log2())[0]);
        if i % 2 == 0 {
            m
        } else {
            -m
        }
    }));
    v
}

/// Whether `got` is `want` bit for bit, or both are NaN.
pub fn same(got: f32, want: f32) -> bool {
    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan())
}

/// The error of building `f`'s kernel, as text.
pub fn build_error(f: impl for<'b> FnOnce(&'b KernelBuilder)) -> String {
    Kernel::build("bad", f).expect_err("the kernel is invalid").to_string()
}

/// Arguments from 2^24 to the largest f32: random ones of every exponent, and f32s near a
/// multiple of π/2, where the reduction keeps the fewest digits.
pub fn huge_arguments(rng: &mut Rng) -> Vec<f32> {
    let mut v: Vec<f32> = (0..200_000)
        .map(|_| {
            let e = 24 + rng.below(104) as i32;
            let m = 1.0 + rng.unit();
            let x = (m * 2f64.powi(e)) as f32;
            if rng.below(2) == 0 {
                x
            } else {
                -x
            }
        })
        .collect();
    // Near a multiple: every 97th significand of the binades 2^24 to 2^29 whose product
    // with 2/π lies within 2·10^-5 of an integer (f64 resolves that product to 2^-24 there).
    for e in 24..30 {
        for m in (0..(1u32 << 23)).step_by(97) {
            let x = f32::from_bits(((e + 127) << 23) | m) as f64;
            let t = (x * std::f64::consts::FRAC_2_PI).rem_euclid(1.0);
            if t.min(1.0 - t) < 2e-5 {
                v.push(x as f32);
            }
        }
    }
    v
}

/// A unary function built from ops, as the tests name them.
pub type Unary = for<'b> fn(Value<'b>) -> Value<'b>;

/// Checks that `f` (named `name`) on f16 arguments is its f32 result rounded once to f16,
/// at `x`, and that f64 and i32 arguments are errors naming it and the type.
pub fn assert_f16_rounds_once_and_others_are_errors(name: &str, f: Unary, x: &[f32]) {
    assert_f16_rounds_once(name, f, x);
    assert_errors(name, f, &[(ScalarType::F64, "f64"), (ScalarType::I32, "i32")]);
}

/// Checks that `f` (named `name`) on f16 arguments is its f32 result rounded once to f16,
/// at `x`.
pub fn assert_f16_rounds_once(name: &str, f: Unary, x: &[f32]) {
    let want: Vec<f32> = apply1(f, x).iter().map(|&t| half::f16::from_f32(t).to_f32()).collect();
    let got = apply1(|v| f(v.to(ScalarType::F16)).to(F32), x);
    for ((g, w), v) in got.iter().zip(&want).zip(x) {
        assert!(same(*g, *w), "{name}({v}) in f16: {g}, expected {w}");
    }
}

/// Checks that `f` (named `name`) of each type is an error naming it and the type (as
/// written beside it).
pub fn assert_errors(name: &str, f: Unary, types: &[(ScalarType, &str)]) {
    for &(t, what) in types {
        let e = build_error(|k| {
            let _ = f(k.zeros(&[16], t));
        });
        assert!(e.contains(name) && e.contains(what), "{e}");
    }
}

/// The f32 values within `ulps` of each multiple `k·π/2` for `k` up to `kmax` (positive).
pub fn near_multiples_of_pi_2(kmax: u32, ulps: i32) -> Vec<f32> {
    let mut v = Vec::new();
    for k in 1..=kmax {
        let c = (k as f64 * std::f64::consts::FRAC_PI_2) as f32;
        for d in -ulps..=ulps {
            v.push(f32::from_bits((c.to_bits() as i32 + d) as u32));
        }
    }
    v
}

/// Checks `f` (named `name`) at each `(x, expected)` pair, bit for bit (NaNs as NaNs).
pub fn assert_special_values(name: &str, f: Unary, pairs: &[(f32, f32)]) {
    let x: Vec<f32> = pairs.iter().map(|c| c.0).collect();
    for (c, got) in pairs.iter().zip(apply1(f, &x)) {
        assert!(same(got, c.1), "{name}({}) = {got}, expected {}", c.0, c.1);
    }
}

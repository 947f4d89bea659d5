//! `asin`, `acos`, `atan` and `atan2` (built from ops in `builder/inverse_trig.rs`): their
//! error against f64 over their domains in the interpreter, their special values (C's
//! Annex F where it speaks), the lowering in the simulator against the interpreter, and
//! their mistakes as errors that name them.

use rutile_ir::interp::{self, simt, ArgValue, HostBuffer};
use rutile_ir::lower::lower;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType::{F16, F32, F64, I32};
use rutile_ir::{Kernel, KernelBuilder, ScalarType, Value};

const BLOCK: i32 = 1024;

/// `f(y, x)` element by element over `y` and `x` (f32), in the interpreter.
fn apply(f: impl for<'b> Fn(&'b KernelBuilder, Value<'b>, Value<'b>) -> Value<'b>, y: &[f32], x: &[f32]) -> Vec<f32> {
    let kernel = kernel(&f);
    let n = y.len();
    let (args, mut bufs) = launch(y, x);
    let grid = (n as u32).div_ceil(BLOCK as u32);
    interp::run(&kernel, [grid, 1, 1], &args, &mut bufs).unwrap_or_else(|e| panic!("{e}"));
    bufs[2].to_vec::<f32>().unwrap()
}

fn kernel(f: &impl for<'b> Fn(&'b KernelBuilder, Value<'b>, Value<'b>) -> Value<'b>) -> Kernel {
    Kernel::build("inverse_trig", |k| {
        let (py, px, out) = (k.arg_ptr("y", F32), k.arg_ptr("x", F32), k.arg_ptr("out", F32));
        let n = k.arg_i32("n");
        let offs = k.program_id(0) * BLOCK + k.arange(0, BLOCK);
        let mask = offs.lt(n);
        let (y, x) = (k.load_masked(py + offs, mask, 0.0), k.load_masked(px + offs, mask, 0.0));
        k.store_masked(out + offs, f(k, y, x), mask);
    })
    .unwrap_or_else(|e| panic!("{e}"))
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

/// `|got - want|` in ulps of `want` rounded to f32 (the spacing of f32 at it; at least the
/// smallest normal's).
fn ulps(got: f32, want: f64) -> f64 {
    if got.is_nan() && want.is_nan() || got as f64 == want {
        return 0.0;
    }
    let w = (want as f32).abs().max(f32::MIN_POSITIVE);
    let spacing = (f32::from_bits(w.to_bits() + 1) - w) as f64;
    (got as f64 - want).abs() / spacing
}

/// The largest error in ulps of `f` against `exact` over `inputs` (`(y, x)` pairs).
fn worst(
    f: impl for<'b> Fn(&'b KernelBuilder, Value<'b>, Value<'b>) -> Value<'b>,
    exact: impl Fn(f64, f64) -> f64,
    inputs: &[(f32, f32)],
) -> (f64, f32, f32) {
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

/// Uniform points in `[lo, hi]` and magnitudes spread over powers of two down to 2^-30,
/// of both signs.
fn points(rng: &mut Rng, n: usize, lo: f32, hi: f32) -> Vec<f32> {
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

#[test]
fn the_functions_are_within_three_ulps_of_f64() {
    let mut rng = Rng::new(71);
    let unit: Vec<(f32, f32)> = points(&mut rng, 200_000, -1.0, 1.0)
        .into_iter()
        .map(|v| (v, 0.0))
        .collect();
    let (e, at, _) = worst(|_, y, _| y.asin(), |y, _| y.asin(), &unit);
    assert!(e <= 3.0, "asin: {e:.2} ulp at {at}");
    let (e, at, _) = worst(|_, y, _| y.acos(), |y, _| y.acos(), &unit);
    assert!(e <= 3.0, "acos: {e:.2} ulp at {at}");
    let mut wide: Vec<(f32, f32)> = points(&mut rng, 100_000, -10.0, 10.0)
        .into_iter()
        .map(|v| (v, 0.0))
        .collect();
    wide.extend((0..20_000).map(|i| {
        let m = 2f32.powf(rng.f32s(1, -60.0, 60.0)[0]);
        (if i % 2 == 0 { m } else { -m }, 0.0)
    }));
    let (e, at, _) = worst(|_, y, _| y.atan(), |y, _| y.atan(), &wide);
    assert!(e <= 3.0, "atan: {e:.2} ulp at {at}");
    let pairs: Vec<(f32, f32)> = (0..100_000)
        .map(|_| {
            let v = rng.f32s(2, -1.0, 1.0);
            let s = 2f32.powf(rng.f32s(1, -8.0, 8.0)[0]);
            (v[0] * s, v[1])
        })
        .collect();
    let (e, y, x) = worst(|k, y, x| k.atan2(y, x), |y, x| y.atan2(x), &pairs);
    assert!(e <= 3.0, "atan2: {e:.2} ulp at ({y}, {x})");
}

#[test]
fn special_values_are_c_s() {
    use std::f32::consts::{FRAC_PI_2, FRAC_PI_4, PI};
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let same = |got: f32, want: f32| got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan());
    let unary: [(&str, f32, f32); 14] = [
        ("asin", 0.0, 0.0),
        ("asin", -0.0, -0.0),
        ("asin", 1.0, FRAC_PI_2),
        ("asin", -1.0, -FRAC_PI_2),
        ("asin", 1.5, nan),
        ("asin", nan, nan),
        ("acos", 1.0, 0.0),
        ("acos", -1.0, PI),
        ("acos", -1.5, nan),
        ("atan", 0.0, 0.0),
        ("atan", -0.0, -0.0),
        ("atan", inf, FRAC_PI_2),
        ("atan", -inf, -FRAC_PI_2),
        ("atan", nan, nan),
    ];
    let x: Vec<f32> = unary.iter().map(|c| c.1).collect();
    let asin = apply(|_, y, _| y.asin(), &x, &x);
    let acos = apply(|_, y, _| y.acos(), &x, &x);
    let atan = apply(|_, y, _| y.atan(), &x, &x);
    for (i, &(op, input, want)) in unary.iter().enumerate() {
        let got = match op {
            "asin" => asin[i],
            "acos" => acos[i],
            _ => atan[i],
        };
        assert!(same(got, want), "{op}({input}) = {got}, expected {want}");
    }
    // atan2(y, x) where C's Annex F says exactly what it is.
    let binary: [(f32, f32, f32); 16] = [
        (0.0, 0.0, 0.0),
        (-0.0, 0.0, -0.0),
        (0.0, -0.0, PI),
        (-0.0, -0.0, -PI),
        (0.0, -1.0, PI),
        (-0.0, -1.0, -PI),
        (0.0, 1.0, 0.0),
        (-0.0, 1.0, -0.0),
        (1.0, 0.0, FRAC_PI_2),
        (-1.0, -0.0, -FRAC_PI_2),
        (1.0, -inf, PI),
        (-1.0, inf, -0.0),
        (inf, 3.0, FRAC_PI_2),
        (inf, inf, FRAC_PI_4),
        (-inf, -inf, -3.0 * FRAC_PI_4),
        (nan, 1.0, nan),
    ];
    let (y, x): (Vec<f32>, Vec<f32>) = binary.iter().map(|c| (c.0, c.1)).unzip();
    let got = apply(|k, y, x| k.atan2(y, x), &y, &x);
    for (g, &(y, x, want)) in got.iter().zip(&binary) {
        assert!(
            same(*g, want) || (*g - want).abs() <= 2.0 * f32::EPSILON * want.abs(),
            "atan2({y}, {x}) = {g}, expected {want}"
        );
    }
}

#[test]
fn the_lowering_computes_the_interpreter_s_bits() {
    let mut rng = Rng::new(72);
    let n = 3000;
    let y = points(&mut rng, n, -1.5, 1.5);
    let x = points(&mut rng, n, -3.0, 3.0);
    type Op = for<'b> fn(&'b KernelBuilder, Value<'b>, Value<'b>) -> Value<'b>;
    let ops: [(&str, Op); 4] = [
        ("asin", |_, y, _| y.asin()),
        ("acos", |_, y, _| y.acos()),
        ("atan", |_, y, x| (y * x * 100.0f32).atan()),
        ("atan2", |k, y, x| k.atan2(y, x)),
    ];
    for (name, f) in ops {
        let kernel = kernel(&f);
        let (args, bufs) = launch(&y, &x);
        let grid = [(y.len() as u32).div_ceil(BLOCK as u32), 1, 1];
        let mut want = bufs.clone();
        interp::run(&kernel, grid, &args, &mut want).unwrap();
        for target in [Target::vulkan(32, 4, 48 * 1024), Target::nvidia(4, 48 * 1024)] {
            let lowered = lower(&kernel, &target, &Specialization::none(args.len())).unwrap();
            let mut got = bufs.clone();
            simt::run_threads(&lowered, grid, &args, &mut got).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(
                got[2].as_bytes(),
                want[2].as_bytes(),
                "{name} lowered for {} warps",
                target.num_warps
            );
        }
    }
}

#[test]
fn f16_rounds_the_f32_result_once() {
    let x: Vec<f32> = (0..=200).map(|i| -1.0 + i as f32 / 100.0).collect();
    let f32s = apply(|_, y, _| y.asin(), &x, &x);
    let f16s = apply(|_, y, _| y.to(F16).asin().to(F32), &x, &x);
    for ((a, b), v) in f32s.iter().zip(&f16s).zip(&x) {
        let v16 = half::f16::from_f32(*v).to_f32();
        let want = half::f16::from_f32(apply_one_asin(v16)).to_f32();
        assert_eq!(*b, want, "asin({v}) in f16 (f32 gives {a})");
    }
}

/// The f32 `asin` of one value, in the interpreter.
fn apply_one_asin(v: f32) -> f32 {
    apply(|_, y, _| y.asin(), &[v], &[v])[0]
}

/// A block of 16 zeros of `t`.
fn block(k: &KernelBuilder, t: ScalarType) -> Value<'_> {
    k.zeros(&[16], t)
}

fn build_error(f: impl for<'b> FnOnce(&'b KernelBuilder)) -> String {
    Kernel::build("bad", f).expect_err("the kernel is invalid").to_string()
}

#[test]
fn mistakes_are_errors_that_name_the_function() {
    let cases: Vec<(String, &[&str])> = vec![
        (
            build_error(|k| {
                let _ = block(k, I32).asin();
            }),
            &["asin", "takes f16, bf16 or f32", "i32"],
        ),
        (
            build_error(|k| {
                let _ = block(k, F64).atan();
            }),
            &["atan", "f64"],
        ),
        (
            build_error(|k| {
                let _ = k.atan2(block(k, F32), block(k, I32));
            }),
            &["atan2", "i32"],
        ),
        (
            build_error(|k| {
                let _ = k.atan2(block(k, F32), k.zeros(&[8], F32));
            }),
            &["atan2", "cannot be broadcast"],
        ),
    ];
    for (message, parts) in cases {
        for part in parts {
            assert!(message.contains(part), "{message:?} does not say {part:?}");
        }
    }
}

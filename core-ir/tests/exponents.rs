//! `ldexp`, `frexp`, `ilogb` and `logb` (built in `builder/exponents.rs`): bit for bit
//! C's (libm's) in the interpreter on floats of every magnitude, subnormals and special
//! values included, and exponents far past the range; the lowering in the simulator
//! against the interpreter; f16; and their mistakes as errors that name them.

mod f32_functions;

use f32_functions::{apply1, assert_lowering_matches, build_error};
use rutile_ir::interp::{self, ArgValue, HostBuffer};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType::{self, F16, F32, F64, I32, I64, I8, U64};
use rutile_ir::{Kernel, KernelBuilder, Value};

/// Floats of every magnitude (subnormals included), both signs, and the special values.
fn floats(rng: &mut Rng, n: usize) -> Vec<f32> {
    let mut v: Vec<f32> = rng
        .f32s(n, -149.0, 128.0)
        .iter()
        .zip(rng.f32s(n, -1.0, 1.0))
        .map(|(&e, s)| (2f32.powf(e) * (1.0 + s.abs())).copysign(s))
        .filter(|v| v.is_finite())
        .collect();
    v.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        f32::MAX,
    ]);
    v.extend([
        f32::from_bits(1),
        f32::from_bits(0x007F_FFFF),
        -f32::from_bits(0x0000_0400),
    ]);
    v
}

/// Runs `f(k, x, n)` element by element over f32 `x` and `n` (of type `nt`, from i64), in
/// the interpreter, the result of type `out`.
fn run2(
    f: impl for<'b> Fn(&'b KernelBuilder, Value<'b>, Value<'b>) -> Value<'b>,
    x: &[f32],
    n: &[i64],
    nt: ScalarType,
    out: ScalarType,
) -> HostBuffer {
    let kernel = Kernel::build("exponents", |k| {
        let (px, pn, po) = (k.arg_ptr("x", F32), k.arg_ptr("n", nt), k.arg_ptr("out", out));
        let len = k.arg_i32("len");
        let offs = k.program_id(0) * 256 + k.arange(0, 256);
        let mask = offs.lt(len);
        let (xv, nv) = (k.load_masked(px + offs, mask, 0.0), k.load_masked(pn + offs, mask, 0));
        k.store_masked(po + offs, f(k, xv, nv), mask);
    })
    .unwrap();
    let ns = match nt {
        I8 => HostBuffer::from_slice(&n.iter().map(|&v| v as i8).collect::<Vec<_>>()),
        I64 => HostBuffer::from_slice(n),
        U64 => HostBuffer::from_slice(&n.iter().map(|&v| v as u64).collect::<Vec<_>>()),
        _ => HostBuffer::from_slice(&n.iter().map(|&v| v as i32).collect::<Vec<_>>()),
    };
    let ptr = |buffer| ArgValue::Ptr { buffer, offset: 0 };
    let mut bufs = vec![HostBuffer::from_slice(x), ns, HostBuffer::zeros(out, x.len())];
    let args = [ptr(0), ptr(1), ptr(2), ArgValue::Int(x.len() as i64)];
    interp::run(&kernel, [(x.len() as u32).div_ceil(256), 1, 1], &args, &mut bufs).unwrap();
    bufs.pop().unwrap()
}

fn same_bits(got: f32, want: f32) -> bool {
    got.to_bits() == want.to_bits() || got.is_nan() && want.is_nan()
}

#[test]
fn ldexp_is_c_s_bit_for_bit() {
    let mut rng = Rng::new(131);
    let base = floats(&mut rng, 20_000);
    // Exponents across the whole range (every result from 0 through subnormals to ∞), and
    // far past it.
    let mut x = Vec::new();
    let mut n: Vec<i64> = Vec::new();
    for (i, &v) in base.iter().enumerate() {
        let e = rng.f32s(1, -330.0, 330.0)[0] as i64;
        let far = [i32::MIN as i64, i32::MAX as i64, -401, 401, 0][i % 5];
        x.extend([v, v]);
        n.extend([e, far]);
    }
    let got = run2(|_, x, n| x.ldexp(n), &x, &n, I32, F32).to_vec::<f32>().unwrap();
    for ((&x, &n), &g) in x.iter().zip(&n).zip(&got) {
        let want = libm::ldexpf(x, n as i32);
        assert!(same_bits(g, want), "ldexp({x:e}, {n}) = {g:e}, expected {want:e}");
    }
    // Exponents of other integer types: an i8's, an i64's and a u64's past i32's range.
    for (nt, n) in [
        (I8, vec![-128i64, 127, 5, -5]),
        (I64, vec![i64::MIN, i64::MAX, 1 << 40, -3]),
        (U64, vec![-1i64, 1 << 63, 300, 7]),
    ] {
        let x = vec![1.5f32; n.len()];
        let got = run2(|_, x, n| x.ldexp(n), &x, &n, nt, F32).to_vec::<f32>().unwrap();
        for (&n, &g) in n.iter().zip(&got) {
            let e = if nt == U64 {
                (n as u64).min(400) as i32
            } else {
                n.clamp(-400, 400) as i32
            };
            let e = if nt == I8 { n as i8 as i32 } else { e };
            assert!(same_bits(g, libm::ldexpf(1.5, e)), "ldexp(1.5, {n} as {nt}) = {g:e}");
        }
    }
}

#[test]
fn frexp_ilogb_and_logb_are_c_s() {
    let mut rng = Rng::new(132);
    let x = floats(&mut rng, 50_000);
    let zeros = vec![0i64; x.len()];
    let m = run2(|_, x, _| x.frexp().0, &x, &zeros, I32, F32)
        .to_vec::<f32>()
        .unwrap();
    let e = run2(|_, x, _| x.frexp().1, &x, &zeros, I32, I32)
        .to_vec::<i32>()
        .unwrap();
    let il = run2(|_, x, _| x.ilogb(), &x, &zeros, I32, I32).to_vec::<i32>().unwrap();
    let lb = apply1(|v| v.logb(), &x);
    for (i, &v) in x.iter().enumerate() {
        let (wm, we) = libm::frexpf(v);
        assert!(
            same_bits(m[i], wm) && e[i] == we,
            "frexp({v:e}) = ({}, {}), expected ({wm}, {we})",
            m[i],
            e[i]
        );
        assert_eq!(il[i], libm::ilogbf(v), "ilogb({v:e})");
        let want = match v {
            _ if v.is_nan() => f32::NAN,
            0.0 => f32::NEG_INFINITY,
            _ if v.is_infinite() => f32::INFINITY,
            _ => libm::ilogbf(v) as f32,
        };
        assert!(same_bits(lb[i], want), "logb({v:e}) = {}, expected {want}", lb[i]);
    }
}

#[test]
fn lowered_functions_match_the_interpreter() {
    let mut rng = Rng::new(133);
    let x = floats(&mut rng, 2000);
    let y: Vec<f32> = rng.f32s(x.len(), -3.0, 3.0);
    assert_lowering_matches("ldexp", |_, x, y| x.ldexp((y * 100.0f32).to(I32)), &x, &y);
    assert_lowering_matches("frexp", |_, x, _| x.frexp().0 + x.frexp().1.to(F32), &x, &y);
    assert_lowering_matches("ilogb and logb", |_, x, _| x.ilogb().to(F32) + x.logb(), &x, &y);
}

#[test]
fn half_precision_and_mistakes() {
    // f16: the product by 2^n rounds once, to f16 (2^-25 · 1.5 is half the smallest
    // subnormal and a half more: it rounds up to it).
    let x = vec![1.5f32, 1.5, 3.0, 1.0];
    let n = vec![-25i64, 16, -3, 20];
    let got = run2(|_, x, n| x.to(F16).ldexp(n).to(F32), &x, &n, I32, F32)
        .to_vec::<f32>()
        .unwrap();
    let want: Vec<f32> = x
        .iter()
        .zip(&n)
        .map(|(&x, &n)| half::f16::from_f32(libm::ldexpf(x, n as i32)).to_f32())
        .collect();
    assert_eq!(got, want);
    let e = build_error(|k| {
        let _ = k.zeros(&[16], F32).ldexp(k.zeros(&[16], F32));
    });
    assert!(e.contains("ldexp") && e.contains("integer"), "{e}");
    let e = build_error(|k| {
        let _ = k.zeros(&[16], F32).ldexp(k.zeros(&[8], I32));
    });
    assert!(e.contains("ldexp") && e.contains("broadcast"), "{e}");
    for (name, f) in [
        ("frexp", (|x| x.frexp().0) as for<'b> fn(Value<'b>) -> Value<'b>),
        ("ilogb", |x| x.ilogb()),
        ("logb", |x| x.logb()),
    ] {
        // f64 has its own format (`f64_values_are_libm_s`).
        let e = build_error(|k| {
            let _ = f(k.zeros(&[16], I32));
        });
        assert!(e.contains(name) && e.contains("i32"), "{e}");
    }
}

/// f64 values of every exponent (subnormals included), both signs, and the special values.
fn doubles(rng: &mut Rng) -> Vec<f64> {
    let mut v: Vec<f64> = (0..20_000)
        .map(|_| f64::from_bits(rng.next_u64()))
        .filter(|v| !v.is_nan())
        .collect();
    v.extend([
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::MIN_POSITIVE,
        f64::MAX,
    ]);
    v.extend([
        f64::from_bits(1),
        f64::from_bits(0x000F_FFFF_FFFF_FFFF),
        -f64::from_bits(0x400),
    ]);
    v
}

/// `f(x, n)` element-wise over f64 `x` and i32 `n` in the interpreter.
fn run_f64(x: &[f64], n: &[i32], f: for<'b> fn(Value<'b>, Value<'b>) -> Value<'b>, out: ScalarType) -> HostBuffer {
    let kernel = Kernel::build("f64_exponents", |k| {
        let (px, pn, po) = (k.arg_ptr("x", F64), k.arg_ptr("n", I32), k.arg_ptr("out", out));
        let len = k.arg_i32("len");
        let offs = k.program_id(0) * 256 + k.arange(0, 256);
        let mask = offs.lt(len);
        let (x, n) = (k.load_masked(px + offs, mask, 1.0), k.load_masked(pn + offs, mask, 0));
        k.store_masked(po + offs, f(x, n), mask);
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let ptr = |buffer| ArgValue::Ptr { buffer, offset: 0 };
    let args = [ptr(0), ptr(1), ptr(2), ArgValue::Int(x.len() as i64)];
    let mut bufs = vec![
        HostBuffer::from_slice(x),
        HostBuffer::from_slice(n),
        HostBuffer::zeros(out, x.len()),
    ];
    interp::run(&kernel, [(x.len() as u32).div_ceil(256), 1, 1], &args, &mut bufs).unwrap();
    bufs.remove(2)
}

/// f64's `ldexp`, `frexp` and `ilogb` are libm's, bit for bit, over every exponent and
/// shifts far past the range, and `logb` is `ilogb` as a float (C's special values).
#[test]
fn f64_values_are_libm_s() {
    let mut rng = Rng::new(161);
    let x = doubles(&mut rng);
    let n: Vec<i32> = (0..x.len()).map(|_| rng.below(6000) as i32 - 3000).collect();
    let same = |a: f64, b: f64| a.to_bits() == b.to_bits() || a.is_nan() && b.is_nan();
    let got = run_f64(&x, &n, |x, n| x.ldexp(n), F64).to_vec::<f64>().unwrap();
    for i in 0..x.len() {
        let want = libm::ldexp(x[i], n[i]);
        assert!(
            same(got[i], want),
            "ldexp({:e}, {}) = {:e}, expected {want:e}",
            x[i],
            n[i],
            got[i]
        );
    }
    let m = run_f64(&x, &n, |x, _| x.frexp().0, F64).to_vec::<f64>().unwrap();
    let e = run_f64(&x, &n, |x, _| x.frexp().1, I32).to_vec::<i32>().unwrap();
    let ilogb = run_f64(&x, &n, |x, _| x.ilogb(), I32).to_vec::<i32>().unwrap();
    let logb = run_f64(&x, &n, |x, _| x.logb(), F64).to_vec::<f64>().unwrap();
    for i in 0..x.len() {
        let (wm, we) = libm::frexp(x[i]);
        let we = if x[i].is_finite() { we } else { 0 };
        assert!(
            same(m[i], wm) && e[i] == we,
            "frexp({:e}) = ({:e}, {}), expected ({wm:e}, {we})",
            x[i],
            m[i],
            e[i]
        );
        let wi = match x[i] {
            v if v.is_nan() || v == 0.0 => i32::MIN,
            v if v.is_infinite() => i32::MAX,
            v => libm::ilogb(v),
        };
        assert_eq!(ilogb[i], wi, "ilogb({:e})", x[i]);
        let wl = if x[i].is_nan() {
            f64::NAN
        } else if x[i] == 0.0 {
            f64::NEG_INFINITY
        } else if x[i].is_infinite() {
            f64::INFINITY
        } else {
            libm::ilogb(x[i]) as f64
        };
        assert!(same(logb[i], wl), "logb({:e}) = {:e}, expected {wl:e}", x[i], logb[i]);
    }
}

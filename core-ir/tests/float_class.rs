//! `isnan`, `isinf`, `isfinite`, `signbit`, `copysign`, `nextafter`, `fdim`, `remainder`,
//! `fmax`, `fmin`, `modf`
//! (`builder/float_class.rs`), `round`,
//! and the rounding ops `trunc` and `rint`, on every float type: against Rust's own
//! functions in the interpreter on random and special values (signed zeros, infinities,
//! NaNs of both signs, subnormals, halfway cases), the lowering in the simulator against
//! the interpreter, and the mistakes as errors that name them.

mod f32_functions;

use f32_functions::build_error;
use half::{bf16, f16};
use rutile_ir::interp::{self, simt, ArgValue, HostBuffer};
use rutile_ir::lower::lower;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType::{self, BF16, F16, F32, F64, I32};
use rutile_ir::{Kernel, KernelBuilder, Value};

const BLOCK: i32 = 128;
const FLOATS: [ScalarType; 4] = [F16, BF16, F32, F64];

type Binary = for<'b> fn(&'b KernelBuilder, Value<'b>, Value<'b>) -> Value<'b>;
type Reference = fn(f64, f64) -> f64;

/// Each function, as a kernel of `(x, y)` whose result has `x`'s type (tests as 0 or 1),
/// and its reference.
fn functions() -> Vec<(&'static str, Binary, Reference)> {
    vec![
        (
            "isnan",
            |_, x, _| x.isnan().to(x.dtype().unwrap()),
            |x, _| (x.is_nan() as u8).into(),
        ),
        (
            "isinf",
            |_, x, _| x.isinf().to(x.dtype().unwrap()),
            |x, _| (x.is_infinite() as u8).into(),
        ),
        (
            "isfinite",
            |_, x, _| x.isfinite().to(x.dtype().unwrap()),
            |x, _| (x.is_finite() as u8).into(),
        ),
        (
            "signbit",
            |_, x, _| x.signbit().to(x.dtype().unwrap()),
            |x, _| (x.is_sign_negative() as u8).into(),
        ),
        ("copysign", |_, x, y| x.copysign(y), f64::copysign),
        ("round", |_, x, _| x.round(), |x, _| x.round()),
        ("trunc", |_, x, _| x.trunc(), |x, _| x.trunc()),
        ("rint", |_, x, _| x.rint(), |x, _| x.round_ties_even()),
        (
            "fdim",
            |_, x, y| x.fdim(y),
            |x, y| match (x.is_nan() || y.is_nan(), x > y) {
                (true, _) => f64::NAN,
                (false, true) => x - y,
                (false, false) => 0.0,
            },
        ),
        ("nextafter", |_, x, y| x.nextafter(y), |_, _| f64::NAN),
        // Exact, so representable in every type: libm's f64 remainder is every type's.
        ("remainder", |_, x, y| x.remainder(y), libm::remainder),
        ("fmax", |_, x, y| x.fmax(y), |x, y| c_fmax(x, y, true)),
        ("fmin", |_, x, y| x.fmin(y), |x, y| c_fmax(x, y, false)),
        ("modf (fraction)", |_, x, _| x.modf().0, |x, _| modf(x).0),
        ("modf (integral)", |_, x, _| x.modf().1, |x, _| modf(x).1),
    ]
}

/// C's `fmax` (`larger`) or `fmin`: the other where one is NaN, `+0` above `-0`.
fn c_fmax(a: f64, b: f64, larger: bool) -> f64 {
    match (a.is_nan(), b.is_nan()) {
        (true, _) => b,
        (_, true) => a,
        _ if a == b => {
            // Equal: zeros of either sign, the sign the order prefers.
            if a.is_sign_negative() == larger {
                b
            } else {
                a
            }
        }
        _ if (a > b) == larger => a,
        _ => b,
    }
}

/// C's `modf`: the fraction and the integral part, both with `x`'s sign.
fn modf(x: f64) -> (f64, f64) {
    if x.is_infinite() {
        return (0.0f64.copysign(x), x);
    }
    ((x - x.trunc()).copysign(x), x.trunc())
}

/// C's `nextafter(a, b)` in type `t` (the values as f64): libm's for f32 and f64, and for
/// f16 and bf16 one step of their 16 bits read as a sign and a magnitude.
fn next_after(t: ScalarType, a: f64, b: f64) -> f64 {
    match t {
        F32 => libm::nextafterf(a as f32, b as f32) as f64,
        F64 => libm::nextafter(a, b),
        _ if a.is_nan() || b.is_nan() => f64::NAN,
        _ if a == b => b,
        _ => {
            let (bits, from): (u16, fn(u16) -> f64) = match t {
                F16 => (f16::from_f64(a).to_bits(), |b| f16::from_bits(b).to_f64()),
                _ => (bf16::from_f64(a).to_bits(), |b| bf16::from_bits(b).to_f64()),
            };
            if a == 0.0 {
                return from(1).copysign(b);
            }
            let away = (b > a) == (a > 0.0);
            from(if away { bits + 1 } else { bits - 1 })
        }
    }
}

/// Values of type `t` (as f64): the special ones and random ones of every magnitude.
fn values(t: ScalarType, rng: &mut Rng) -> Vec<f64> {
    let smallest_subnormal = match t {
        F16 => 2f64.powi(-24),
        BF16 => 2f64.powi(-133),
        F32 => f32::from_bits(1) as f64,
        _ => f64::from_bits(1),
    };
    let mut v = vec![
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        2.5,
        -2.5,
        3.5,
        -0.3,
        -0.7,
        0.49999997,
        1e30,
        -1e30,
        smallest_subnormal,
        -smallest_subnormal,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
    ];
    v.extend((0..600).map(|i| {
        let m = 2f64.powf(rng.uniform(-20.0, 30.0));
        let x = if i % 3 == 0 { (m * 2.0).round() / 2.0 } else { m };
        if i % 2 == 0 {
            x
        } else {
            -x
        }
    }));
    v.into_iter().map(|x| quantize(t, x)).collect()
}

/// `x` rounded to `t`, NaN signs kept.
fn quantize(t: ScalarType, x: f64) -> f64 {
    let q = match t {
        F16 => f16::from_f64(x).to_f64(),
        BF16 => bf16::from_f64(x).to_f64(),
        F32 => x as f32 as f64,
        _ => x,
    };
    if x.is_nan() {
        f64::NAN.copysign(x)
    } else {
        q
    }
}

fn buffer(t: ScalarType, v: &[f64]) -> HostBuffer {
    match t {
        F16 => HostBuffer::from_slice(&v.iter().map(|&x| f16::from_f64(x)).collect::<Vec<_>>()),
        BF16 => HostBuffer::from_slice(&v.iter().map(|&x| bf16::from_f64(x)).collect::<Vec<_>>()),
        F32 => HostBuffer::from_slice(&v.iter().map(|&x| x as f32).collect::<Vec<_>>()),
        _ => HostBuffer::from_slice(v),
    }
}

fn read(t: ScalarType, b: &HostBuffer) -> Vec<f64> {
    match t {
        F16 => b.to_vec::<f16>().unwrap().iter().map(|x| x.to_f64()).collect(),
        BF16 => b.to_vec::<bf16>().unwrap().iter().map(|x| x.to_f64()).collect(),
        F32 => b.to_vec::<f32>().unwrap().iter().map(|&x| x as f64).collect(),
        _ => b.to_vec::<f64>().unwrap(),
    }
}

fn kernel(t: ScalarType, f: Binary) -> Kernel {
    f32_functions::kernel_of(t, BLOCK, &f)
}

fn launch(t: ScalarType, x: &[f64], y: &[f64]) -> (Vec<ArgValue>, Vec<HostBuffer>, [u32; 3]) {
    let ptr = |buffer| ArgValue::Ptr { buffer, offset: 0 };
    let args = vec![ptr(0), ptr(1), ptr(2), ArgValue::Int(x.len() as i64)];
    let bufs = vec![buffer(t, x), buffer(t, y), HostBuffer::zeros(t, x.len())];
    (args, bufs, [(x.len() as u32).div_ceil(BLOCK as u32), 1, 1])
}

#[test]
fn they_are_rust_s_functions_on_every_float_type() {
    let mut rng = Rng::new(93);
    for t in FLOATS {
        let x = values(t, &mut rng);
        let mut y = x.clone();
        y.rotate_left(7);
        for (name, f, reference) in functions() {
            // nextafter's result depends on the type (below).
            let reference = |a: f64, b: f64| match name {
                "nextafter" => next_after(t, a, b),
                _ => reference(a, b),
            };
            let (args, mut bufs, grid) = launch(t, &x, &y);
            interp::run(&kernel(t, f), grid, &args, &mut bufs).unwrap_or_else(|e| panic!("{name} on {t}: {e}"));
            for ((got, &a), &b) in read(t, &bufs[2]).iter().zip(&x).zip(&y) {
                let want = quantize(t, reference(a, b));
                let ok = if want.is_nan() {
                    got.is_nan() && (name != "copysign" || got.is_sign_negative() == want.is_sign_negative())
                } else {
                    got.to_bits() == want.to_bits()
                };
                assert!(ok, "{name}({a:e}, {b:e}) on {t}: {got:e}, expected {want:e}");
            }
        }
    }
}

#[test]
fn remainder_takes_the_nearest_quotient_halfway_cases_to_even() {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    // (x, y, remainder): x / y = 2.5 and 3.5 go to 2 and 4, 0.5 to 0, 1.5 to 2.
    let cases = [
        (5.0, 2.0, 1.0),
        (7.0, 2.0, -1.0),
        (-5.0, 2.0, -1.0),
        (5.0, -2.0, 1.0),
        (1.0, 2.0, 1.0),
        (3.0, 2.0, -1.0),
        (-0.0, 1.0, -0.0),
        (4.0, 2.0, 0.0),
        (-4.0, 2.0, -0.0),
        (1e30, 3.0, libm::remainderf(1e30, 3.0)),
        (3.0e38, 1e-45, 0.0),
        (2.5, inf, 2.5),
        (inf, 1.0, nan),
        (1.0, 0.0, nan),
        (nan, 1.0, nan),
    ];
    let x: Vec<f32> = cases.iter().map(|c| c.0).collect();
    let y: Vec<f32> = cases.iter().map(|c| c.1).collect();
    let got = f32_functions::apply(|_, y, x| x.remainder(y), &y, &x);
    for (c, got) in cases.iter().zip(got) {
        assert!(
            f32_functions::same(got, c.2),
            "remainder({}, {}) = {got}, expected {}",
            c.0,
            c.1,
            c.2
        );
    }
}

#[test]
fn the_lowering_computes_the_interpreter_s_bits() {
    let mut rng = Rng::new(94);
    for t in FLOATS {
        let x = values(t, &mut rng);
        let mut y = x.clone();
        y.rotate_left(3);
        for (name, f, _) in functions() {
            let k = kernel(t, f);
            let (args, bufs, grid) = launch(t, &x, &y);
            let mut want = bufs.clone();
            interp::run(&k, grid, &args, &mut want).unwrap();
            for target in [Target::vulkan(32, 4, 48 * 1024), Target::nvidia(4, 48 * 1024)] {
                let lowered = lower(&k, &target, &Specialization::none(args.len())).unwrap();
                let mut got = bufs.clone();
                simt::run_threads(&lowered, grid, &args, &mut got).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(got[2].as_bytes(), want[2].as_bytes(), "{name} on {t}");
            }
        }
    }
}

#[test]
fn mistakes_are_errors_that_name_the_function() {
    type Make = for<'b> fn(&'b KernelBuilder) -> Value<'b>;
    let cases: [(&str, Make, &str); 13] = [
        ("fmax", |k| k.zeros(&[16], I32).fmax(k.zeros(&[16], I32)), "i32"),
        ("modf", |k| k.zeros(&[16], I32).modf().0, "i32"),
        (
            "remainder",
            |k| k.zeros(&[16], F16).remainder(k.zeros(&[16], F32)),
            "f16",
        ),
        (
            "nextafter",
            |k| k.zeros(&[16], F32).nextafter(k.zeros(&[16], F64)),
            "f64",
        ),
        ("fdim", |k| k.zeros(&[16], I32).fdim(k.zeros(&[16], I32)), "i32"),
        ("isnan", |k| k.zeros(&[16], I32).isnan(), "i32"),
        ("isinf", |k| k.zeros(&[16], I32).isinf(), "i32"),
        ("isfinite", |k| k.zeros(&[16], I32).isfinite(), "i32"),
        ("signbit", |k| k.zeros(&[16], I32).signbit(), "i32"),
        ("round", |k| k.zeros(&[16], I32).round(), "i32"),
        ("copysign", |k| k.zeros(&[16], F32).copysign(k.zeros(&[16], F16)), "f16"),
        ("trunc", |k| k.zeros(&[16], I32).trunc(), "i32"),
        ("rint", |k| k.zeros(&[16], I32).rint(), "i32"),
    ];
    for (name, make, part) in cases {
        let message = build_error(|k| {
            let _ = make(k);
        });
        for want in [name, part] {
            assert!(message.contains(want), "{message:?} does not say {want:?}");
        }
    }
}

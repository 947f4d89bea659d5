//! `expm1`, `log1p`, `exp10`, `log10`, `sinh`, `cosh`, `asinh`, `acosh` and `atanh` (built
//! from ops in `builder/exp_log.rs`): their error against f64 over their domains in the
//! interpreter, their special values (C's Annex F), the lowering in the simulator against
//! the interpreter, f16 through f32, and their mistakes as errors that name them.

mod f32_functions;

use f32_functions::{apply1, assert_lowering_matches, build_error, points, same, worst1};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType::{F16, F32, I32};
use rutile_ir::Value;

type Unary = for<'b> fn(Value<'b>) -> Value<'b>;
/// A function's name, its kernel, its f64 reference, its points' range and its bound.
type Function = (&'static str, Unary, fn(f64) -> f64, f32, f32, f64);

/// Each function, its f64 reference, the range of its random points and its bound in ulps
/// (measured at most: expm1 1.34, log1p 0.99, exp10 1.15, log10 1.76, sinh 1.97, cosh 1.39,
/// asinh 1.60, acosh 2.15, atanh 1.59, over about 200000 points each).
fn functions() -> Vec<Function> {
    vec![
        ("expm1", |x| x.expm1(), f64::exp_m1, -20.0, 89.0, 2.0),
        ("log1p", |x| x.log1p(), f64::ln_1p, -1.0, 1e6, 1.5),
        ("exp10", |x| x.exp10(), |x| 10f64.powf(x), -45.0, 38.5, 2.0),
        ("log10", |x| x.log10(), f64::log10, 0.0, 1e30, 2.0),
        ("sinh", |x| x.sinh(), f64::sinh, -89.0, 89.0, 2.5),
        ("cosh", |x| x.cosh(), f64::cosh, -89.0, 89.0, 2.0),
        ("asinh", |x| x.asinh(), f64::asinh, -1e5, 1e5, 2.0),
        ("acosh", |x| x.acosh(), f64::acosh, 1.0, 1e5, 2.5),
        ("atanh", |x| x.atanh(), f64::atanh, -1.0, 1.0, 2.0),
    ]
}

/// Points for `lo..hi`: uniform ones, and magnitudes spread over powers of two (of the
/// signs the domain has), near its ends too.
fn domain_points(rng: &mut Rng, lo: f32, hi: f32) -> Vec<f32> {
    let mut v: Vec<f32> = points(rng, 150_000, lo, hi)
        .into_iter()
        .map(|x| if lo >= 0.0 { x.abs() } else { x })
        .filter(|x| (lo..=hi).contains(x))
        .collect();
    // Near the low end (1 + 2^-k for acosh, -1 + 2^-k for log1p and atanh).
    v.extend((0..20_000).map(|i| lo + 2f32.powf(-(i % 24) as f32 - rng.f32s(1, 0.0, 1.0)[0])));
    v.retain(|x| (lo..=hi).contains(x));
    v
}

#[test]
fn the_functions_are_within_their_bounds_of_f64() {
    let mut rng = Rng::new(91);
    for (name, f, exact, lo, hi, bound) in functions() {
        let x = domain_points(&mut rng, lo, hi);
        let (e, at) = worst1(f, exact, &x);
        println!("{name}: at most {e:.2} ulp over {} points (at {at})", x.len());
        assert!(e <= bound, "{name}: {e:.2} ulp at {at}");
    }
}

#[test]
fn near_zero_they_keep_every_digit() {
    // Where exp(x) - 1 and log(1 + x) lose everything: the functions exist for these.
    let x: Vec<f32> = (1..=200)
        .map(|i| (i as f32 * 1e-3).powi(3) * if i % 2 == 0 { 1.0 } else { -1.0 })
        .collect();
    for (name, f, exact, ..) in functions() {
        if name == "acosh" || name == "log10" || name == "cosh" || name == "exp10" {
            continue;
        }
        let (e, at) = worst1(f, exact, &x);
        assert!(e <= 2.0, "{name} near zero: {e:.2} ulp at {at}");
    }
}

#[test]
fn special_values_are_c_s() {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let tiny = f32::from_bits(1); // the smallest subnormal
    let cases: [(&str, Unary, f32, f32); 36] = [
        ("expm1", |x| x.expm1(), 0.0, 0.0),
        ("expm1", |x| x.expm1(), -0.0, -0.0),
        ("expm1", |x| x.expm1(), inf, inf),
        ("expm1", |x| x.expm1(), -inf, -1.0),
        ("expm1", |x| x.expm1(), 100.0, inf),
        ("expm1", |x| x.expm1(), nan, nan),
        ("expm1", |x| x.expm1(), tiny, tiny),
        ("log1p", |x| x.log1p(), 0.0, 0.0),
        ("log1p", |x| x.log1p(), -0.0, -0.0),
        ("log1p", |x| x.log1p(), -1.0, -inf),
        ("log1p", |x| x.log1p(), -2.0, nan),
        ("log1p", |x| x.log1p(), inf, inf),
        ("log1p", |x| x.log1p(), nan, nan),
        ("log1p", |x| x.log1p(), -tiny, -tiny),
        ("exp10", |x| x.exp10(), 0.0, 1.0),
        ("exp10", |x| x.exp10(), 2.0, 100.0),
        ("exp10", |x| x.exp10(), -inf, 0.0),
        ("exp10", |x| x.exp10(), inf, inf),
        ("log10", |x| x.log10(), 1.0, 0.0),
        ("log10", |x| x.log10(), 0.0, -inf),
        ("log10", |x| x.log10(), -0.0, -inf),
        ("log10", |x| x.log10(), -1.0, nan),
        ("log10", |x| x.log10(), inf, inf),
        ("log10", |x| x.log10(), 100.0, 2.0),
        ("sinh", |x| x.sinh(), -0.0, -0.0),
        ("sinh", |x| x.sinh(), -inf, -inf),
        ("sinh", |x| x.sinh(), nan, nan),
        ("cosh", |x| x.cosh(), -0.0, 1.0),
        ("cosh", |x| x.cosh(), -inf, inf),
        ("asinh", |x| x.asinh(), -0.0, -0.0),
        ("asinh", |x| x.asinh(), -inf, -inf),
        ("acosh", |x| x.acosh(), 1.0, 0.0),
        ("acosh", |x| x.acosh(), 0.5, nan),
        ("acosh", |x| x.acosh(), inf, inf),
        ("atanh", |x| x.atanh(), -1.0, -inf),
        ("atanh", |x| x.atanh(), 1.5, nan),
    ];
    for (name, f, x, want) in cases {
        let got = apply1(f, &[x])[0];
        assert!(same(got, want), "{name}({x:e}) = {got:e}, expected {want:e}");
    }
    // Subnormal arguments of log10 are scaled into the normals first.
    let got = apply1(|x| x.log10(), &[tiny])[0];
    assert!(
        f32_functions::ulps(got, (tiny as f64).log10()) <= 1.0,
        "log10 of the smallest subnormal: {got}"
    );
}

#[test]
fn the_lowering_computes_the_interpreter_s_bits() {
    let mut rng = Rng::new(92);
    for (name, f, _, lo, hi, _) in functions() {
        let x = domain_points(&mut rng, lo, hi);
        let x = &x[..3000.min(x.len())];
        assert_lowering_matches(name, move |_, y, _| f(y), x, x);
    }
}

#[test]
fn f16_rounds_the_f32_result_once() {
    let x: Vec<f32> = (0..=300).map(|i| -0.99 + i as f32 / 50.0).collect();
    for (name, f, ..) in functions() {
        let via_f16 = apply1(move |v| f(v.to(F16)).to(F32), &x);
        let x16: Vec<f32> = x.iter().map(|&v| half::f16::from_f32(v).to_f32()).collect();
        let in_f32 = apply1(f, &x16);
        for ((got, want), v) in via_f16.iter().zip(&in_f32).zip(&x) {
            let want = half::f16::from_f32(*want).to_f32();
            assert!(same(*got, want), "{name}({v}) in f16: {got}, expected {want}");
        }
    }
}

#[test]
fn mistakes_are_errors_that_name_the_function() {
    for (name, f, ..) in functions() {
        // f64 is computed in f64 (`f64_exp_log.rs`, measured in `f64_math.rs`).
        let message = build_error(|k| {
            let _ = f(k.zeros(&[16], I32));
        });
        for want in [name, "takes f16, bf16, f32 (computed in f32) or f64", "i32"] {
            assert!(message.contains(want), "{message:?} does not say {want:?}");
        }
    }
}

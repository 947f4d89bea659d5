//! `hypot`, `cbrt`, `rhypot`, `norm3d`, `norm4d`, `rnorm3d`, `rnorm4d` and `rcbrt` (built from
//! ops in `builder/roots.rs`): their error against f64 over
//! every magnitude f32 has in the interpreter, their special values (C's Annex F), the
//! lowering in the simulator against the interpreter, f16 through f32, and their mistakes
//! as errors that name them.

mod f32_functions;

use f32_functions::{apply, apply1, assert_lowering_matches, build_error, same, ulps, worst, worst1};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType::{F16, F32, I32};
use rutile_ir::{KernelBuilder, Value};

/// Signed magnitudes spread over every power of two f32 has, subnormals included.
fn magnitudes(rng: &mut Rng, n: usize) -> Vec<f32> {
    let exponents = rng.f32s(n, -149.0, 127.99);
    let signs = rng.f32s(n, -1.0, 1.0);
    exponents
        .iter()
        .zip(&signs)
        .map(|(&e, &s)| 2f32.powf(e).copysign(s))
        .filter(|v| v.is_finite() && *v != 0.0)
        .collect()
}

#[test]
fn hypot_is_within_one_and_a_half_ulp_of_f64() {
    let mut rng = Rng::new(101);
    let a = magnitudes(&mut rng, 100_000);
    let b = magnitudes(&mut rng, 100_000);
    // Any magnitudes (often far apart), near ones (the sum of squares matters most), and
    // uniform ones.
    let mut pairs: Vec<(f32, f32)> = a.iter().copied().zip(b.iter().copied()).collect();
    let near = rng.f32s(a.len(), 0.5, 2.0);
    pairs.extend(a.iter().zip(&near).map(|(&x, &r)| (x, x * r)));
    let u = rng.f32s(100_000, -100.0, 100.0);
    pairs.extend(u.chunks(2).map(|p| (p[0], p[1])));
    let (e, x, y) = worst(|_, x, y| x.hypot(y), f64::hypot, &pairs);
    println!("hypot: at most {e:.2} ulp over {} pairs (at {x:e}, {y:e})", pairs.len());
    // Measured at most 1.11 (the square root's rounding on the sum's).
    assert!(e <= 1.5, "hypot: {e:.2} ulp at ({x:e}, {y:e})");
}

#[test]
fn cbrt_is_within_an_ulp_of_f64() {
    let mut rng = Rng::new(102);
    let mut x = magnitudes(&mut rng, 200_000);
    x.extend(rng.f32s(50_000, -1000.0, 1000.0));
    let (e, at) = worst1(|v| v.cbrt(), f64::cbrt, &x);
    println!("cbrt: at most {e:.2} ulp over {} points (at {at:e})", x.len());
    // Measured at most 0.75.
    assert!(e <= 1.0, "cbrt: {e:.2} ulp at {at:e}");
    // Perfect cubes come out exact.
    let cubes: Vec<f32> = (-40..=40).map(|i| (i * i * i) as f32).collect();
    for (&c, r) in cubes.iter().zip(apply1(|v| v.cbrt(), &cubes)) {
        assert_eq!(r, (c as f64).cbrt() as f32, "cbrt({c})");
    }
}

#[test]
fn norms_and_reciprocal_roots_are_within_two_and_a_half_ulp_of_f64() {
    let mut rng = Rng::new(104);
    let a = magnitudes(&mut rng, 100_000);
    let b = magnitudes(&mut rng, 100_000);
    let mut pairs: Vec<(f32, f32)> = a.iter().copied().zip(b.iter().copied()).collect();
    let near = rng.f32s(a.len(), 0.5, 2.0);
    pairs.extend(a.iter().zip(&near).map(|(&x, &r)| (x, x * r)));
    // The third and fourth components are halves and quarters of the first two, as the
    // kernel computes them in f32 (rounded where they leave the normals).
    let part = |v: f64, s: f32| ((v as f32) * s) as f64;
    let norm3 = move |x: f64, y: f64| (x * x + y * y + part(x, 0.5).powi(2)).sqrt();
    let norm4 = move |x: f64, y: f64| (x * x + y * y + part(x, 0.5).powi(2) + part(y, 0.25).powi(2)).sqrt();
    type Function = for<'b> fn(&'b KernelBuilder, Value<'b>, Value<'b>) -> Value<'b>;
    type Case = (&'static str, Function, Box<dyn Fn(f64, f64) -> f64>);
    let cases: Vec<Case> = vec![
        ("rhypot", |_, y, x| y.rhypot(x), Box::new(|y, x| 1.0 / y.hypot(x))),
        ("norm3d", |k, y, x| k.norm3d(y, x, y * 0.5f32), Box::new(norm3)),
        (
            "norm4d",
            |k, y, x| k.norm4d(y, x, y * 0.5f32, x * 0.25f32),
            Box::new(norm4),
        ),
        (
            "rnorm3d",
            |k, y, x| k.rnorm3d(y, x, y * 0.5f32),
            Box::new(move |y, x| 1.0 / norm3(y, x)),
        ),
        (
            "rnorm4d",
            |k, y, x| k.rnorm4d(y, x, y * 0.5f32, x * 0.25f32),
            Box::new(move |y, x| 1.0 / norm4(y, x)),
        ),
    ];
    for (name, f, exact) in cases {
        let (e, y, x) = worst(f, &exact, &pairs);
        println!(
            "{name}: at most {e:.2} ulp over {} pairs (at {y:e}, {x:e})",
            pairs.len()
        );
        assert!(e <= 2.5, "{name}: {e:.2} ulp at ({y:e}, {x:e})");
    }
    let mut x = magnitudes(&mut rng, 200_000);
    x.extend(rng.f32s(50_000, -1000.0, 1000.0));
    let (e, at) = worst1(|v| v.rcbrt(), |v| 1.0 / v.cbrt(), &x);
    println!("rcbrt: at most {e:.2} ulp over {} points (at {at:e})", x.len());
    assert!(e <= 2.5, "rcbrt: {e:.2} ulp at {at:e}");
}

#[test]
fn special_values_are_c_s() {
    let (inf, nan, max) = (f32::INFINITY, f32::NAN, f32::MAX);
    let tiny = f32::from_bits(1);
    let hypot_cases = [
        (3.0, 4.0, 5.0),
        (-3.0, 4.0, 5.0),
        (0.0, 0.0, 0.0),
        (-0.0, -0.0, 0.0),
        (0.0, -7.5, 7.5),
        (inf, nan, inf),
        (nan, -inf, inf),
        (nan, 1.0, nan),
        (max, max, inf),
        (max, 1.0, max),
        (tiny, tiny, f32::from_bits(1)),
        (3e-39, 4e-39, 5e-39),
        (3e38, 4e37, (3e38f64).hypot(4e37) as f32),
    ];
    for (x, y, want) in hypot_cases {
        let got = apply(|_, a, b| a.hypot(b), &[x], &[y])[0];
        let close = same(got, want) || ulps(got, (x as f64).hypot(y as f64)) <= 1.5 && want.is_finite();
        assert!(close, "hypot({x:e}, {y:e}) = {got:e}, expected {want:e}");
    }
    let cbrt_cases = [
        (0.0, 0.0),
        (-0.0, -0.0),
        (inf, inf),
        (-inf, -inf),
        (nan, nan),
        (8.0, 2.0),
        (-27.0, -3.0),
        (1.0, 1.0),
    ];
    for (x, want) in cbrt_cases {
        let got = apply1(|v| v.cbrt(), &[x])[0];
        assert!(same(got, want), "cbrt({x:e}) = {got:e}, expected {want:e}");
    }
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let reciprocal_cases = [(0.0, 0.0, inf), (inf, nan, 0.0), (nan, 1.0, nan), (3.0, 4.0, 0.2)];
    for (x, y, want) in reciprocal_cases {
        let got = apply(|_, a, b| a.rhypot(b), &[x], &[y])[0];
        assert!(same(got, want), "rhypot({x:e}, {y:e}) = {got:e}, expected {want:e}");
        let got = apply(|k, a, b| k.rnorm3d(a, b, a * 0.0f32), &[x], &[y])[0];
        let want3 = if x.is_infinite() { 0.0 } else { want };
        assert!(
            same(got, want3),
            "rnorm3d({x:e}, {y:e}, 0) = {got:e}, expected {want3:e}"
        );
    }
    let got = apply(|k, a, b| k.norm4d(a, b, a, -b), &[-inf], &[nan])[0];
    assert!(same(got, inf), "norm4d(-inf, nan, ...) = {got:e}");
    let got = apply(|k, a, b| k.norm3d(a, b, b), &[2.0], &[-4.0])[0];
    assert!(same(got, 6.0), "norm3d(2, -4, -4) = {got:e}");
    for (x, want) in [
        (0.0, inf),
        (-0.0, -inf),
        (inf, 0.0),
        (-inf, -0.0),
        (8.0, 0.5),
        (nan, nan),
    ] {
        let got = apply1(|v| v.rcbrt(), &[x])[0];
        assert!(same(got, want), "rcbrt({x:e}) = {got:e}, expected {want:e}");
    }
    // The smallest subnormal's root, from its scaled form.
    let got = apply1(|v| v.cbrt(), &[tiny])[0];
    assert!(
        ulps(got, (tiny as f64).cbrt()) <= 1.0,
        "cbrt of the smallest subnormal: {got:e}"
    );
}

#[test]
fn the_lowering_computes_the_interpreter_s_bits() {
    let mut rng = Rng::new(103);
    let (a, b) = (magnitudes(&mut rng, 4000), magnitudes(&mut rng, 4000));
    let n = a.len().min(b.len());
    assert_lowering_matches("hypot", |_, y, x| y.hypot(x), &a[..n], &b[..n]);
    assert_lowering_matches("cbrt", |_, y, _| y.cbrt(), &a[..n], &b[..n]);
    assert_lowering_matches("rhypot", |_, y, x| y.rhypot(x), &a[..n], &b[..n]);
    assert_lowering_matches("norm4d", |k, y, x| k.norm4d(y, x, y * 0.5f32, x), &a[..n], &b[..n]);
    assert_lowering_matches("rnorm3d", |k, y, x| k.rnorm3d(y, x, x), &a[..n], &b[..n]);
    assert_lowering_matches("rcbrt", |_, y, _| y.rcbrt(), &a[..n], &b[..n]);
}

#[test]
fn f16_rounds_the_f32_result_once() {
    let x: Vec<f32> = (0..=400).map(|i| -200.0 + i as f32 * 0.97).collect();
    let y: Vec<f32> = x.iter().map(|v| v * 0.37 - 5.0).collect();
    let round = |v: f32| half::f16::from_f32(v).to_f32();
    let (x16, y16): (Vec<f32>, Vec<f32>) = (
        x.iter().map(|&v| round(v)).collect(),
        y.iter().map(|&v| round(v)).collect(),
    );
    let hypot16 = apply(|_, a, b| a.to(F16).hypot(b.to(F16)).to(F32), &x, &y);
    let hypot32 = apply(|_, a, b| a.hypot(b), &x16, &y16);
    let cbrt16 = apply1(|v| v.to(F16).cbrt().to(F32), &x);
    let cbrt32 = apply1(|v| v.cbrt(), &x16);
    for i in 0..x.len() {
        assert!(same(hypot16[i], round(hypot32[i])), "hypot({}, {}) in f16", x[i], y[i]);
        assert!(same(cbrt16[i], round(cbrt32[i])), "cbrt({}) in f16", x[i]);
    }
}

#[test]
fn mistakes_are_errors_that_name_the_function() {
    // f64 is computed in f64 (`f64_roots.rs`, measured in `f64_math.rs`).
    let message = build_error(|k| {
        let _ = k.zeros(&[16], I32).cbrt();
    });
    for want in ["cbrt", "takes f16, bf16, f32 (computed in f32) or f64", "i32"] {
        assert!(message.contains(want), "{message:?} does not say {want:?}");
    }
    let message = build_error(|k| {
        let _ = k.zeros(&[16], F32).hypot(k.zeros(&[16], I32));
    });
    for want in ["hypot", "takes f16, bf16 or f32", "i32"] {
        assert!(message.contains(want), "{message:?} does not say {want:?}");
    }
    let message = build_error(|k| {
        let _ = k.zeros(&[16], F32).hypot(k.zeros(&[8], F32));
    });
    assert!(
        message.contains("hypot") && message.contains("cannot be broadcast"),
        "{message}"
    );
}

//! `lgamma` and `tgamma` (built from ops in `builder/gamma.rs`): their error against f64
//! in the interpreter over their whole ranges (next to `lgamma`'s roots, to where `tgamma`
//! overflows and underflows, between the poles), their special values, the lowering in
//! the simulator against the interpreter, f16 through f32, and their mistakes as errors
//! that name them. Their f64 forms are measured in `f64_math.rs`.

mod f32_functions;

use f32_functions::{
    apply1, assert_errors, assert_f16_rounds_once, assert_lowering_matches, points, same, ulps, worst1, Unary,
};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType;

/// Points of `[lo, hi)` and their neighbours in f32, dense around `centres`.
fn around(rng: &mut Rng, centres: &[f32], n: usize) -> Vec<f32> {
    let mut v = Vec::new();
    for &c in centres {
        v.extend(rng.f32s(n, c - 0.01, c + 0.01));
        let mut up = c;
        let mut down = c;
        for _ in 0..200 {
            up = f32::from_bits(up.to_bits() + 1);
            down = f32::from_bits(down.to_bits() - 1);
            v.extend([up, down]);
        }
    }
    v
}

#[test]
fn lgamma_is_within_three_ulp_of_f64_above_zero_and_five_above_minus_two_and_a_quarter() {
    let mut rng = Rng::new(161);
    let positive = |v: Vec<f32>| -> Vec<f32> { v.into_iter().map(f32::abs).collect() };
    let small = positive(points(&mut rng, 200_000, 0.0, 8.0));
    let roots = around(&mut rng, &[1.0, 2.0], 20_000);
    let large = positive(points(&mut rng, 100_000, 8.0, 1e30));
    let huge = [1e36f32, 3e38, 4.1e36, 4.0e36];
    let negative = rng.f32s(200_000, -2.25, 0.0);
    for (what, x) in [
        ("0 to 8", &small),
        ("next to 1 and 2", &roots),
        ("8 to 1e30", &large),
        ("huge", &huge.to_vec()),
        ("-2.25 to 0", &negative),
    ] {
        let (e, at) = worst1(|v| v.lgamma(), libm::lgamma, x);
        println!("lgamma, {what}: at most {e:.2} ulp over {} points (at {at:e})", x.len());
        let bound = if what.starts_with('-') { 5.0 } else { 3.0 };
        assert!(e <= bound, "lgamma, {what}: {e:.2} ulp at {at:e}");
    }
}

/// Below -2.25 the reflection `ln π - ln|x·sinpi(x)| - lgamma(-x)` subtracts, and next to
/// the roots the difference is much smaller than the terms: there the error is bounded in
/// ulps of the largest term.
#[test]
fn lgamma_below_minus_two_and_a_quarter_is_within_four_ulp_of_the_reflection_s_largest_term() {
    let mut rng = Rng::new(162);
    let mut x = rng.f32s(400_000, -40.0, -2.25);
    x.extend(around(
        &mut rng,
        &[-2.4570, -2.7476, -3.1435, -3.9552, -4.0390, -5.0015],
        2_000,
    ));
    x.extend(points(&mut rng, 20_000, -1e7, -40.0).iter().map(|v| -v.abs()));
    let got = apply1(|v| v.lgamma(), &x);
    let (mut worst, mut worst_term, mut at) = (0.0f64, 0.0f64, 0.0f32);
    for (&g, &v) in got.iter().zip(&x) {
        let want = libm::lgamma(v as f64);
        let v64 = v as f64;
        let largest = [
            std::f64::consts::PI.ln(),
            (v64 * (std::f64::consts::PI * v64).sin()).abs().ln().abs(),
            libm::lgamma(-v64),
        ]
        .into_iter()
        .fold(0.0, f64::max);
        let term = ulps(g, want).min((g as f64 - want).abs() / ulps_of(largest));
        worst = worst.max(ulps(g, want));
        if term > worst_term {
            (worst_term, at) = (term, v);
        }
    }
    println!("lgamma below -2.25: at most {worst:.2} ulp, {worst_term:.2} ulp of the largest term (at {at:e})");
    assert!(worst_term <= 4.0, "{worst_term:.2} ulp of the largest term at {at:e}");
}

/// The spacing of f32 at `v`.
fn ulps_of(v: f64) -> f64 {
    let w = (v as f32).abs().max(f32::MIN_POSITIVE);
    (f32::from_bits(w.to_bits() + 1) - w) as f64
}

#[test]
fn tgamma_is_within_three_ulp_of_f64() {
    let mut rng = Rng::new(163);
    let positive: Vec<f32> = points(&mut rng, 1_000_000, 0.0, 35.0)
        .into_iter()
        .map(f32::abs)
        .collect();
    let negative: Vec<f32> = rng
        .f32s(1_000_000, -43.0, 0.0)
        .into_iter()
        .filter(|v| v.fract() != 0.0)
        .collect();
    let poles = around(&mut rng, &[-1.0, -2.0, -7.0, -20.0, -41.0], 2_000)
        .into_iter()
        .filter(|v| v.fract() != 0.0)
        .collect();
    let edges = around(&mut rng, &[35.04, -42.5], 1_000);
    for (what, x) in [
        ("0 to 35", &positive),
        ("-43 to 0", &negative),
        ("next to poles", &poles),
        ("overflow and underflow", &edges),
    ] {
        let (e, at) = worst1(|v| v.tgamma(), libm::tgamma, x);
        println!("tgamma, {what}: at most {e:.2} ulp over {} points (at {at:e})", x.len());
        assert!(e <= 3.0, "tgamma, {what}: {e:.2} ulp at {at:e}");
    }
}

#[test]
fn special_values() {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let lgamma = [
        (1.0, 0.0),
        (2.0, 0.0),
        (0.0, inf),
        (-0.0, inf),
        (-3.0, inf),
        (-1e30, inf),
        (inf, inf),
        (-inf, inf),
        (nan, nan),
        (3.0, std::f32::consts::LN_2),
    ];
    let x: Vec<f32> = lgamma.iter().map(|c| c.0).collect();
    for (c, got) in lgamma.iter().zip(apply1(|v| v.lgamma(), &x)) {
        assert!(same(got, c.1), "lgamma({}) = {got}, expected {}", c.0, c.1);
    }
    let tgamma = [
        (1.0, 1.0),
        (2.0, 1.0),
        (5.0, 24.0),
        (0.0, inf),
        (-0.0, -inf),
        (-1.0, nan),
        (-40.0, nan),
        (36.0, inf),
        (1e30, inf),
        (inf, inf),
        (-inf, nan),
        (nan, nan),
        (-50.5, -0.0),
        (-51.5, 0.0),
    ];
    let x: Vec<f32> = tgamma.iter().map(|c| c.0).collect();
    for (c, got) in tgamma.iter().zip(apply1(|v| v.tgamma(), &x)) {
        assert!(same(got, c.1), "tgamma({}) = {got}, expected {}", c.0, c.1);
    }
}

#[test]
fn the_lowering_computes_the_interpreter_s_bits() {
    let mut rng = Rng::new(164);
    let mut x = rng.f32s(4096, -45.0, 40.0);
    x.extend([
        0.0,
        -0.0,
        1.0,
        2.0,
        -3.0,
        1e30,
        -1e30,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ]);
    assert_lowering_matches("lgamma", |_, y, _| y.lgamma(), &x, &x);
    assert_lowering_matches("tgamma", |_, y, _| y.tgamma(), &x, &x);
}

/// f64 computes in f64 (`core-ir/tests/f64_math.rs` measures it).
#[test]
fn half_precision_rounds_the_f32_result_and_integers_are_errors() {
    let functions: [(&str, Unary); 2] = [("lgamma", |v| v.lgamma()), ("tgamma", |v| v.tgamma())];
    for (name, f) in functions {
        assert_f16_rounds_once(name, f, &[0.5, -1.25, 3.0, 4.5]);
        assert_errors(name, f, &[(ScalarType::I32, "i32")]);
    }
}

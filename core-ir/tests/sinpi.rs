//! `sinpi` and `cospi` (built from ops in `builder/sinpi.rs`): their error against f64 in
//! the interpreter (uniform, tiny, up to 2^24 and beyond, next to integers and
//! half-integers), their exact zeros and ones, the lowering in the simulator against the
//! interpreter, f16 through f32, and their mistakes as errors that name them.

mod f32_functions;

use f32_functions::{
    apply1, assert_errors, assert_f16_rounds_once, assert_lowering_matches, points, same, worst1, Unary,
};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType;

/// `sin(πx)` and `cos(πx)` in f64: `x = n + r` with `n` the nearest integer (exact for
/// an f32's value), `(-1)^n` times the function of `πr`, exact zeros where `r` is 0 or 1/2.
fn reduced(x: f64) -> (f64, f64) {
    let n = x.round();
    let sign = if n.rem_euclid(2.0) == 0.0 { 1.0 } else { -1.0 };
    (sign, x - n)
}
fn sin_pi(x: f64) -> f64 {
    let (sign, r) = reduced(x);
    if r == 0.0 {
        return 0.0;
    }
    sign * (std::f64::consts::PI * r).sin()
}
fn cos_pi(x: f64) -> f64 {
    let (sign, r) = reduced(x);
    if r.abs() == 0.5 {
        return 0.0;
    }
    sign * (std::f64::consts::PI * r).cos()
}

#[test]
fn sinpi_and_cospi_are_within_two_ulp_of_f64() {
    let mut rng = Rng::new(141);
    let mut x = points(&mut rng, 100_000, -4.0, 4.0);
    x.extend(rng.f32s(50_000, -1.0e6, 1.0e6));
    x.extend(rng.f32s(20_000, -1.6e7, 1.6e7));
    // Next to integers and half-integers, where one of them is near zero.
    for i in 0..20_000 {
        let c = (i as f32 - 10_000.0) * 0.5;
        for d in 1..4 {
            x.push(f32::from_bits(c.to_bits() + d));
            x.push(f32::from_bits(c.to_bits().wrapping_sub(d)));
        }
    }
    let x: Vec<f32> = x.into_iter().filter(|v| v.is_finite()).collect();
    let (e, at) = worst1(|v| v.sinpi(), sin_pi, &x);
    println!("sinpi: at most {e:.2} ulp over {} points (at {at:e})", x.len());
    assert!(e <= 2.0, "sinpi: {e:.2} ulp at {at:e}");
    let (e, at) = worst1(|v| v.cospi(), cos_pi, &x);
    println!("cospi: at most {e:.2} ulp over {} points (at {at:e})", x.len());
    assert!(e <= 2.0, "cospi: {e:.2} ulp at {at:e}");
}

#[test]
fn exact_zeros_ones_and_special_values() {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let x = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.0,
        -3.0,
        0.5,
        -0.5,
        1.5,
        -2.5,
        1.0e7,
        -3.0e30,
        8_388_609.0,
        inf,
        -inf,
        nan,
    ];
    let sin = [
        0.0, -0.0, 0.0, -0.0, 0.0, -0.0, 1.0, -1.0, -1.0, -1.0, 0.0, -0.0, 0.0, nan, nan, nan,
    ];
    let cos = [
        1.0, 1.0, -1.0, -1.0, 1.0, -1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, -1.0, nan, nan, nan,
    ];
    for ((&x, s), c) in x
        .iter()
        .zip(apply1(|v| v.sinpi(), &x).into_iter().zip(sin))
        .zip(apply1(|v| v.cospi(), &x).into_iter().zip(cos))
    {
        assert!(same(s.0, s.1), "sinpi({x}) = {}, expected {}", s.0, s.1);
        assert!(same(c.0, c.1), "cospi({x}) = {}, expected {}", c.0, c.1);
    }
}

#[test]
fn lowered_functions_match_the_interpreter() {
    let mut rng = Rng::new(142);
    let mut x = rng.f32s(4096, -100.0, 100.0);
    x.extend([0.0, -0.0, 0.5, -1.5, 3.0e7, f32::INFINITY, f32::NAN]);
    assert_lowering_matches("sinpi", |_, y, _| y.sinpi(), &x, &x);
    assert_lowering_matches("cospi", |_, y, _| y.cospi(), &x, &x);
}

#[test]
fn half_precision_rounds_the_f32_result_and_integers_are_errors() {
    let x = [0.25, -0.75, 3.125, 100.5];
    // f64 is computed in f64 (`f64_trig.rs`, measured in `f64_math.rs`).
    for (name, f) in [("sinpi", (|v| v.sinpi()) as Unary), ("cospi", |v| v.cospi())] {
        assert_f16_rounds_once(name, f, &x);
        assert_errors(name, f, &[(ScalarType::I32, "i32")]);
    }
}

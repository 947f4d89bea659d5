//! `cyl_bessel_i0` and `cyl_bessel_i1` (built from ops in `builder/bessel.rs`): their error
//! against f64 in the interpreter from 0 to where they overflow, their special values, the
//! lowering in the simulator against the interpreter, f16 through f32, and their mistakes
//! as errors that name them.

mod f32_functions;

use f32_functions::{
    apply1, assert_errors, assert_f16_rounds_once, assert_lowering_matches, points, same, worst1, Unary,
};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType::I32;

/// `I_order(x)` in f64: the Taylor series (positive terms) up to 30, the asymptotic series
/// `e^x/√(2πx)·Σ a_k` beyond (its terms fall below 10^-20 of the sum before they grow).
fn bessel_i(order: i32, x: f64) -> f64 {
    let a = x.abs();
    let sign = if order == 1 && x < 0.0 { -1.0 } else { 1.0 };
    if a <= 30.0 {
        let y = a * a / 4.0;
        let (mut term, mut sum) = (if order == 0 { 1.0 } else { a / 2.0 }, 0.0);
        for k in 0..200 {
            sum += term;
            term *= y / ((k + 1) as f64 * (k + 1 + order) as f64);
            if term < 1e-20 * sum {
                break;
            }
        }
        return sign * sum;
    }
    let mu = 4.0 * (order * order) as f64;
    let (mut term, mut sum) = (1.0, 0.0);
    for k in 1..60 {
        sum += term;
        let j = (2 * k - 1) as f64;
        term *= -(mu - j * j) / (k as f64 * 8.0 * a);
        if term.abs() < 1e-20 {
            break;
        }
    }
    sign * (a.exp() / (2.0 * std::f64::consts::PI * a).sqrt()) * sum
}

#[test]
fn they_are_within_four_ulp_of_f64() {
    let mut rng = Rng::new(181);
    let small = points(&mut rng, 400_000, -4.0, 4.0);
    let large = rng.f32s(400_000, -92.0, 92.0);
    let functions: [(&str, Unary, i32); 2] = [
        ("cyl_bessel_i0", |v| v.cyl_bessel_i0(), 0),
        ("cyl_bessel_i1", |v| v.cyl_bessel_i1(), 1),
    ];
    let mut worst = Vec::new();
    for (name, f, order) in functions {
        for (what, x) in [("|x| < 4", &small), ("|x| < 92", &large)] {
            let (e, at) = worst1(f, |v| bessel_i(order, v), x);
            println!("{name}, {what}: at most {e:.2} ulp over {} points (at {at:e})", x.len());
            worst.push((e, at, name, what));
        }
    }
    for (e, at, name, what) in worst {
        assert!(e <= 4.0, "{name}, {what}: {e:.2} ulp at {at:e}");
    }
}

#[test]
fn special_values() {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let i0 = [
        (0.0, 1.0),
        (-0.0, 1.0),
        (inf, inf),
        (-inf, inf),
        (95.0, inf),
        (nan, nan),
    ];
    let x: Vec<f32> = i0.iter().map(|c| c.0).collect();
    for (c, got) in i0.iter().zip(apply1(|v| v.cyl_bessel_i0(), &x)) {
        assert!(same(got, c.1), "cyl_bessel_i0({}) = {got}, expected {}", c.0, c.1);
    }
    let i1 = [
        (0.0, 0.0),
        (-0.0, -0.0),
        (inf, inf),
        (-inf, -inf),
        (-95.0, -inf),
        (nan, nan),
    ];
    let x: Vec<f32> = i1.iter().map(|c| c.0).collect();
    for (c, got) in i1.iter().zip(apply1(|v| v.cyl_bessel_i1(), &x)) {
        assert!(same(got, c.1), "cyl_bessel_i1({}) = {got}, expected {}", c.0, c.1);
    }
}

#[test]
fn the_lowering_computes_the_interpreter_s_bits() {
    let mut rng = Rng::new(182);
    let mut x = rng.f32s(4096, -100.0, 100.0);
    x.extend([0.0, -0.0, 6.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN]);
    assert_lowering_matches("cyl_bessel_i0", |_, y, _| y.cyl_bessel_i0(), &x, &x);
    assert_lowering_matches("cyl_bessel_i1", |_, y, _| y.cyl_bessel_i1(), &x, &x);
}

#[test]
fn half_precision_rounds_the_f32_result_and_integers_are_errors() {
    let functions: [(&str, Unary); 2] = [
        ("cyl_bessel_i0", |v| v.cyl_bessel_i0()),
        ("cyl_bessel_i1", |v| v.cyl_bessel_i1()),
    ];
    for (name, f) in functions {
        // f64 has its own form (tests/f64_bessel.rs).
        assert_f16_rounds_once(name, f, &[0.5, -1.25, 3.0, 8.5]);
        assert_errors(name, f, &[(I32, "i32")]);
    }
}

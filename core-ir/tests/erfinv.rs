//! `erfinv` (built from ops in `builder/erfinv.rs`): its error against f64 in the
//! interpreter over `(-1, 1)` (uniform, near 0 and next to ±1), its special values, the
//! lowering in the simulator against the interpreter, f16 through f32, and its mistakes as
//! errors that name it.

mod f32_functions;

use f32_functions::{apply1, assert_errors, assert_f16_rounds_once, assert_lowering_matches, same, worst1};
use rutile_ir::testing::Rng;

/// `erfinv(x)` in f64: Newton's iteration on `erf(y) = x` from a start by bisection, to
/// f64's precision (which f32's arguments leave far from ±1's cancellation).
fn erfinv_f64(x: f64) -> f64 {
    if x.abs() >= 1.0 {
        return if x.abs() == 1.0 { x * f64::INFINITY } else { f64::NAN };
    }
    let (mut lo, mut hi) = (-6.0f64, 6.0f64);
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if libm::erf(mid) < x {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let mut y = 0.5 * (lo + hi);
    for _ in 0..3 {
        let d = (libm::erf(y) - x) / (2.0 / std::f64::consts::PI.sqrt() * (-y * y).exp());
        if d.is_finite() {
            y -= d;
        }
    }
    y
}

#[test]
fn erfinv_is_within_four_ulp_of_f64() {
    let mut rng = Rng::new(121);
    let uniform = rng.f32s(100_000, -1.0, 1.0);
    // Near 0 (down to 2^-30) and next to ±1 (1 - x down to 2^-24: the tail's polynomial).
    let small: Vec<f32> = rng.f32s(20_000, -30.0, -1.0).iter().map(|&e| 2f32.powf(e)).collect();
    let edge: Vec<f32> = rng
        .f32s(40_000, -24.0, -1.0)
        .iter()
        .map(|&e| 1.0 - 2f32.powf(e))
        .collect();
    let edge: Vec<f32> = edge.iter().flat_map(|&v| [v, -v]).collect();
    for (what, x) in [("uniform", &uniform), ("near 0", &small), ("next to ±1", &edge)] {
        let (e, at) = worst1(|v| v.erfinv(), erfinv_f64, x);
        println!("erfinv, {what}: at most {e:.2} ulp over {} points (at {at:e})", x.len());
        // Measured at most 3.46 (uniform), 2.99 (near 0), 3.31 (next to ±1).
        assert!(e <= 4.0, "erfinv, {what}: {e:.2} ulp at {at:e}");
    }
}

#[test]
fn special_values() {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let cases = [
        (0.0, 0.0),
        (-0.0, -0.0),
        (1.0, inf),
        (-1.0, -inf),
        (1.5, nan),
        (-2.0, nan),
        (inf, nan),
        (nan, nan),
    ];
    let x: Vec<f32> = cases.iter().map(|c| c.0).collect();
    for (c, got) in cases.iter().zip(apply1(|v| v.erfinv(), &x)) {
        assert!(same(got, c.1), "erfinv({}) = {got}, expected {}", c.0, c.1);
    }
}

#[test]
fn lowered_erfinv_matches_the_interpreter() {
    let mut rng = Rng::new(122);
    let mut x = rng.f32s(4096, -1.0, 1.0);
    x.extend([0.0, -0.0, 1.0, -1.0, 0.999_999_94, 1.5, f32::NAN]);
    assert_lowering_matches("erfinv", |_, y, _| y.erfinv(), &x, &x);
}

#[test]
fn half_precision_rounds_the_f32_result_and_integers_are_errors() {
    // Arguments f16 holds exactly.
    let x = [0.5, -0.25, 0.875, -0.999_023_44];
    // f64 is computed in f64 (`f64_normal.rs`, measured in `f64_math.rs`).
    assert_f16_rounds_once("erfinv", |v| v.erfinv(), &x);
    assert_errors("erfinv", |v| v.erfinv(), &[(rutile_ir::ScalarType::I32, "i32")]);
}

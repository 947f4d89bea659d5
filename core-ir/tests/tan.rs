//! `tan` (built from ops in `builder/tan.rs`): its error against f64 in the interpreter
//! over the whole f32 range, near the poles (the f32 values nearest odd multiples of π/2) and
//! near the zeros (nearest multiples of π), its special values, the lowering in the
//! simulator against the interpreter, f16 through f32, and its mistakes as errors that
//! name it.

mod f32_functions;

use f32_functions::{
    apply1, assert_errors, assert_f16_rounds_once, assert_lowering_matches, huge_arguments, near_multiples_of_pi_2,
    points, same, worst1,
};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType;

#[test]
fn tan_is_within_four_ulp_of_f64() {
    let mut rng = Rng::new(111);
    // Within a few turns (where most arguments are), and out to 10^5.
    let mut small = points(&mut rng, 150_000, -4.0, 4.0);
    small.extend(rng.f32s(50_000, -100.0, 100.0));
    let large = rng.f32s(100_000, -1.0e5, 1.0e5);
    let far = rng.f32s(100_000, -1.6e7, 1.6e7);
    // Next to the poles, where the reduced argument is smallest and tan largest, and next
    // to the zeros: every multiple of π/2 up to 10^5, three ulps either side, and up to
    // 1.6·10^7, the nearest f32 and one ulp either side.
    let near = near_multiples_of_pi_2(63_600, 3);
    let near_far = near_multiples_of_pi_2(10_185_000, 1);
    // Every exponent up to the largest f32, and the f32s nearest a multiple of π/2.
    let huge = huge_arguments(&mut rng);
    for (what, x) in [
        ("|x| <= 100", &small),
        ("|x| <= 10^5", &large),
        ("|x| <= 1.6·10^7", &far),
        ("near multiples of π/2 to 10^5", &near),
        ("near multiples of π/2 to 1.6·10^7", &near_far),
        ("2^24 to the largest f32", &huge),
    ] {
        let (e, at) = worst1(|v| v.tan(), f64::tan, x);
        println!("tan, {what}: at most {e:.2} ulp over {} points (at {at:e})", x.len());
        // Measured at most 3.00 within 100, 3.05 to 10^5 and 2.85 beyond, and 3.41 next to
        // a pole (CUDA's `tanf` is specified within 4).
        assert!(e <= 4.0, "tan, {what}: {e:.2} ulp at {at:e}");
    }
}

#[test]
fn special_values_are_c_s() {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let cases = [(0.0, 0.0), (-0.0, -0.0), (inf, nan), (-inf, nan), (nan, nan)];
    let x: Vec<f32> = cases.iter().map(|c| c.0).collect();
    for (c, got) in cases.iter().zip(apply1(|v| v.tan(), &x)) {
        assert!(same(got, c.1), "tan({}) = {got}, expected {}", c.0, c.1);
    }
    // Tiny arguments are their own tangents, subnormals included.
    let tiny = [1.0e-20f32, -3.0e-30, 1.0e-40, f32::MIN_POSITIVE];
    for (&t, got) in tiny.iter().zip(apply1(|v| v.tan(), &tiny)) {
        assert!(same(got, t), "tan({t:e}) = {got:e}");
    }
}

#[test]
fn lowered_tan_matches_the_interpreter() {
    let mut rng = Rng::new(112);
    let mut x = rng.f32s(4096, -1000.0, 1000.0);
    x.extend(near_multiples_of_pi_2(20, 1));
    x.extend([0.0, -0.0, f32::INFINITY, f32::NAN, 2.0e9, -3.0e38, 1.0e20]);
    assert_lowering_matches("tan", |_, y, _| y.tan(), &x, &x);
}

#[test]
fn half_precision_rounds_the_f32_result_and_other_types_are_errors() {
    assert_f16_rounds_once("tan", |v| v.tan(), &[0.5, -1.25, 3.0, 100.0]);
    // f64 is computed in f64 (`f64_trig.rs`, measured in `f64_math.rs`).
    assert_errors("tan", |v| v.tan(), &[(ScalarType::I32, "i32")]);
}

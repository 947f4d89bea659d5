//! `jn` and `yn` (built from ops in `builder/bessel_n.rs`): their error against f64 in the
//! interpreter for orders from -3 to 50, from where `J_n` is tiny (downward recurrence) to
//! where it oscillates (upward), their special values, the lowering in the simulator
//! against the interpreter, and their mistakes as errors that name them.

mod f32_functions;

use f32_functions::{apply1, assert_lowering_matches, build_error, same};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType::{F32, I32};

const ORDERS: [i32; 9] = [0, 1, 2, 3, 5, 10, 20, 50, -3];

/// The error of `got` against `want` in units of 2^-21 of the larger of `|want|` and, where
/// `x` is past the order (the functions oscillate), the envelope `√(2/(πx))`; where `want`
/// is subnormal in f32, in units of the smallest subnormal.
fn error(got: f32, want: f64, x: f64, n: i32) -> f64 {
    if got.is_nan() && want.is_nan() || got as f64 == want || got == want as f32 {
        return 0.0;
    }
    // A NaN where a number is due (a comparison with NaN would let it pass).
    if got.is_nan() || want.is_nan() {
        return f64::INFINITY;
    }
    let envelope = if x.abs() >= n.unsigned_abs() as f64 {
        (2.0 / (std::f64::consts::PI * x.abs())).sqrt()
    } else {
        0.0
    };
    let unit = (want.abs().max(envelope) * 2f64.powi(-21)).max(2f64.powi(-149));
    (got as f64 - want).abs() / unit
}

#[test]
fn they_are_within_a_quarter_of_their_order_in_units_of_2_to_the_minus_21() {
    let mut rng = Rng::new(221);
    let mut x = rng.f32s(20_000, 0.0, 100.0);
    x.extend(rng.f32s(5_000, 0.0, 2.0));
    x.extend((1..60).map(|i| i as f32 * 0.999));
    // Tiny x, where J_n is its series' first term (the downward recurrence overflowed there).
    x.extend([1e-3f32, 2.4e-4, 1e-6, 3e-12, 1e-20, 1e-30, 1e-38, 1e-42]);
    let mut worst = Vec::new();
    for n in ORDERS {
        for (name, positive_only) in [("jn", false), ("yn", true)] {
            let xs: Vec<f32> = if positive_only {
                x.clone()
            } else {
                x.iter().map(|v| if (v.to_bits() & 1) == 1 { -v } else { *v }).collect()
            };
            let got = if name == "jn" {
                apply1(|v| v.jn(n), &xs)
            } else {
                apply1(|v| v.yn(n), &xs)
            };
            let (mut e, mut at) = (0.0f64, 0.0f32);
            for (&g, &v) in got.iter().zip(&xs) {
                let want = if name == "jn" {
                    libm::jn(n, v as f64)
                } else {
                    libm::yn(n, v as f64)
                };
                // Where f32 overflows, -inf is right.
                if want.abs() > f32::MAX as f64 && g.is_infinite() && (g < 0.0) == (want < 0.0) {
                    continue;
                }
                let err = error(g, want, v as f64, n);
                if err > e {
                    (e, at) = (err, v);
                }
            }
            println!("{name}({n}, x): at most {e:.2} units of 2^-21 (at {at:e})");
            worst.push((name, n, e, at));
        }
    }
    // The recurrences' roundings add up with the order: measured at most 1.16 units to
    // order 5, 1.81 at 10, 3.39 at 20 and 8.38 at 50 (next to x = n).
    for (name, n, e, at) in worst {
        let bound = (n.abs() as f64 / 4.0).max(1.5);
        assert!(e <= bound, "{name}({n}, {at:e}): {e:.2} units of 2^-21");
    }
}

#[test]
fn special_values() {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let x = [0.0f32, -0.0, inf, nan];
    let j3 = apply1(|v| v.jn(3), &x);
    for (got, want) in j3.iter().zip([0.0, 0.0, 0.0, nan]) {
        assert!(same(got.abs(), want), "jn(3, ...) = {got}, expected {want}");
    }
    assert_eq!(apply1(|v| v.jn(0), &[0.0])[0], 1.0);
    let y3 = apply1(|v| v.yn(3), &[0.0, -1.0, nan, 1e-30]);
    for (got, want) in y3.iter().zip([-inf, nan, nan, -inf]) {
        assert!(same(*got, want), "yn(3, ...) = {got}, expected {want}");
    }
}

#[test]
fn the_lowering_computes_the_interpreter_s_bits() {
    let mut rng = Rng::new(222);
    let mut x = rng.f32s(2048, -40.0, 40.0);
    x.extend([0.0, -0.0, 1e-30, f32::INFINITY, f32::NAN]);
    assert_lowering_matches("jn", |_, y, _| y.jn(7), &x, &x);
    assert_lowering_matches("yn", |_, y, _| y.yn(7), &x, &x);
}

#[test]
fn mistakes_are_errors_that_name_them() {
    for (e, words) in [
        (
            build_error(|k| {
                let _ = k.zeros(&[16], F32).jn(k.zeros(&[16], I32));
            }),
            ["jn", "scalar"],
        ),
        (
            build_error(|k| {
                let _ = k.zeros(&[16], F32).yn(2.5);
            }),
            ["yn", "float"],
        ),
        (
            build_error(|k| {
                let _ = k.zeros(&[16], I32).jn(2);
            }),
            ["jn", "i32"],
        ),
    ] {
        for w in words {
            assert!(e.contains(w), "{e:?} does not say {w:?}");
        }
    }
}

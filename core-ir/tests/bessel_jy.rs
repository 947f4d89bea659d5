//! `j0`, `j1`, `y0` and `y1` (built from ops in `builder/bessel_jy.rs`): their absolute
//! error against f64 in the interpreter below 2, and as a share of the envelope
//! `√(2/(πx))` beyond, up to the largest f32 and next to their zeros; their special
//! values, the lowering in the simulator against the interpreter, f16 through f32, and
//! their mistakes as errors that name them.

mod f32_functions;

use f32_functions::{
    apply1, assert_errors, assert_f16_rounds_once, assert_lowering_matches, assert_special_values, huge_arguments,
    points, Unary,
};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType::I32;

type Case = (&'static str, Unary, fn(f64) -> f64, bool);

fn functions() -> [Case; 4] {
    [
        ("j0", |v| v.j0(), libm::j0, true),
        ("j1", |v| v.j1(), libm::j1, true),
        ("y0", |v| v.y0(), libm::y0, false),
        ("y1", |v| v.y1(), libm::y1, false),
    ]
}

/// The largest error of `f` against `exact` over `x`: absolute below 2 (relative to the
/// size of `Y`'s logarithm or pole where those exceed 1), a share of the envelope beyond.
fn worst(f: Unary, exact: fn(f64) -> f64, x: &[f32]) -> (f64, f32) {
    let got = apply1(f, x);
    let mut w = (0.0, 0.0);
    for (&g, &v) in got.iter().zip(x) {
        let a = (v as f64).abs();
        let want = exact(v as f64);
        let scale = if a < 2.0 {
            want.abs().max(1.0)
        } else {
            (2.0 / (std::f64::consts::PI * a)).sqrt()
        };
        let e = (g as f64 - want).abs() / scale;
        if e > w.0 {
            w = (e, v);
        }
    }
    w
}

#[test]
fn errors_are_within_their_bounds() {
    let mut rng = Rng::new(201);
    let small: Vec<f32> = points(&mut rng, 200_000, 0.0, 2.0).into_iter().map(f32::abs).collect();
    let mid = rng.f32s(400_000, 0.0, 100.0);
    let large = rng.f32s(200_000, 0.0, 1.0e6);
    let huge: Vec<f32> = huge_arguments(&mut rng).into_iter().map(f32::abs).collect();
    // Next to the zeros of J0, J1, Y0, Y1 below 100: 200 f32s either side of each, from
    // the zeros' f64 values found by bisection in libm.
    let mut zeros = Vec::new();
    for (_, _, exact, _) in functions() {
        let mut x = 0.1f64;
        while x < 100.0 {
            let (mut lo, mut hi) = (x, x + 0.05);
            if exact(lo).signum() != exact(hi).signum() {
                for _ in 0..60 {
                    let m = 0.5 * (lo + hi);
                    if exact(lo).signum() == exact(m).signum() {
                        lo = m;
                    } else {
                        hi = m;
                    }
                }
                let c = lo as f32;
                zeros.extend((-200..=200).map(|d| f32::from_bits((c.to_bits() as i32 + d) as u32)));
            }
            x += 0.05;
        }
    }
    let mut results = Vec::new();
    for (name, f, exact, odd) in functions() {
        for (what, x) in [
            ("below 2", &small),
            ("to 100", &mid),
            ("to 10^6", &large),
            ("2^24 to the largest f32", &huge),
            ("next to zeros", &zeros),
        ] {
            let (e, at) = worst(f, exact, x);
            println!("{name}, {what}: at most {e:.2e} over {} points (at {at:e})", x.len());
            results.push((name, what, e, at));
            if odd {
                // Negative arguments: J0 even, J1 odd.
                let neg: Vec<f32> = x.iter().map(|v| -v).collect();
                let (e, at) = worst(f, exact, &neg);
                results.push((name, what, e, at));
            }
        }
    }
    // Measured at most 2.8·10^-7 below 2 (y0 next to 0, against its logarithm) and 3.3·10^-7
    // of the envelope beyond (j1 and y1).
    for (name, what, e, at) in results {
        let bound = 2f64.powi(-21);
        assert!(e <= bound, "{name}, {what}: {e:.2e} at {at:e}");
    }
}

#[test]
fn special_values() {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    type Specials = (&'static str, Unary, [(f32, f32); 5]);
    let cases: [Specials; 4] = [
        (
            "j0",
            |v| v.j0(),
            [(0.0, 1.0), (-0.0, 1.0), (inf, 0.0), (-inf, 0.0), (nan, nan)],
        ),
        (
            "j1",
            |v| v.j1(),
            [(0.0, 0.0), (-0.0, -0.0), (inf, 0.0), (-inf, -0.0), (nan, nan)],
        ),
        (
            "y0",
            |v| v.y0(),
            [(0.0, -inf), (-0.0, -inf), (inf, 0.0), (-1.0, nan), (nan, nan)],
        ),
        (
            "y1",
            |v| v.y1(),
            [(0.0, -inf), (-0.0, -inf), (inf, 0.0), (-1.0, nan), (nan, nan)],
        ),
    ];
    for (name, f, pairs) in cases {
        assert_special_values(name, f, &pairs);
    }
}

#[test]
fn the_lowering_computes_the_interpreter_s_bits() {
    let mut rng = Rng::new(202);
    let mut x = rng.f32s(4096, -50.0, 50.0);
    x.extend([0.0, -0.0, 2.0, 1e-30, 1e30, f32::INFINITY, f32::NEG_INFINITY, f32::NAN]);
    for (name, f, _, _) in functions() {
        assert_lowering_matches(name, |_, y, _| f(y), &x, &x);
    }
}

#[test]
fn half_precision_rounds_the_f32_result_and_integers_are_errors() {
    for (name, f, _, _) in functions() {
        // f64 has its own form (tests/f64_bessel.rs).
        assert_f16_rounds_once(name, f, &[0.5, 1.25, 3.0, 8.5]);
        assert_errors(name, f, &[(I32, "i32")]);
    }
}

//! `asin`, `acos`, `atan` and `atan2` (built from ops in `builder/inverse_trig.rs`): their
//! error against f64 over their domains in the interpreter, their special values (C's
//! Annex F where it speaks), the lowering in the simulator against the interpreter, and
//! their mistakes as errors that name them.

mod f32_functions;

use f32_functions::{apply, assert_lowering_matches, build_error, points, same, worst};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType::{F16, F32, I32};
use rutile_ir::{KernelBuilder, ScalarType, Value};

#[test]
fn the_functions_are_within_three_ulps_of_f64() {
    let mut rng = Rng::new(71);
    let unit: Vec<(f32, f32)> = points(&mut rng, 200_000, -1.0, 1.0)
        .into_iter()
        .map(|v| (v, 0.0))
        .collect();
    let (e, at, _) = worst(|_, y, _| y.asin(), |y, _| y.asin(), &unit);
    assert!(e <= 3.0, "asin: {e:.2} ulp at {at}");
    let (e, at, _) = worst(|_, y, _| y.acos(), |y, _| y.acos(), &unit);
    assert!(e <= 3.0, "acos: {e:.2} ulp at {at}");
    let mut wide: Vec<(f32, f32)> = points(&mut rng, 100_000, -10.0, 10.0)
        .into_iter()
        .map(|v| (v, 0.0))
        .collect();
    wide.extend((0..20_000).map(|i| {
        let m = 2f32.powf(rng.f32s(1, -60.0, 60.0)[0]);
        (if i % 2 == 0 { m } else { -m }, 0.0)
    }));
    let (e, at, _) = worst(|_, y, _| y.atan(), |y, _| y.atan(), &wide);
    assert!(e <= 3.0, "atan: {e:.2} ulp at {at}");
    let pairs: Vec<(f32, f32)> = (0..100_000)
        .map(|_| {
            let v = rng.f32s(2, -1.0, 1.0);
            let s = 2f32.powf(rng.f32s(1, -8.0, 8.0)[0]);
            (v[0] * s, v[1])
        })
        .collect();
    let (e, y, x) = worst(|k, y, x| k.atan2(y, x), |y, x| y.atan2(x), &pairs);
    assert!(e <= 3.0, "atan2: {e:.2} ulp at ({y}, {x})");
}

#[test]
fn special_values_are_c_s() {
    use std::f32::consts::{FRAC_PI_2, FRAC_PI_4, PI};
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let unary: [(&str, f32, f32); 14] = [
        ("asin", 0.0, 0.0),
        ("asin", -0.0, -0.0),
        ("asin", 1.0, FRAC_PI_2),
        ("asin", -1.0, -FRAC_PI_2),
        ("asin", 1.5, nan),
        ("asin", nan, nan),
        ("acos", 1.0, 0.0),
        ("acos", -1.0, PI),
        ("acos", -1.5, nan),
        ("atan", 0.0, 0.0),
        ("atan", -0.0, -0.0),
        ("atan", inf, FRAC_PI_2),
        ("atan", -inf, -FRAC_PI_2),
        ("atan", nan, nan),
    ];
    let x: Vec<f32> = unary.iter().map(|c| c.1).collect();
    let asin = apply(|_, y, _| y.asin(), &x, &x);
    let acos = apply(|_, y, _| y.acos(), &x, &x);
    let atan = apply(|_, y, _| y.atan(), &x, &x);
    for (i, &(op, input, want)) in unary.iter().enumerate() {
        let got = match op {
            "asin" => asin[i],
            "acos" => acos[i],
            _ => atan[i],
        };
        assert!(same(got, want), "{op}({input}) = {got}, expected {want}");
    }
    // atan2(y, x) where C's Annex F says exactly what it is.
    let binary: [(f32, f32, f32); 16] = [
        (0.0, 0.0, 0.0),
        (-0.0, 0.0, -0.0),
        (0.0, -0.0, PI),
        (-0.0, -0.0, -PI),
        (0.0, -1.0, PI),
        (-0.0, -1.0, -PI),
        (0.0, 1.0, 0.0),
        (-0.0, 1.0, -0.0),
        (1.0, 0.0, FRAC_PI_2),
        (-1.0, -0.0, -FRAC_PI_2),
        (1.0, -inf, PI),
        (-1.0, inf, -0.0),
        (inf, 3.0, FRAC_PI_2),
        (inf, inf, FRAC_PI_4),
        (-inf, -inf, -3.0 * FRAC_PI_4),
        (nan, 1.0, nan),
    ];
    let (y, x): (Vec<f32>, Vec<f32>) = binary.iter().map(|c| (c.0, c.1)).unzip();
    let got = apply(|k, y, x| k.atan2(y, x), &y, &x);
    for (g, &(y, x, want)) in got.iter().zip(&binary) {
        assert!(
            same(*g, want) || (*g - want).abs() <= 2.0 * f32::EPSILON * want.abs(),
            "atan2({y}, {x}) = {g}, expected {want}"
        );
    }
}

#[test]
fn the_lowering_computes_the_interpreter_s_bits() {
    let mut rng = Rng::new(72);
    let n = 3000;
    let y = points(&mut rng, n, -1.5, 1.5);
    let x = points(&mut rng, n, -3.0, 3.0);
    type Op = for<'b> fn(&'b KernelBuilder, Value<'b>, Value<'b>) -> Value<'b>;
    let ops: [(&str, Op); 4] = [
        ("asin", |_, y, _| y.asin()),
        ("acos", |_, y, _| y.acos()),
        ("atan", |_, y, x| (y * x * 100.0f32).atan()),
        ("atan2", |k, y, x| k.atan2(y, x)),
    ];
    for (name, f) in ops {
        assert_lowering_matches(name, f, &y, &x);
    }
}

#[test]
fn f16_rounds_the_f32_result_once() {
    let x: Vec<f32> = (0..=200).map(|i| -1.0 + i as f32 / 100.0).collect();
    let f32s = apply(|_, y, _| y.asin(), &x, &x);
    let f16s = apply(|_, y, _| y.to(F16).asin().to(F32), &x, &x);
    for ((a, b), v) in f32s.iter().zip(&f16s).zip(&x) {
        let v16 = half::f16::from_f32(*v).to_f32();
        let want = half::f16::from_f32(apply_one_asin(v16)).to_f32();
        assert_eq!(*b, want, "asin({v}) in f16 (f32 gives {a})");
    }
}

/// The f32 `asin` of one value, in the interpreter.
fn apply_one_asin(v: f32) -> f32 {
    apply(|_, y, _| y.asin(), &[v], &[v])[0]
}

/// A block of 16 zeros of `t`.
fn block(k: &KernelBuilder, t: ScalarType) -> Value<'_> {
    k.zeros(&[16], t)
}

#[test]
fn mistakes_are_errors_that_name_the_function() {
    let cases: Vec<(String, &[&str])> = vec![
        (
            build_error(|k| {
                let _ = block(k, I32).asin();
            }),
            &["asin", "takes f16, bf16, f32 (computed in f32) or f64", "i32"],
        ),
        (
            build_error(|k| {
                let _ = k.atan2(block(k, F32), block(k, I32));
            }),
            &["atan2", "i32"],
        ),
        (
            build_error(|k| {
                let _ = k.atan2(block(k, F32), k.zeros(&[8], F32));
            }),
            &["atan2", "cannot be broadcast"],
        ),
    ];
    for (message, parts) in cases {
        for part in parts {
            assert!(message.contains(part), "{message:?} does not say {part:?}");
        }
    }
}

//! The seeded dropout tutorial on the interpreter and every GPU present (lavapipe included),
//! against the CPU reference, which draws the same Philox4x32-10 stream, at ragged sizes.
//! Without such a device only the interpreter runs, unless the `RUTILE_REQUIRE*` variables
//! demand one (see `docs/testing.md`).

use rutile::{CpuDevice, Device, DeviceType};
use rutile_examples::rng::Rng;
use rutile_examples::tutorials::dropout::{
    dropout_error, dropout_reference, run_dropout, run_dropout_form, DropoutForm, TOLERANCE, WALK_SHAPES,
};

fn check(d: &dyn Device, n: usize, p: f32, seed: i32) -> Vec<f32> {
    let x = Rng::new(n as u64 ^ seed as u64).f32s(n, -3.0, 3.0);
    let (got, _) = run_dropout(d, &x, p, seed).unwrap_or_else(|e| panic!("{}: n={n}: {e}", d.id()));
    let want = dropout_reference(&x, p, seed);
    let error = dropout_error(&got, &want);
    assert!(
        error <= TOLERANCE,
        "{}: dropout of {n} (p={p}, seed {seed}): error {error:e}",
        d.id()
    );
    // The mask really drops about p of the elements.
    if n >= 10_000 {
        let dropped = want.iter().filter(|&&v| v == 0.0).count() as f64 / n as f64;
        assert!(
            (dropped - p as f64).abs() < 0.02,
            "dropped fraction {dropped} for p={p}"
        );
    }
    got
}

#[test]
fn seeded_dropout_matches_the_cpu_reference() {
    let cpu = CpuDevice::new();
    let (_turn, gpus) = rutile_examples::gpus::gpus_under_test();
    let mut devices: Vec<&dyn Device> = vec![&cpu];
    devices.extend(gpus.iter().map(|d| d.as_ref()));
    for d in devices {
        let mut sizes = vec![1usize, 1000, 1025, 98431];
        if d.properties().device_type != DeviceType::Cpu {
            sizes.push((1 << 22) + 5);
        }
        for &n in &sizes {
            for (p, seed) in [(0.5f32, 123), (0.1, -9), (0.9, i32::MAX)] {
                check(d, n, p, seed);
            }
        }
        // The same seed gives the same output; another seed another mask.
        let a = check(d, 4096, 0.5, 77);
        let b = check(d, 4096, 0.5, 77);
        let c = check(d, 4096, 0.5, 78);
        assert_eq!(a, b, "{}", d.id());
        assert_ne!(a, c, "{}", d.id());
    }
}

/// The walk over blocks (`seeds::seeded_dropout_walk`, its next blocks copied ahead through
/// CUDA) in the shapes the benchmark times, at ragged sizes, on every device: the same
/// output as the reference.
#[test]
fn the_dropout_walk_matches_the_cpu_reference() {
    let cpu = CpuDevice::new();
    let (_turn, gpus) = rutile_examples::gpus::gpus_under_test();
    let mut devices: Vec<&dyn Device> = vec![&cpu];
    devices.extend(gpus.iter().map(|d| d.as_ref()));
    for d in devices {
        let gpu = d.properties().device_type != DeviceType::Cpu;
        let shapes: &[(u32, u32, u32)] = if gpu { &WALK_SHAPES } else { &WALK_SHAPES[4..5] };
        let mut sizes = vec![1usize, 1025, 98431];
        if gpu {
            sizes.push((1 << 22) + 5);
        }
        for &(block, warps, stages) in shapes {
            for &n in &sizes {
                let (p, seed) = (0.3f32, 2024 + n as i32);
                let x = Rng::new(n as u64).f32s(n, -3.0, 3.0);
                let form = DropoutForm::Walk { block, warps, stages };
                let (got, _) = run_dropout_form(d, &x, p, seed, form)
                    .unwrap_or_else(|e| panic!("{}: {form:?}, n={n}: {e}", d.id()));
                let error = dropout_error(&got, &dropout_reference(&x, p, seed));
                assert!(error <= TOLERANCE, "{}: {form:?}, n={n}: error {error:e}", d.id());
            }
        }
        println!("{}: the walks match", d.id());
    }
}

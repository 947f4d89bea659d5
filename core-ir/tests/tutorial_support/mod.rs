//! Helpers shared by the tests of the tutorial kernels: buffers of random values, f64
//! views of them, comparisons with a bound, and the check of a lowering in the SIMT
//! simulator against the interpreter.
#![allow(dead_code)]

pub mod rows;

use half::f16;
use rutile_ir::interp::{self, simt, ArgValue, HostBuffer};
use rutile_ir::lower::lower;
use rutile_ir::target::Target;
use rutile_ir::{Kernel, ScalarType};

pub fn ptr(buffer: usize) -> ArgValue {
    ArgValue::Ptr { buffer, offset: 0 }
}

/// `v` as a buffer of `dtype` (f16 or f32), rounded to nearest.
pub fn buffer_of(dtype: ScalarType, v: &[f32]) -> HostBuffer {
    match dtype {
        ScalarType::F16 => HostBuffer::from_slice(&v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>()),
        ScalarType::F32 => HostBuffer::from_slice(v),
        other => panic!("the tutorial kernels take f16 or f32 buffers, not {other}"),
    }
}

/// A float buffer's values as f64.
pub fn values(b: &HostBuffer) -> Vec<f64> {
    match b.elem() {
        ScalarType::F16 => b.to_vec::<f16>().unwrap().iter().map(|v| v.to_f64()).collect(),
        ScalarType::F32 => b.to_vec::<f32>().unwrap().iter().map(|&v| v as f64).collect(),
        other => panic!("not a float buffer: {other}"),
    }
}

/// Fails unless every `got[i]` is within `rel * |want[i]| + abs` of `want[i]` (a NaN never
/// is), naming `at` and the first element that is not.
#[track_caller]
pub fn assert_close(got: &[f64], want: &[f64], rel: f64, abs: f64, at: &str) {
    assert_eq!(got.len(), want.len(), "{at}: lengths");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let bound = rel * w.abs() + abs;
        assert!(
            !g.is_nan() && (g - w).abs() <= bound,
            "{at}: element {i}: got {g}, expected {w} (bound {bound:.2e})"
        );
    }
}

pub use rutile_ir::testing::runtime_spec;

/// An NVIDIA-like target of `num_warps` warps of 32, an SPIR-V-like one of warps of 8
/// without IEEE max, and one without shuffles: the shapes the backends lower for.
pub fn targets() -> Vec<Target> {
    let plain = |warp_size, num_warps, shuffles| Target {
        warp_size,
        num_warps,
        shuffles,
        native_float_minmax: warp_size == 32 && shuffles,
        ..Target::nvidia(num_warps, 48 * 1024)
    };
    vec![
        plain(32, 4, true),
        plain(32, 1, true),
        plain(8, 2, true),
        plain(32, 2, false),
    ]
}

/// Lowers `kernel` for [`targets`] and checks each in the simulator against the interpreter
/// (see [`simulate_on`]).
#[track_caller]
pub fn simulate_targets(
    at: &str,
    kernel: &Kernel,
    grid: [u32; 3],
    args: &[ArgValue],
    buffers: &[HostBuffer],
    rel: f64,
) {
    simulate_on(at, kernel, &targets(), grid, args, buffers, rel);
}

/// Lowers `kernel` for each of `targets` (specialized as the runtime would), runs it in the
/// SIMT simulator (which reports races, missing barriers and divergence) and compares every
/// float buffer with the interpreter's within `rel` of the buffer's largest magnitude (f16:
/// plus an ulp), every other buffer exactly.
#[track_caller]
pub fn simulate_on(
    at: &str,
    kernel: &Kernel,
    targets: &[Target],
    grid: [u32; 3],
    args: &[ArgValue],
    buffers: &[HostBuffer],
    rel: f64,
) {
    let mut want = buffers.to_vec();
    interp::run(kernel, grid, args, &mut want).unwrap_or_else(|e| panic!("{at}: the interpreter fails: {e}"));
    for t in targets {
        let at = format!(
            "{at} [warp {} x {} warps, shuffles {}]",
            t.warp_size, t.num_warps, t.shuffles
        );
        let tk = lower(kernel, t, &runtime_spec(args)).unwrap_or_else(|e| panic!("{at}: lowering fails: {e}"));
        let mut got = buffers.to_vec();
        // A block of several programs takes the program grid's x as an argument; a
        // persistent kernel the grid of blocks, on three programs (so that a program walks
        // several blocks where there are more than three, and not the same block index
        // along x in each where there are two).
        let mut launch = args.to_vec();
        if tk.block_programs.is_some() {
            launch.push(ArgValue::Int(grid[0] as i64));
        }
        let mut launched = tk.blocks(grid);
        if tk.persistent.is_some() {
            launch.extend(launched.map(|g| ArgValue::Int(g as i64)));
            launched = [3, 1, 1];
        }
        simt::run_threads(&tk, launched, &launch, &mut got).unwrap_or_else(|e| panic!("{at}: {e}"));
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            if matches!(w.elem(), ScalarType::F16 | ScalarType::F32) {
                let (g, w) = (values(g), values(w));
                let scale = w.iter().fold(0.0f64, |s, v| s.max(v.abs()));
                let ulp = if buffers[i].elem() == ScalarType::F16 {
                    1.0 / 1024.0
                } else {
                    0.0
                };
                let within: Vec<f64> = w.iter().map(|v| v.abs() * ulp).collect();
                for (j, ((&gv, &wv), &u)) in g.iter().zip(&w).zip(&within).enumerate() {
                    let bound = rel * scale + u;
                    assert!(
                        !gv.is_nan() && (gv - wv).abs() <= bound || (gv.is_nan() && wv.is_nan()),
                        "{at}: buffer {i} element {j}: simulated {gv}, interpreted {wv} (bound {bound:.2e})"
                    );
                }
            } else {
                assert_eq!(g.as_bytes(), w.as_bytes(), "{at}: buffer {i} differs");
            }
        }
    }
}

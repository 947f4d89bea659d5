//! The schedules the autotuner can choose beyond tiles, warps and stages: the persistent
//! grid (`lower::persistent`) and warp specialization (`lower::specialize`). The persistent
//! matmul runs in the simulator against the interpreter on fewer programs than tiles.

use rutile_ir::interp::{self, simt, ArgValue, HostBuffer};
use rutile_ir::lower::{lower, LowerError, GRID_PARAMS};
use rutile_ir::seeds::{matmul, matmul_grid, Activation, MatmulMeta};
use rutile_ir::target::Target;
use rutile_ir::testing::{assert_close_to_largest, float_buffer, runtime_spec, Rng};
use rutile_ir::thread::{Stmt, ThreadKernel};
use rutile_ir::ScalarType::F32;

fn hopper(num_warps: u32, stages: u32) -> Target {
    Target {
        mma_sync: true,
        wgmma: true,
        tma: true,
        async_copy: true,
        num_stages: stages,
        ..Target::nvidia(num_warps, 227 * 1024)
    }
}

fn ampere(num_warps: u32, stages: u32) -> Target {
    Target {
        mma_sync: true,
        async_copy: true,
        num_stages: stages,
        ..Target::nvidia(num_warps, 163 * 1024)
    }
}

fn persistent(t: Target) -> Target {
    Target { persistent: true, ..t }
}

/// The matmul seed of `meta` on `m x n x k` lowered for `target`, run in the simulator on
/// `programs` programs (the persistent grid's: the logical grid goes in its parameters)
/// against the interpreter on the whole grid.
fn check(meta: &MatmulMeta, (m, n, k): (usize, usize, usize), target: &Target, programs: u32, rng: &mut Rng) {
    let kernel = matmul(meta).unwrap();
    let buffers = vec![
        float_buffer(rng, meta.input, m * k),
        float_buffer(rng, meta.input, k * n),
        HostBuffer::zeros(meta.output, m * n),
    ];
    let mut args: Vec<ArgValue> = (0..3).map(|buffer| ArgValue::Ptr { buffer, offset: 0 }).collect();
    args.extend([m, n, k, k, 1, n, 1, n, 1].iter().map(|&v| ArgValue::Int(v as i64)));
    let grid = [matmul_grid(meta, m as u32, n as u32), 1, 1];
    let mut want = buffers.clone();
    interp::run(&kernel, grid, &args, &mut want).unwrap();
    let tk = lower(&kernel, target, &runtime_spec(&args)).unwrap();
    let p = tk.persistent.expect("a persistent kernel");
    assert_eq!(p.grid_params, [12, 13, 14]);
    let mut launch = args.clone();
    launch.extend(grid.iter().map(|&g| ArgValue::Int(g as i64)));
    let at = format!(
        "{}x{}x{} blocks, {} warps, {} stages, {m}x{n}x{k}, {programs} programs for {} tiles",
        meta.block_m, meta.block_n, meta.block_k, target.num_warps, target.num_stages, grid[0]
    );
    let mut got = buffers.clone();
    simt::run_threads(&tk, [programs, 1, 1], &launch, &mut got).unwrap_or_else(|e| panic!("{at}: {e}"));
    assert_close_to_largest(&got[2], &want[2], 1e-5, &at);
}

/// Each program walks several tiles, in the grouped order, on ragged M, N and K: through
/// TMA and warpgroup MMAs (whose mbarriers start afresh each tile), through `cp.async` and
/// `mma.sync`, and on the CUDA cores; with fewer programs than tiles, as many, and one.
#[test]
fn the_persistent_matmul_matches_the_interpreter() {
    let mut rng = Rng::new(31);
    let f32_out = |bm, bn, bk| MatmulMeta {
        output: F32,
        group_m: 2,
        ..MatmulMeta::fp16(bm, bn, bk)
    };
    // 3 x 2 tiles of 128x128, on 4 programs: two of them take two tiles.
    check(
        &f32_out(128, 128, 64),
        (300, 200, 136),
        &persistent(hopper(8, 3)),
        4,
        &mut rng,
    );
    check(
        &f32_out(64, 64, 32),
        (150, 100, 80),
        &persistent(hopper(4, 4)),
        1,
        &mut rng,
    );
    check(
        &f32_out(64, 64, 32),
        (150, 100, 80),
        &persistent(ampere(4, 3)),
        5,
        &mut rng,
    );
    let relu = MatmulMeta {
        activation: Some(Activation::LeakyRelu),
        ..f32_out(32, 32, 32)
    };
    check(
        &relu,
        (70, 90, 40),
        &persistent(Target::nvidia(4, 48 * 1024)),
        3,
        &mut rng,
    );
    check(
        &relu,
        (70, 90, 40),
        &persistent(Target::nvidia(4, 48 * 1024)),
        9,
        &mut rng,
    );
}

fn shared_bytes(target: &Target) -> u32 {
    let kernel = matmul(&MatmulMeta::fp16(128, 256, 64)).unwrap();
    let args: Vec<ArgValue> = (0..3)
        .map(|buffer| ArgValue::Ptr { buffer, offset: 0 })
        .chain(
            [4096, 4096, 4096, 4096, 1, 4096, 1, 4096, 1]
                .iter()
                .map(|&v| ArgValue::Int(v)),
        )
        .collect();
    lower(&kernel, target, &runtime_spec(&args)).unwrap().shared_bytes()
}

/// The tile loop keeps the reuse of shared memory between the main loop's ring and the
/// epilogue: a persistent kernel needs what the plain one does.
#[test]
fn a_persistent_tile_reuses_shared_memory_as_a_program_does() {
    let plain = shared_bytes(&hopper(8, 4));
    assert_eq!(shared_bytes(&persistent(hopper(8, 4))), plain);
    assert!(plain <= 200 * 1024, "{plain}");
}

fn count(tk: &ThreadKernel, f: impl Fn(&Stmt) -> bool) -> usize {
    let mut n = 0;
    tk.walk(&mut |s| n += f(s) as usize);
    n
}

/// The parameters the schedule adds may not clash with the kernel's own.
#[test]
fn a_parameter_named_as_the_grid_is_an_error() {
    let kernel = rutile_ir::Kernel::build("clash", |k| {
        let out = k.arg_ptr("out", F32);
        let x = k.arg_i32(GRID_PARAMS[1]);
        let pid = k.program_id(0);
        k.store(out + pid, x.to(F32));
    })
    .unwrap();
    let err = lower(
        &kernel,
        &persistent(Target::nvidia(1, 1024)),
        &rutile_ir::target::Specialization::none(2),
    )
    .unwrap_err();
    assert!(
        matches!(&err, LowerError::InvalidConfig(m) if m.contains(GRID_PARAMS[1])),
        "{err}"
    );
    let plain = lower(
        &kernel,
        &Target::nvidia(1, 1024),
        &rutile_ir::target::Specialization::none(2),
    )
    .unwrap();
    assert_eq!(count(&plain, |s| matches!(s, Stmt::While { .. })), 0);
}

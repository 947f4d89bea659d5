//! The schedules the autotuner can choose beyond tiles, warps and stages: the persistent
//! grid (`lower::persistent`) and warp specialization (`lower::specialize`). The matmul runs
//! in the simulator against the interpreter in each, persistent on fewer programs than
//! tiles, warp-specialized with its producer and consumers taking turns at their mbarriers.

use rutile_ir::interp::{self, simt, ArgValue, HostBuffer};
use rutile_ir::lower::{lower, LowerError, GRID_PARAMS};
use rutile_ir::seeds::{matmul, matmul_grid, Activation, MatmulMeta};
use rutile_ir::target::Target;
use rutile_ir::testing::{assert_close_to_largest, float_buffer, row_major_matmul_args, runtime_spec, Rng};
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

/// The seed's meta-parameters with f32 output (compared at f32's precision) and groups of
/// 2 rows of tiles (so that small grids take the grouped order's turns).
fn f32_out(block_m: u32, block_n: u32, block_k: u32) -> MatmulMeta {
    MatmulMeta {
        output: F32,
        group_m: 2,
        ..MatmulMeta::fp16(block_m, block_n, block_k)
    }
}

fn persistent(t: Target) -> Target {
    Target { persistent: true, ..t }
}

/// The matmul seed of `meta` on `m x n x k` lowered for `target` (and changed by `edit`),
/// run in the simulator against the interpreter: on `programs` programs where the kernel is
/// persistent (the logical grid goes in its parameters), else on the whole grid.
fn run(
    meta: &MatmulMeta,
    (m, n, k): (usize, usize, usize),
    target: &Target,
    programs: u32,
    rng: &mut Rng,
    edit: &mut dyn FnMut(&mut Stmt),
) -> Result<(), String> {
    let kernel = matmul(meta).unwrap();
    let buffers = vec![
        float_buffer(rng, meta.input, m * k),
        float_buffer(rng, meta.input, k * n),
        HostBuffer::zeros(meta.output, m * n),
    ];
    let args = row_major_matmul_args(m, n, k);
    let grid = [matmul_grid(meta, m as u32, n as u32), 1, 1];
    let mut want = buffers.clone();
    interp::run(&kernel, grid, &args, &mut want).unwrap();
    let mut tk = lower(&kernel, target, &runtime_spec(&args)).unwrap();
    // (The Hopper cases' strides are multiples of 16 elements, so both operands come by TMA
    // and the result tile leaves by it.)
    assert_eq!(tk.tensor_maps.len(), if target.tma { 3 } else { 0 }, "TMA copies");
    assert_eq!(tk.producer_warps > 0, target.warp_specialize, "a producer warpgroup");
    tk.walk_mut(&mut |s| edit(s));
    let mut launch = args.clone();
    let launched = match tk.persistent {
        Some(p) => {
            assert_eq!(p.grid_params, [12, 13, 14]);
            launch.extend(grid.iter().map(|&g| ArgValue::Int(g as i64)));
            [programs, 1, 1]
        }
        None => grid,
    };
    let mut got = buffers.clone();
    simt::run_threads(&tk, launched, &launch, &mut got).map_err(|e| e.to_string())?;
    let at = format!(
        "{}x{}x{} blocks, {} warps, {} stages, {m}x{n}x{k}, {} programs for {} tiles",
        meta.block_m, meta.block_n, meta.block_k, target.num_warps, target.num_stages, launched[0], grid[0]
    );
    assert_close_to_largest(&got[2], &want[2], 1e-5, &at);
    Ok(())
}

/// [`run`] of the kernel as lowered, which must not fault.
fn check(meta: &MatmulMeta, shape: (usize, usize, usize), target: &Target, programs: u32, rng: &mut Rng) {
    run(meta, shape, target, programs, rng, &mut |_| {}).unwrap_or_else(|e| {
        panic!(
            "{}x{}x{}, {shape:?}, persistent {}, warp-specialized {}: {e}",
            meta.block_m, meta.block_n, meta.block_k, target.persistent, target.warp_specialize
        )
    });
}

/// Each program walks several tiles, in the grouped order, on ragged M, N and K: through
/// TMA and warpgroup MMAs (whose mbarriers start afresh each tile), through `cp.async` and
/// `mma.sync`, and on the CUDA cores; with fewer programs than tiles, as many, and one.
#[test]
fn the_persistent_matmul_matches_the_interpreter() {
    let mut rng = Rng::new(31);
    let relu = MatmulMeta {
        activation: Some(Activation::LeakyRelu),
        ..f32_out(32, 32, 32)
    };
    let cuda_cores = persistent(Target::nvidia(4, 48 * 1024));
    // (3 x 2 tiles of 128x128 on 4 programs: two of them take two tiles.)
    let cases = [
        (f32_out(128, 128, 64), (300, 208, 144), persistent(hopper(8, 3)), 4),
        (f32_out(64, 64, 32), (150, 112, 80), persistent(hopper(4, 4)), 1),
        (f32_out(64, 64, 32), (150, 100, 80), persistent(ampere(4, 3)), 5),
        (relu, (70, 90, 40), cuda_cores.clone(), 3),
        (relu, (70, 90, 40), cuda_cores, 9),
    ];
    for (meta, shape, target, programs) in &cases {
        check(meta, *shape, target, *programs, &mut rng);
    }
}

fn shared_bytes(target: &Target) -> u32 {
    let kernel = matmul(&MatmulMeta::fp16(128, 256, 64)).unwrap();
    let args = row_major_matmul_args(4096, 4096, 4096);
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

/// Warp-specialized without persistence, the consumers' epilogue takes the ring's bytes
/// once their loop is done (the producer is then done too): the kernel needs the shared
/// memory of the plain one, and the mbarriers (never invalidated) keep theirs.
#[test]
fn a_warp_specialized_epilogue_reuses_the_ring() {
    let plain = shared_bytes(&hopper(8, 4));
    let ws = Target {
        warp_specialize: true,
        ..hopper(8, 4)
    };
    // (Three more mbarriers: the "empty" ones.)
    assert!(shared_bytes(&ws) <= plain + 32, "{} against {plain}", shared_bytes(&ws));
    let kernel = matmul(&MatmulMeta::fp16(128, 256, 64)).unwrap();
    let args = row_major_matmul_args(4096, 4096, 4096);
    let tk = lower(&kernel, &ws, &runtime_spec(&args)).unwrap();
    let offsets = tk.shared_offsets();
    let bars: Vec<usize> = (0..tk.shared.len())
        .filter(|&i| tk.shared[i].elem == rutile_ir::ScalarType::U64)
        .collect();
    assert_eq!(bars.len(), 2);
    for &b in &bars {
        let (b0, b1) = (offsets[b], offsets[b] + tk.shared[b].bytes());
        for (i, a) in tk.shared.iter().enumerate().filter(|&(i, _)| i != b) {
            let (a0, a1) = (offsets[i], offsets[i] + a.bytes());
            assert!(a1 <= b0 || b1 <= a0, "buffer {i} shares bytes with the mbarriers {b}");
        }
    }
    // Persistent, the epilogue runs while the producer fills the next tile's stages: four
    // stages and the epilogue's exchange do not fit.
    let both = Target { persistent: true, ..ws };
    let err = lower(&kernel, &both, &runtime_spec(&args)).unwrap_err();
    assert!(
        matches!(err, LowerError::OutOfSharedMemory { needed, .. } if needed > plain + 60 * 1024),
        "{err}"
    );
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

fn warp_specialized(persistent: bool) -> ThreadKernel {
    let kernel = matmul(&MatmulMeta::fp16(128, 256, 64)).unwrap();
    let args = row_major_matmul_args(4096, 4096, 4096);
    let t = Target {
        warp_specialize: true,
        persistent,
        ..hopper(8, 3)
    };
    lower(&kernel, &t, &runtime_spec(&args)).unwrap()
}

/// The sides of a warp-specialized matmul: the producer waits for free stages and issues
/// the copies, the consumers wait for full ones, multiply and release each stage once, and
/// no barrier of the whole program is left after the mbarriers' setup. Persistent, each
/// side walks the tiles, and the ring is set up once, before them.
#[test]
fn a_warp_specialized_matmul_has_a_producer_and_consumers() {
    for persistent in [false, true] {
        let tk = warp_specialized(persistent);
        assert_eq!((tk.num_warps, tk.producer_warps, tk.threads()), (8, 4, 384));
        let Some(Stmt::Specialized { producer, consumer }) = tk.body.last() else {
            panic!("the body does not end with the specialization:\n{tk}");
        };
        let n = |stmts: &[Stmt], f: &dyn Fn(&Stmt) -> bool| {
            let mut n = 0;
            rutile_ir::thread::walk_stmts(stmts, &mut |s| n += f(s) as usize);
            n
        };
        let waits = |s: &Stmt| matches!(s, Stmt::MbarrierWait { .. });
        let arrivals = |s: &Stmt| matches!(s, Stmt::MbarrierArrive { .. });
        let copies = |s: &Stmt| matches!(s, Stmt::TmaLoad { .. });
        let expect = |s: &Stmt| matches!(s, Stmt::MbarrierArriveExpectTx { .. });
        let mmas = |s: &Stmt| matches!(s, Stmt::Wgmma { .. });
        let whole = |s: &Stmt| matches!(s, Stmt::Barrier);
        assert_eq!(n(producer, &waits), 1, "the producer waits for a free stage");
        assert_eq!((n(producer, &copies), n(producer, &expect)), (2, 1));
        assert_eq!((n(producer, &mmas), n(producer, &arrivals)), (0, 0));
        assert_eq!(n(consumer, &waits), 1, "the consumers wait for a full stage");
        assert_eq!((n(consumer, &copies), n(consumer, &expect)), (0, 0));
        // In the loop for the previous iteration's stage, after it for the last one.
        assert_eq!(n(consumer, &arrivals), 2);
        assert!(n(consumer, &mmas) > 0);
        assert_eq!(n(producer, &whole) + n(consumer, &whole), 0);
        assert!(n(consumer, &|s| matches!(s, Stmt::NamedBarrier { id: 1, threads: 256 })) > 0);
        let inits = tk
            .body
            .iter()
            .filter(|s| matches!(s, Stmt::MbarrierInit { .. }))
            .count();
        // Before the sides (and, persistent, before their loops over tiles): once.
        assert_eq!(inits, 6);
        let init = |s: &Stmt| matches!(s, Stmt::MbarrierInit { .. });
        assert_eq!(n(producer, &init) + n(consumer, &init), 0);
        for side in [producer, consumer] {
            assert!(matches!(side.first(), Some(Stmt::SetMaxRegisters { .. })));
        }
        // Persistent, each side is a loop over tiles; else the consumers end at their barrier.
        assert_eq!(matches!(consumer.last(), Some(Stmt::While { .. })), persistent);
        assert!(matches!(producer.last(), Some(Stmt::While { .. })));
    }
}

fn specialized(t: Target) -> Target {
    Target {
        warp_specialize: true,
        ..t
    }
}

/// The warp-specialized matmul in the simulator, its producer and consumers taking turns at
/// their mbarriers, against the interpreter: ragged M, N and K, K shorter than the ring,
/// leaky ReLU, one warpgroup of consumers or two, plain and persistent (each program walking
/// several tiles with its ring going on).
#[test]
fn the_warp_specialized_matmul_matches_the_interpreter() {
    let mut rng = Rng::new(47);
    let relu = MatmulMeta {
        activation: Some(Activation::LeakyRelu),
        ..f32_out(64, 128, 64)
    };
    let cases = [
        (f32_out(128, 128, 64), (300, 208, 144), specialized(hopper(8, 3)), 1),
        (
            f32_out(128, 128, 64),
            (300, 208, 144),
            specialized(persistent(hopper(8, 3))),
            4,
        ),
        (f32_out(64, 64, 32), (150, 112, 80), specialized(hopper(4, 4)), 1),
        (
            f32_out(64, 64, 32),
            (150, 112, 80),
            specialized(persistent(hopper(4, 2))),
            3,
        ),
        (relu, (130, 272, 48), specialized(persistent(hopper(4, 3))), 2),
        // One K step, and more programs than tiles (two walk none).
        (f32_out(64, 64, 32), (100, 112, 16), specialized(hopper(4, 3)), 1),
        (
            f32_out(64, 64, 32),
            (100, 112, 16),
            specialized(persistent(hopper(4, 3))),
            6,
        ),
    ];
    for (meta, shape, target, programs) in &cases {
        check(meta, *shape, target, *programs, &mut rng);
    }
}

/// The simulator catches a specialization that breaks its protocol: consumers that never
/// free a stage leave the producer waiting forever (a hang), a producer that does not
/// wait for a free stage arrives on a full one again before its phase completes, and
/// consumers that free a stage before their MMAs that read it are waited for let the
/// producer copy into it while they may still read it.
#[test]
fn a_broken_specialization_is_caught() {
    let meta = MatmulMeta {
        output: F32,
        ..MatmulMeta::fp16(64, 64, 32)
    };
    let t = specialized(hopper(4, 2));
    let mut rng = Rng::new(5);
    let err = run(&meta, (64, 64, 256), &t, 1, &mut rng, &mut |s| {
        if matches!(s, Stmt::MbarrierArrive { .. }) {
            *s = Stmt::Comment("no arrival".into());
        }
    })
    .unwrap_err();
    assert!(err.contains("neither can go on"), "{err}");
    let mut waits = 0;
    let err = run(&meta, (64, 64, 256), &t, 1, &mut rng, &mut |s| {
        if let Stmt::Specialized { producer, .. } = s {
            rutile_ir::thread::walk_stmts_mut(producer, &mut |s| {
                if matches!(s, Stmt::MbarrierWait { .. }) {
                    *s = Stmt::Comment("no wait".into());
                    waits += 1;
                }
            });
        }
    })
    .unwrap_err();
    assert_eq!(waits, 1);
    assert!(err.contains("past the 1 its phase expects"), "{err}");
    // Consumers that free a stage before waiting for the MMAs that read it: the producer's
    // next copy into the stage is issued while they may still read it.
    let mut moved = false;
    let err = run(&meta, (64, 64, 256), &t, 1, &mut rng, &mut |s| {
        if let Stmt::Specialized { consumer, .. } = s {
            moved |= release_before_the_wait(consumer);
        }
    })
    .unwrap_err();
    assert!(moved);
    assert!(err.contains("freed too early"), "{err}");
}

/// A warpgroup MMA's operands may be read by the hardware until its wait: the `cp.async`
/// ring of a matmul without TMA whose wait for the MMAs is taken out refills a stage they
/// read, and the simulator faults that write, naming it (the results would be wrong too, but
/// not say why).
#[test]
fn an_mma_operand_overwritten_before_its_wait_is_caught() {
    let meta = MatmulMeta {
        output: F32,
        ..MatmulMeta::fp16(64, 64, 32)
    };
    let t = Target {
        tma: false,
        ..hopper(4, 2)
    };
    let mut rng = Rng::new(6);
    run(&meta, (64, 64, 256), &t, 1, &mut rng, &mut |_| {}).unwrap();
    let mut waits = 0;
    let err = run(&meta, (64, 64, 256), &t, 1, &mut rng, &mut |s| {
        if matches!(s, Stmt::WgmmaWait { .. }) {
            *s = Stmt::Comment("no wait".into());
            waits += 1;
        }
    })
    .unwrap_err();
    assert!(waits > 0);
    assert!(
        err.contains("written while a wgmma that reads it is not yet waited for"),
        "{err}"
    );
}

/// Moves the first stage release (an mbarrier arrival) of `stmts` or the loops in them
/// before the wgmma wait that precedes it; whether it found one.
fn release_before_the_wait(stmts: &mut Vec<Stmt>) -> bool {
    if let Some(arrive) = stmts.iter().position(|s| matches!(s, Stmt::MbarrierArrive { .. })) {
        if let Some(wait) = stmts[..arrive]
            .iter()
            .rposition(|s| matches!(s, Stmt::WgmmaWait { .. }))
        {
            let release = stmts.remove(arrive);
            stmts.insert(wait, release);
            return true;
        }
    }
    stmts.iter_mut().any(|s| match s {
        Stmt::While { body, .. } => release_before_the_wait(body),
        Stmt::If {
            then_body, else_body, ..
        } => release_before_the_wait(then_body) || release_before_the_wait(else_body),
        _ => false,
    })
}

/// Warp specialization needs every operand through TMA: without it (or without a
/// warpgroup's worth of warps) the loop is lowered as before, and a persistent
/// specialization-less kernel keeps the whole program's barrier at the end of a tile.
#[test]
fn without_tma_there_is_no_producer() {
    let kernel = matmul(&MatmulMeta::fp16(64, 64, 32)).unwrap();
    let args = row_major_matmul_args(256, 256, 256);
    for t in [
        Target {
            tma: false,
            ..hopper(4, 3)
        },
        hopper(2, 3),
        Target {
            warp_specialize: false,
            ..hopper(4, 3)
        },
    ] {
        let t = Target {
            warp_specialize: t.warp_specialize || t.num_warps != 4 || !t.tma,
            ..t
        };
        let tk = lower(&kernel, &t, &runtime_spec(&args)).unwrap();
        assert_eq!(tk.producer_warps, 0);
        assert_eq!(count(&tk, |s| matches!(s, Stmt::Specialized { .. })), 0);
    }
    let ws = lower(
        &kernel,
        &Target {
            warp_specialize: true,
            ..hopper(4, 3)
        },
        &runtime_spec(&args),
    )
    .unwrap();
    assert_eq!(ws.producer_warps, 4);
}

/// `C = A (B_0 + B_1 + ...)`, the `B_s` row blocks of `B`: `A` loaded once before a
/// warp-specialized walk over them (as attention's Q), its columns from `K` on masked off
/// and filled with `other`. With `other` 0 the producer copies `A` through TMA, whose zero
/// fill the mask's then equals (`lower/staged.rs`); with 1 it may not (the copy would fill
/// zeros where the load gives ones), and the consumers load and store it themselves. Both
/// simulated equal to the interpreter, on a plain grid and a persistent one.
#[test]
fn an_invariant_operand_is_copied_only_where_its_fill_is_zero() {
    use rutile_ir::ir::Kernel;
    use rutile_ir::thread::Memory;
    use rutile_ir::ScalarType::F16;
    let (bm, bn, bk) = (64i32, 64i32, 32i32);
    let kernel = |other: f64| {
        Kernel::build("invariant_a", |k| {
            let a_ptr = k.arg_ptr("a_ptr", F16);
            let b_ptr = k.arg_ptr("b_ptr", F16);
            let c_ptr = k.arg_ptr("c_ptr", F32);
            let (m, kk, steps) = (k.arg_i32("M"), k.arg_i32("K"), k.arg_i32("steps"));
            let (stride_am, stride_bk, stride_cm) =
                (k.arg_i32("stride_am"), k.arg_i32("stride_bk"), k.arg_i32("stride_cm"));
            let offs_m = k.program_id(0) * bm + k.arange(0, bm);
            let offs_k = k.arange(0, bk);
            let offs_n = k.arange(0, bn);
            let a_ptrs = a_ptr + (offs_m.expand_dims(1) * stride_am + offs_k.expand_dims(0));
            let a_in = offs_m.expand_dims(1).lt(m) & offs_k.expand_dims(0).lt(kk);
            let a = k.load_masked(a_ptrs, a_in, other);
            let b_ptrs = b_ptr + (offs_k.expand_dims(1) * stride_bk + offs_n.expand_dims(0));
            let acc = k.zeros(&[bm as u32, bn as u32], F32);
            let out = k.for_range(0, steps, 1, &[acc, b_ptrs], |_, c| {
                let b = k.load(c[1]);
                vec![k.dot_acc(a, b, c[0]), c[1] + stride_bk * bk]
            });
            let c_ptrs = c_ptr + offs_m.expand_dims(1) * stride_cm + offs_n.expand_dims(0);
            k.store_masked(c_ptrs, out[0], offs_m.expand_dims(1).lt(m));
        })
        .unwrap()
    };
    // A is 100 x 40 (row stride 64; rows past 100 and columns past 40 masked), B 192 x 64
    // (three row blocks), C 100 x 64.
    let (m, kd, steps) = (100usize, 40usize, 3usize);
    let int = |v: usize| ArgValue::Int(v as i64);
    let ptr = |buffer| ArgValue::Ptr { buffer, offset: 0 };
    let args = vec![
        ptr(0),
        ptr(1),
        ptr(2),
        int(m),
        int(kd),
        int(steps),
        int(64),
        int(64),
        int(64),
    ];
    let mut rng = Rng::new(83);
    for other in [0.0, 1.0] {
        let kernel = kernel(other);
        // (`tma_outer`: B's rows, which no mask bounds, take their extent from the launch.)
        let outer = |t: Target| Target { tma_outer: true, ..t };
        for target in [
            outer(specialized(hopper(4, 2))),
            outer(specialized(persistent(hopper(4, 2)))),
        ] {
            let at = format!("other {other}, persistent {}", target.persistent);
            let buffers = vec![
                float_buffer(&mut rng, F16, m * 64),
                float_buffer(&mut rng, F16, steps * 64 * 64),
                HostBuffer::zeros(F32, m * 64),
            ];
            let grid = [(m as u32).div_ceil(bm as u32), 1, 1];
            let mut want = buffers.clone();
            interp::run(&kernel, grid, &args, &mut want).unwrap();
            let tk = lower(&kernel, &target, &runtime_spec(&args)).unwrap();
            assert!(tk.producer_warps > 0, "{at}: no producer");
            // The consumers' global loads (A's; B comes through the producer's ring).
            let mut loads = 0;
            tk.walk(&mut |s| {
                loads += matches!(
                    s,
                    Stmt::Load {
                        mem: Memory::Global { .. },
                        ..
                    }
                ) as usize
            });
            if other == 0.0 {
                assert_eq!(loads, 0, "{at}: A loaded by the consumers");
            } else {
                assert!(loads > 0, "{at}: A not loaded by the consumers");
            }
            let mut launch = args.clone();
            let launched = match tk.persistent {
                Some(_) => {
                    launch.extend(grid.iter().map(|&g| ArgValue::Int(g as i64)));
                    [1, 1, 1]
                }
                None => grid,
            };
            let mut got = buffers.clone();
            simt::run_threads(&tk, launched, &launch, &mut got).unwrap_or_else(|e| panic!("{at}: {e}"));
            assert_close_to_largest(&got[2], &want[2], 1e-5, &at);
        }
    }
}

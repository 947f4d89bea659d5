//! `dot` on Vulkan's cooperative matrices (`Stmt::CoopLoad`, `CoopMulAdd`, `CoopStore`):
//! the matmul seed lowered for a target that lists f16 x f16 -> f32 shapes, run in the SIMT
//! simulator (which models each cooperative matrix as a whole matrix per warp and sums its
//! multiply-adds in the interpreter's order) and compared with the interpreter bit for bit:
//! ragged sizes, transposed operands, leaky ReLU, f16 outputs, every warp count of the seed
//! configurations; the accumulator stays in cooperative matrices across the K loop; a wrong
//! stride or offset gives wrong results; dots the shapes do not fit take the FMA path.

use half::f16;
use rutile_ir::interp::{self, simt, ArgValue, HostBuffer};
use rutile_ir::lower::lower;
use rutile_ir::seeds::{matmul, matmul_grid, Activation, MatmulMeta, MATMUL_CONFIGS};
use rutile_ir::target::{CoopMatrixShape, Specialization, Target};
use rutile_ir::testing::Rng;
use rutile_ir::thread::{Stmt, ThreadKernel};
use rutile_ir::ScalarType::{self, BF16, F16, F32};
use rutile_ir::{DotPrecision, Kernel};

/// The shapes the H100's Vulkan driver lists for f16 inputs and an f32 accumulator.
fn h100_shapes() -> Vec<CoopMatrixShape> {
    [(16, 16, 16), (16, 8, 16)]
        .iter()
        .map(|&(m, n, k)| CoopMatrixShape {
            m,
            n,
            k,
            ab: F16,
            acc: F32,
        })
        .collect()
}

/// A Vulkan device with cooperative matrices: subgroups of 32, 48 KiB of workgroup memory,
/// one variable per shared buffer.
fn target(num_warps: u32) -> Target {
    Target {
        reuse_shared: rutile_ir::target::SharedReuse::SameType,
        coop_matrix: h100_shapes(),
        ..Target::nvidia(num_warps, 48 * 1024)
    }
}

fn ptr(buffer: usize) -> ArgValue {
    ArgValue::Ptr { buffer, offset: 0 }
}

fn count_stmts(tk: &ThreadKernel, f: impl Fn(&Stmt) -> bool) -> usize {
    let mut n = 0;
    tk.walk(&mut |s| n += f(s) as usize);
    n
}

/// `tk` with the first statement `f` changes (it returns whether it did); a failure when it
/// changes none.
fn mutate_first(tk: &ThreadKernel, f: &mut dyn FnMut(&mut Stmt) -> bool) -> ThreadKernel {
    let mut k = tk.clone();
    let mut done = false;
    k.walk_mut(&mut |s| {
        if !done {
            done = f(s);
        }
    });
    assert!(done, "nothing to mutate");
    k
}

/// Whether `s` loads from global memory.
fn is_shared_store(s: &Stmt) -> bool {
    matches!(
        s,
        Stmt::Store {
            mem: rutile_ir::thread::Memory::Shared { .. },
            ..
        }
    )
}

/// The bodies of the kernel's top-level loops, in order.
fn top_loops(tk: &ThreadKernel) -> Vec<&Vec<Stmt>> {
    tk.body
        .iter()
        .filter_map(|s| match s {
            Stmt::While { body, .. } => Some(body),
            _ => None,
        })
        .collect()
}

/// The global loads `s` makes: one for a load; for a branch, those of its first side (the
/// pipeline's unpredicated loads, whose other side loads the same under predicates).
fn global_loads(s: &Stmt) -> usize {
    match s {
        Stmt::Load {
            mem: rutile_ir::thread::Memory::Global { .. },
            ..
        } => 1,
        Stmt::If { then_body, .. } => then_body.iter().map(global_loads).sum(),
        _ => 0,
    }
}

fn is_global_load(s: &Stmt) -> bool {
    global_loads(s) > 0
}

fn mul_adds(tk: &ThreadKernel) -> usize {
    count_stmts(tk, |s| matches!(s, Stmt::CoopMulAdd { .. }))
}

fn f16s(rng: &mut Rng, n: usize) -> HostBuffer {
    let v = rng.f32s(n, -1.0, 1.0);
    HostBuffer::from_slice(&v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>())
}

/// A matmul launch: kernel, inputs, arguments, grid and the interpreter's results.
struct Case {
    kernel: Kernel,
    buffers: Vec<HostBuffer>,
    args: Vec<ArgValue>,
    grid: [u32; 3],
    want: Vec<HostBuffer>,
    spec: Specialization,
}

/// The seed of `meta` on `m x n x k`, A and/or B column-major.
fn case(meta: &MatmulMeta, (m, n, k): (usize, usize, usize), (a_col, b_col): (bool, bool), rng: &mut Rng) -> Case {
    let kernel = matmul(meta).unwrap();
    let buffers = vec![
        f16s(rng, m * k),
        f16s(rng, k * n),
        HostBuffer::zeros(meta.output, m * n),
    ];
    let (sam, sak) = if a_col { (1, m) } else { (k, 1) };
    let (sbk, sbn) = if b_col { (1, k) } else { (n, 1) };
    let ints = [m, n, k, sam, sak, sbk, sbn, n, 1];
    let mut args = vec![ptr(0), ptr(1), ptr(2)];
    args.extend(ints.iter().map(|&v| ArgValue::Int(v as i64)));
    let spec = rutile_ir::testing::runtime_spec(&args);
    let grid = [matmul_grid(meta, m as u32, n as u32), 1, 1];
    let mut want = buffers.clone();
    interp::run(&kernel, grid, &args, &mut want).unwrap();
    Case {
        kernel,
        buffers,
        args,
        grid,
        want,
        spec,
    }
}

/// Runs `tk` on `c`'s inputs in the simulator: its output bytes, or the fault.
fn run(tk: &ThreadKernel, c: &Case) -> Result<Vec<u8>, String> {
    let mut got = c.buffers.clone();
    simt::run_threads(tk, c.grid, &c.args, &mut got).map_err(|e| e.to_string())?;
    Ok(got[2].as_bytes().to_vec())
}

/// Lowers `c` for `target`, checks it runs on cooperative matrices and equals the
/// interpreter exactly; returns the kernel.
fn check(c: &Case, target: &Target, at: &str) -> ThreadKernel {
    let tk = lower(&c.kernel, target, &c.spec).unwrap_or_else(|e| panic!("{at}: {e}"));
    assert!(mul_adds(&tk) > 0, "{at}: not on cooperative matrices");
    let got = run(&tk, c).unwrap_or_else(|e| panic!("{at}: {e}"));
    assert!(
        got == c.want[2].as_bytes(),
        "{at}: results differ from the interpreter's"
    );
    tk
}

#[test]
fn matmul_on_cooperative_matrices_equals_the_interpreter() {
    let mut rng = Rng::new(41);
    let f32_out = |bm, bn, bk| MatmulMeta {
        output: F32,
        ..MatmulMeta::fp16(bm, bn, bk)
    };
    let relu = MatmulMeta {
        activation: Some(Activation::LeakyRelu),
        ..MatmulMeta::fp16(64, 64, 32)
    };
    let cases: [(MatmulMeta, (usize, usize, usize), u32); 8] = [
        (f32_out(32, 32, 16), (32, 32, 16), 1),
        (f32_out(64, 64, 32), (100, 77, 50), 4),
        (f32_out(32, 64, 32), (17, 33, 129), 2),
        (f32_out(64, 32, 16), (64, 64, 64), 8),
        (MatmulMeta::fp16(32, 32, 32), (40, 48, 70), 4),
        (relu, (65, 64, 96), 4),
        (f32_out(128, 128, 32), (130, 128, 64), 4),
        // What the autotuner chose on an H100 through Vulkan at 4096³: 16-wide K steps,
        // two stages of operands, 16 subgroups (ragged in every dimension).
        (MatmulMeta::fp16(128, 256, 16), (130, 260, 40), 16),
    ];
    for (meta, shape, warps) in cases {
        let c = case(&meta, shape, (false, false), &mut rng);
        let at = format!(
            "{}x{}x{} on {warps} warps, {shape:?}, -> {}",
            meta.block_m, meta.block_n, meta.block_k, meta.output
        );
        check(&c, &target(warps), &at);
    }
}

/// Column-major A, B or both (the tutorial's transposed-B case): staged row-major as the
/// FMA path stages them, B's rows padded to keep 16-byte strides.
#[test]
fn transposed_operands_on_cooperative_matrices() {
    let mut rng = Rng::new(42);
    let meta = MatmulMeta {
        activation: Some(Activation::LeakyRelu),
        ..MatmulMeta::fp16(64, 64, 32)
    };
    for layout in [(false, true), (true, false), (true, true)] {
        let c = case(&meta, (96, 80, 64), layout, &mut rng);
        check(&c, &target(4), &format!("A col, B col: {layout:?}"));
    }
}

/// Every seed configuration runs on cooperative matrices (one program each, to keep the
/// simulator quick) where its operands leave room in 48 KiB of workgroup memory for the
/// accumulator's exchange, and on the FMA path otherwise.
#[test]
fn seed_configurations_on_cooperative_matrices() {
    let mut rng = Rng::new(43);
    for &(bm, bn, bk, stages, warps) in &MATMUL_CONFIGS {
        let meta = MatmulMeta::fp16(bm, bn, bk);
        // As the runtime launches them: the operands `stages - 1` iterations ahead (at most
        // two), over an odd count of K steps (the unrolled loop, then the last step).
        let t = Target {
            num_stages: stages,
            ..target(warps)
        };
        let c = case(
            &meta,
            (bm as usize, bn as usize, 3 * bk as usize),
            (false, false),
            &mut rng,
        );
        let fma = Target {
            coop_matrix: vec![],
            ..t.clone()
        };
        match lower(&c.kernel, &t, &c.spec) {
            // Where staging A and B alone takes all 48 KiB, there is no room to move the
            // accumulator out of its matrices: the FMA path, which needs none.
            Ok(tk) if mul_adds(&tk) == 0 => assert!(
                (bm * bk + bk * bn) * 2 >= 48 * 1024,
                "{bm}x{bn}x{bk} on {warps} warps: not on cooperative matrices"
            ),
            Ok(_) => {
                check(&c, &t, &format!("{bm}x{bn}x{bk} on {warps} warps"));
            }
            Err(e) => assert!(
                lower(&c.kernel, &fma, &c.spec).is_err(),
                "{bm}x{bn}x{bk}: fits on the FMA path but not on cooperative matrices: {e}"
            ),
        }
    }
}

/// In the seed's K loop the accumulator is carried in cooperative matrices: the loop body
/// has multiply-adds and no cooperative stores (those happen once, after the loop), and the
/// accumulator starts as zeros without touching memory.
#[test]
fn the_accumulator_stays_in_cooperative_matrices_across_the_loop() {
    let mut rng = Rng::new(44);
    let c = case(&MatmulMeta::fp16(64, 64, 32), (64, 64, 128), (false, false), &mut rng);
    let tk = check(&c, &target(4), "64x64x32");
    fn count(stmts: &[Stmt], inside: bool, n: &mut [usize; 3]) {
        for s in stmts {
            match s {
                Stmt::CoopMulAdd { .. } if inside => n[0] += 1,
                Stmt::CoopStore { .. } if inside => n[1] += 1,
                Stmt::CoopStore { .. } => n[2] += 1,
                Stmt::While { cond_body, body, .. } => {
                    count(cond_body, true, n);
                    count(body, true, n);
                }
                Stmt::If {
                    then_body, else_body, ..
                } => {
                    count(then_body, inside, n);
                    count(else_body, inside, n);
                }
                _ => {}
            }
        }
    }
    let mut n = [0; 3];
    count(&tk.body, false, &mut n);
    // 4 warps of 2x2 tiles of 16x16, two k-steps of 16 per BLOCK_K of 32.
    assert_eq!(n[0], 2 * 2 * 2, "multiply-adds in the loop");
    assert_eq!(n[1], 0, "the loop stores no accumulator");
    assert_eq!(n[2], 4, "one store per tile after the loop");
    assert_eq!(count_stmts(&tk, |s| matches!(s, Stmt::CoopZero { .. })), 4);
}

/// The simulator's model catches a wrong stride, a swapped layout and a wrong offset: the
/// results change or the run faults.
#[test]
fn the_cooperative_matrix_model_catches_wrong_strides_and_layouts() {
    let mut rng = Rng::new(45);
    let c = case(&MatmulMeta::fp16(64, 64, 32), (64, 64, 64), (false, false), &mut rng);
    let tk = check(&c, &target(4), "64x64x32");
    let agrees = |tk: &ThreadKernel| run(tk, &c).is_ok_and(|g| g == c.want[2].as_bytes());
    let mutate = |f: &mut dyn FnMut(&mut Stmt) -> bool| mutate_first(&tk, f);
    // A's stride one row of 8 elements short (still 16-byte aligned).
    let short = mutate(&mut |s| match s {
        Stmt::CoopLoad { stride, alloc, .. } if *alloc == 0 => {
            *stride -= 8;
            true
        }
        _ => false,
    });
    assert!(!agrees(&short), "a wrong A stride went unnoticed");
    // B's first tile read column-major.
    let swapped = mutate(&mut |s| match s {
        Stmt::CoopLoad { row_major, alloc, .. } if *alloc == 1 => {
            *row_major = false;
            true
        }
        _ => false,
    });
    assert!(!agrees(&swapped), "a transposed B tile went unnoticed");
    // The accumulator's store with the wrong stride: out of place or out of bounds.
    let store = mutate(&mut |s| match s {
        Stmt::CoopStore { stride, .. } => {
            *stride += 4;
            true
        }
        _ => false,
    });
    assert!(!agrees(&store), "a wrong accumulator stride went unnoticed");
}

/// What the shapes do not fit stays off the cooperative matrices, with the same results:
/// a target without them, bf16 inputs, f32 inputs, a tile that does not split into 16x16
/// (or 16x8) matrices over the warps, a K step shorter than 16.
#[test]
fn dots_the_shapes_do_not_fit_take_the_fma_path() {
    let mut rng = Rng::new(46);
    let run_fma = |meta: &MatmulMeta, t: &Target, shape: (usize, usize, usize), rng: &mut Rng| {
        let kernel = matmul(meta).unwrap();
        let (m, n, k) = shape;
        let mk = |elem: ScalarType, len: usize, rng: &mut Rng| match elem {
            F16 => f16s(rng, len),
            BF16 => HostBuffer::from_slice(
                &rng.f32s(len, -1.0, 1.0)
                    .iter()
                    .map(|&x| half::bf16::from_f32(x))
                    .collect::<Vec<_>>(),
            ),
            _ => HostBuffer::from_slice(&rng.f32s(len, -1.0, 1.0)),
        };
        let buffers = vec![
            mk(meta.input, m * k, rng),
            mk(meta.input, k * n, rng),
            HostBuffer::zeros(meta.output, m * n),
        ];
        let args = rutile_ir::testing::row_major_matmul_args(m, n, k);
        let grid = [matmul_grid(meta, m as u32, n as u32), 1, 1];
        let mut want = buffers.clone();
        interp::run(&kernel, grid, &args, &mut want).unwrap();
        let tk = lower(&kernel, t, &Specialization::none(args.len())).unwrap();
        assert_eq!(mul_adds(&tk), 0, "{meta:?}");
        let mut got = buffers.clone();
        simt::run_threads(&tk, grid, &args, &mut got).unwrap();
        assert!(got[2].as_bytes() == want[2].as_bytes(), "{meta:?}");
    };
    let none = Target {
        coop_matrix: vec![],
        ..target(4)
    };
    run_fma(&MatmulMeta::fp16(32, 32, 32), &none, (32, 32, 32), &mut rng);
    let bf = MatmulMeta {
        input: BF16,
        output: F32,
        ..MatmulMeta::fp16(32, 32, 32)
    };
    run_fma(&bf, &target(4), (32, 32, 32), &mut rng);
    let f32_in = MatmulMeta {
        input: F32,
        output: F32,
        ..MatmulMeta::fp16(32, 32, 32)
    };
    run_fma(&f32_in, &target(4), (32, 32, 32), &mut rng);
    let tf32 = MatmulMeta {
        input_precision: DotPrecision::Tf32,
        ..f32_in
    };
    run_fma(&tf32, &target(4), (32, 32, 32), &mut rng);
    // 16 rows over 4 warps of 16-row matrices.
    run_fma(&MatmulMeta::fp16(16, 16, 32), &target(4), (16, 16, 32), &mut rng);
}

/// The K loop's operand loads are pipelined through registers (Vulkan has no asynchronous
/// copy): with two stages the loads of the first iteration come before the loop, each
/// iteration stores what it loaded one iteration earlier and has one barrier, and the
/// results stay exact on ragged sizes (the prefetch past the end and masked elements are
/// zeros).
#[test]
fn the_k_loop_prefetches_its_operands_into_registers() {
    let mut rng = Rng::new(47);
    let two_stages = Target {
        num_stages: 2,
        ..target(4)
    };
    let c = case(&MatmulMeta::fp16(64, 64, 32), (64, 64, 128), (false, false), &mut rng);
    let tk = check(&c, &two_stages, "64x64x32");
    let at = tk.body.iter().position(|s| matches!(s, Stmt::While { .. })).unwrap();
    let before = tk.body[..at].iter().map(global_loads).sum::<usize>();
    assert!(before > 0, "no loads before the loop");
    let Stmt::While { body, .. } = &tk.body[at] else {
        unreachable!()
    };
    let barriers = body.iter().filter(|s| matches!(s, Stmt::Barrier)).count();
    assert_eq!(barriers, 1, "barriers per iteration");
    assert_eq!(
        body.iter().map(global_loads).sum::<usize>(),
        before,
        "loads per iteration"
    );
    let first_load = body.iter().position(is_global_load).unwrap();
    let first_mul_add = body.iter().position(|s| matches!(s, Stmt::CoopMulAdd { .. })).unwrap();
    assert!(first_load < first_mul_add, "the next iteration's loads come first");
    for (shape, layout) in [
        ((100, 72, 80), (false, false)),
        ((17, 33, 129), (true, true)),
        ((65, 64, 96), (false, true)),
    ] {
        let c = case(&MatmulMeta::fp16(64, 64, 32), shape, layout, &mut rng);
        check(&c, &two_stages, &format!("{shape:?} {layout:?}"));
    }
}

/// With `num_stages` 3 the K loop's operands run two iterations ahead, in two sets of
/// prefetch registers: the body is lowered twice a trip, each copy storing its own set
/// after one barrier, and an odd last iteration runs in a loop of its own after it. The
/// results stay exact for trip counts odd and even, one and none, ragged or not.
#[test]
fn two_iterations_ahead_the_body_runs_twice_a_trip() {
    let mut rng = Rng::new(53);
    let two_ahead = |warps| Target {
        num_stages: 3,
        ..target(warps)
    };
    let c = case(&MatmulMeta::fp16(64, 64, 32), (64, 64, 128), (false, false), &mut rng);
    let tk = check(&c, &two_ahead(4), "64x64x32, four trips");
    let loops = top_loops(&tk);
    assert_eq!(
        loops.len(),
        3,
        "the unrolled trips whose prefetches all hold, the other trips, the odd last iteration"
    );
    let (unmasked, twice, once) = (loops[0], loops[1], loops[2]);
    assert_eq!(
        unmasked.iter().map(global_loads).sum::<usize>(),
        twice.iter().map(global_loads).sum::<usize>(),
        "loads per trip, unmasked and not"
    );
    let count = |b: &[Stmt], f: &dyn Fn(&Stmt) -> bool| b.iter().filter(|s| f(s)).count();
    let barrier = |s: &Stmt| matches!(s, Stmt::Barrier);
    let mul_add = |s: &Stmt| matches!(s, Stmt::CoopMulAdd { .. });
    assert_eq!((count(twice, &barrier), count(once, &barrier)), (2, 1), "barriers");
    assert_eq!(count(twice, &mul_add), 2 * count(once, &mul_add), "multiply-adds");
    let loads = once.iter().map(global_loads).sum::<usize>();
    assert!(loads > 0);
    assert_eq!(
        twice.iter().map(global_loads).sum::<usize>(),
        2 * loads,
        "loads per trip"
    );
    let at = tk.body.iter().position(|s| matches!(s, Stmt::While { .. })).unwrap();
    assert_eq!(
        tk.body[..at].iter().map(global_loads).sum::<usize>(),
        2 * loads,
        "two iterations loaded first"
    );
    // Each copy of the body stores the registers its own set was loaded into.
    let stored = |b: &[Stmt]| -> Vec<rutile_ir::thread::Reg> {
        b.iter()
            .filter(|s| is_shared_store(s))
            .flat_map(|s| match s {
                Stmt::Store { values, .. } => values.clone(),
                _ => Vec::new(),
            })
            .collect()
    };
    let second = twice.iter().position(barrier).unwrap() + 1;
    let (first_set, second_set) = (stored(&twice[..second]), stored(&twice[second..]));
    assert!(!first_set.is_empty() && first_set.iter().all(|r| !second_set.contains(r)));
    assert_eq!(stored(once), first_set, "the last odd iteration stores the first set");
    for (meta, warps, shape, layout) in [
        (MatmulMeta::fp16(64, 64, 32), 4, (64, 64, 32), (false, false)),
        (MatmulMeta::fp16(64, 64, 32), 4, (64, 64, 96), (false, false)),
        (MatmulMeta::fp16(64, 64, 32), 4, (100, 72, 80), (false, true)),
        (MatmulMeta::fp16(64, 64, 32), 4, (17, 33, 129), (true, true)),
        (MatmulMeta::fp16(64, 64, 32), 4, (40, 24, 0), (false, false)),
        (MatmulMeta::fp16(128, 256, 16), 16, (130, 260, 40), (false, false)),
        (MatmulMeta::fp16(128, 256, 16), 16, (130, 260, 64), (true, false)),
    ] {
        let c = case(&meta, shape, layout, &mut rng);
        check(&c, &two_ahead(warps), &format!("{shape:?} {layout:?} on {warps} warps"));
    }
}

/// With one stage the K loop loads each iteration's operands at its top, right before it
/// stores them into shared memory: nothing is loaded before the loop, no load is in flight
/// at a barrier, the body runs once a trip; and the results stay exact.
#[test]
fn one_stage_loads_in_the_iteration_that_stores() {
    let mut rng = Rng::new(59);
    let one_stage = |warps| Target {
        num_stages: 1,
        ..target(warps)
    };
    let c = case(&MatmulMeta::fp16(64, 64, 32), (64, 64, 128), (false, false), &mut rng);
    let tk = check(&c, &one_stage(4), "64x64x32, four trips, one stage");
    let loops = top_loops(&tk);
    assert_eq!(loops.len(), 1, "one loop, not unrolled");
    let at = tk.body.iter().position(|s| matches!(s, Stmt::While { .. })).unwrap();
    assert_eq!(
        tk.body[..at].iter().map(global_loads).sum::<usize>(),
        0,
        "loads before the loop"
    );
    let body = loops[0];
    let position = |f: &dyn Fn(&Stmt) -> bool| body.iter().position(f).unwrap();
    let last_load = body.iter().rposition(is_global_load).unwrap();
    let first_store = position(&is_shared_store);
    let barrier = position(&|s| matches!(s, Stmt::Barrier));
    assert!(
        last_load < first_store && first_store < barrier,
        "loads, stores, barrier"
    );
    assert_eq!(
        body.iter().filter(|s| matches!(s, Stmt::Barrier)).count(),
        1,
        "one barrier"
    );
    for (meta, warps, shape, layout) in [
        (MatmulMeta::fp16(64, 64, 32), 4, (64, 64, 32), (false, false)),
        (MatmulMeta::fp16(64, 64, 32), 4, (100, 72, 80), (false, true)),
        (MatmulMeta::fp16(64, 64, 32), 4, (17, 33, 129), (true, true)),
        (MatmulMeta::fp16(64, 64, 32), 4, (40, 24, 0), (false, false)),
        (MatmulMeta::fp16(128, 256, 16), 16, (130, 260, 40), (false, false)),
    ] {
        let c = case(&meta, shape, layout, &mut rng);
        check(
            &c,
            &one_stage(warps),
            &format!("{shape:?} {layout:?} on {warps} warps, one stage"),
        );
    }
}

/// Where two stages of the operands do not fit workgroup memory beside the accumulator's
/// exchange (128 x 256 x 32 in 48 KiB), the K loop keeps one stage and still prefetches into
/// registers: each iteration waits at a barrier for every warp to have read the stage,
/// stores the operands loaded an iteration earlier, waits again, then loads the next
/// iteration's before its multiply-adds. (Measured by hand on an H200 through NVIDIA's
/// Vulkan driver, this structure ran 128 x 256 x 32 at 0.59 ms where the per-iteration
/// staging it replaces took 0.92: `docs/performance.md`.) Exact on ragged sizes.
#[test]
fn one_shared_stage_still_prefetches_when_two_do_not_fit() {
    let mut rng = Rng::new(61);
    let one_ahead = Target {
        num_stages: 2,
        ..target(16)
    };
    let meta = MatmulMeta::fp16(128, 256, 32);
    let c = case(&meta, (128, 256, 128), (false, false), &mut rng);
    let tk = check(&c, &one_ahead, "128x256x32, four trips");
    let operand_bytes: u32 = tk.shared.iter().filter(|a| a.elem == F16).map(|a| a.bytes()).sum();
    assert_eq!(
        operand_bytes,
        (128 * (32 + 8) + 32 * (256 + 8)) * 2,
        "one stage of A and B"
    );
    let at = tk.body.iter().position(|s| matches!(s, Stmt::While { .. })).unwrap();
    let before = tk.body[..at].iter().map(global_loads).sum::<usize>();
    assert!(before > 0, "the first iteration's operands are loaded before the loop");
    let loops = top_loops(&tk);
    let body = loops[loops.len() - 1];
    let barriers: Vec<usize> = (0..body.len()).filter(|&i| matches!(body[i], Stmt::Barrier)).collect();
    assert_eq!(barriers.len(), 2, "barriers per iteration");
    let first_store = body.iter().position(is_shared_store).unwrap();
    let last_store = body.iter().rposition(is_shared_store).unwrap();
    let first_load = body.iter().position(is_global_load).unwrap();
    let first_mul_add = body.iter().position(|s| matches!(s, Stmt::CoopMulAdd { .. })).unwrap();
    assert!(
        barriers[0] < first_store && last_store < barriers[1] && barriers[1] < first_load && first_load < first_mul_add,
        "barrier, stores, barrier, the next iteration's loads, multiply-adds"
    );
    assert_eq!(
        body.iter().map(global_loads).sum::<usize>(),
        before,
        "loads per iteration"
    );
    // The one stage's counters stay constant: no select advances them round the ring.
    let selects = body
        .iter()
        .filter(|s| {
            matches!(
                s,
                Stmt::Set {
                    expr: rutile_ir::thread::Expr::Select(..),
                    ..
                }
            )
        })
        .count();
    assert_eq!(selects, 0, "selects in the K loop's body");
    for (stages, shape, layout) in [
        (2, (130, 260, 72), (false, false)),
        (2, (100, 250, 40), (true, false)),
        (2, (128, 256, 16), (false, true)),
        (2, (60, 70, 0), (false, false)),
        (3, (130, 260, 72), (false, false)),
        (3, (128, 256, 96), (false, false)),
        (1, (130, 260, 72), (false, true)),
    ] {
        let c = case(&meta, shape, layout, &mut rng);
        let t = Target {
            num_stages: stages,
            ..target(16)
        };
        let tk = check(&c, &t, &format!("{shape:?} {layout:?}, num_stages {stages}"));
        // (B's tile is padded along the dimension it is contiguous in; A's rows always hold
        // its K, as A's matrices are loaded row-major.)
        let a_tile = 128 * (32 + 8);
        let b_tile = if layout.1 { 256 * (32 + 8) } else { 32 * (256 + 8) };
        let operand_bytes: u32 = tk.shared.iter().filter(|a| a.elem == F16).map(|a| a.bytes()).sum();
        assert_eq!(operand_bytes, (a_tile + b_tile) * 2, "{shape:?} {layout:?}: one stage");
    }
}

/// The verifier rejects what Vulkan or the statement's meaning forbids (a stride off 16-byte
/// boundaries, operands of the wrong roles), and the simulator an index that differs
/// between the lanes of a warp (a cooperative matrix is the whole warp's).
#[test]
fn malformed_cooperative_statements_are_rejected() {
    use rutile_ir::thread::{verify, Expr, Special};
    let mut rng = Rng::new(48);
    let c = case(&MatmulMeta::fp16(32, 32, 32), (32, 32, 32), (false, false), &mut rng);
    let tk = check(&c, &target(1), "32x32x32");
    let mutated = |f: &mut dyn FnMut(&mut Stmt) -> bool| mutate_first(&tk, f);
    let unaligned = mutated(&mut |s| match s {
        Stmt::CoopLoad { stride, .. } => {
            *stride += 4;
            true
        }
        _ => false,
    });
    let e = verify(&unaligned).unwrap_err();
    assert!(e.contains("multiple of 16 bytes"), "{e}");
    let swapped = mutated(&mut |s| match s {
        Stmt::CoopMulAdd { a, b, .. } => {
            std::mem::swap(a, b);
            true
        }
        _ => false,
    });
    let e = verify(&swapped).unwrap_err();
    assert!(e.contains("roles"), "{e}");
    // A store at stride 0 would write one line many times (only a load may broadcast), and
    // an element-wise product takes accumulators of one shape, not an A and a B.
    let broadcast_store = mutated(&mut |s| match s {
        Stmt::CoopStore { stride, .. } => {
            *stride = 0;
            true
        }
        _ => false,
    });
    let e = verify(&broadcast_store).unwrap_err();
    assert!(e.contains("stride 0"), "{e}");
    let product_of_operands = mutated(&mut |s| match *s {
        Stmt::CoopMulAdd { d, a, b, .. } => {
            *s = Stmt::CoopMul { d, a, b };
            true
        }
        _ => false,
    });
    let e = verify(&product_of_operands).unwrap_err();
    assert!(e.contains("coop_mul") && e.contains("accumulators of one shape"), "{e}");
    let mut tid = None;
    tk.walk(&mut |s| {
        if let Stmt::Set {
            dst,
            expr: Expr::Special(Special::ThreadId),
        } = s
        {
            tid = Some(*dst);
        }
    });
    let tid = tid.expect("a thread id register");
    let divergent = mutated(&mut |s| match s {
        Stmt::CoopLoad { index, .. } => {
            *index = tid;
            true
        }
        _ => false,
    });
    let e = run(&divergent, &c).unwrap_err();
    assert!(e.contains("differs within warp"), "{e}");
    // A load four elements (8 bytes) off a 16-byte boundary: the SPIR-V backend addresses
    // such buffers in 8-byte vectors and Vulkan wants rows on 16-byte boundaries.
    let mut misaligned = tk.clone();
    let four = misaligned
        .regs
        .append(rutile_ir::thread::RegData { ty: ScalarType::I32 });
    misaligned.body.insert(
        0,
        Stmt::Set {
            dst: four,
            expr: Expr::Const(rutile_ir::ir::Literal::Int(4)),
        },
    );
    let misaligned = mutate_first(&misaligned, &mut |s| match s {
        Stmt::CoopLoad { index, .. } => {
            *index = four;
            true
        }
        _ => false,
    });
    let e = run(&misaligned, &c).unwrap_err();
    assert!(e.contains("16-byte boundary"), "{e}");
}

/// Where its masks say when they hold, the K loop runs its trips in two loops: first those
/// whose prefetches all hold (the K tail's mask `offs_k < K - k * BLOCK_K` is true in every
/// element and the prefetched iteration is not past the end: a condition every thread
/// computes alike), their loads unpredicated; then the rest, whose loads run behind one
/// branch on the same condition: unpredicated on its first side, each under its own
/// predicate with zeros on the other. The results stay exact on ragged sizes, where the
/// second loop and the predicated side run.
#[test]
fn the_k_loop_runs_its_unmasked_trips_first() {
    let mut rng = Rng::new(59);
    let two_stages = Target {
        num_stages: 2,
        ..target(4)
    };
    let c = case(&MatmulMeta::fp16(64, 64, 32), (64, 64, 128), (false, false), &mut rng);
    let tk = check(&c, &two_stages, "64x64x32");
    let loops = top_loops(&tk);
    assert_eq!(loops.len(), 2, "the unmasked trips, then the others");
    let preds = |b: &[Stmt]| -> Vec<bool> {
        b.iter()
            .filter_map(|s| match s {
                Stmt::Load {
                    pred,
                    mem: rutile_ir::thread::Memory::Global { .. },
                    ..
                } => Some(pred.is_some()),
                _ => None,
            })
            .collect()
    };
    let unmasked = preds(loops[0]);
    assert!(
        !unmasked.is_empty() && unmasked.iter().all(|p| !p),
        "unpredicated: {unmasked:?}"
    );
    let branches: Vec<_> = loops[1]
        .iter()
        .filter_map(|s| match s {
            Stmt::If {
                then_body, else_body, ..
            } if is_global_load(s) => Some((then_body, else_body)),
            _ => None,
        })
        .collect();
    assert_eq!(branches.len(), 1, "one branch around the iteration's loads");
    let (fast, slow) = branches[0];
    assert_eq!(
        preds(fast),
        vec![false; unmasked.len()],
        "unpredicated where the masks hold"
    );
    assert_eq!(preds(slow), vec![true; unmasked.len()], "predicated otherwise");
    for shape in [(64, 64, 100), (33, 70, 31), (64, 64, 1), (64, 64, 64), (20, 20, 0)] {
        let c = case(&MatmulMeta::fp16(64, 64, 32), shape, (false, false), &mut rng);
        check(&c, &two_stages, &format!("{shape:?}"));
    }
}

/// How a [`k_loop_kernel`] masks its K tail.
#[derive(Clone, Copy)]
enum KBound {
    /// `shift + k0 + offs_k < shift + K`, `shift` an extra parameter.
    Shifted,
    /// `offs_k < k_left`, `k_left` carried and decremented by `BLOCK_K` each step.
    Carried,
}

/// One 64 x 64 program of `C = A @ B` over a K loop of 32-wide steps (A: 64 x K, B: K x 64,
/// row-major; C f32), its K tail masked as `bound` says. Parameters: `a_ptr, b_ptr, c_ptr,
/// K` and, for `Shifted`, `shift`.
fn k_loop_kernel(bound: KBound) -> Kernel {
    let (bm, bn, bk) = (64u32, 64u32, 32i32);
    Kernel::build("k_loop", |k| {
        let a_ptr = k.arg_ptr("a_ptr", F16);
        let b_ptr = k.arg_ptr("b_ptr", F16);
        let c_ptr = k.arg_ptr("c_ptr", F32);
        let kk = k.arg_i32("K");
        let shift = matches!(bound, KBound::Shifted).then(|| k.arg_i32("shift"));
        let (offs_m, offs_n, offs_k) = (k.arange(0, bm as i32), k.arange(0, bn as i32), k.arange(0, bk));
        let a_ptrs = a_ptr + (offs_m.expand_dims(1) * kk + offs_k.expand_dims(0));
        let b_ptrs = b_ptr + (offs_k.expand_dims(1) * bn as i32 + offs_n.expand_dims(0));
        let acc = k.zeros(&[bm, bn], F32);
        let steps = k.cdiv(kk, bk);
        let out = k.for_range(0, steps, 1, &[acc, a_ptrs, b_ptrs, kk], |step, carried| {
            let (acc, a_ptrs, b_ptrs, k_left) = (carried[0], carried[1], carried[2], carried[3]);
            let (ks, limit) = match shift {
                Some(shift) => (shift + step * bk + offs_k, shift + kk),
                None => (offs_k, k_left),
            };
            let a = k.load_masked(a_ptrs, ks.expand_dims(0).lt(limit), 0.0);
            let b = k.load_masked(b_ptrs, ks.expand_dims(1).lt(limit), 0.0);
            let acc = k.dot_with(a, b, acc, DotPrecision::Ieee);
            vec![acc, a_ptrs + bk, b_ptrs + bk * bn as i32, k_left - bk]
        });
        let c_ptrs = c_ptr + offs_m.expand_dims(1) * bn as i32 + offs_n.expand_dims(0);
        k.store(c_ptrs, out[0]);
    })
    .unwrap()
}

/// [`k_loop_kernel`] on random operands of depth `kk`, its scalar arguments `K` and
/// `extra`, with the interpreter's results.
fn k_loop_case(kernel: &Kernel, kk: usize, extra: &[i64], rng: &mut Rng) -> Case {
    let buffers = vec![f16s(rng, 64 * kk), f16s(rng, kk * 64), HostBuffer::zeros(F32, 64 * 64)];
    let mut args = vec![ptr(0), ptr(1), ptr(2), ArgValue::Int(kk as i64)];
    args.extend(extra.iter().map(|&v| ArgValue::Int(v)));
    let mut want = buffers.clone();
    interp::run(kernel, [1, 1, 1], &args, &mut want).unwrap();
    Case {
        kernel: kernel.clone(),
        buffers,
        spec: rutile_ir::testing::runtime_spec(&args),
        args,
        grid: [1, 1, 1],
        want,
    }
}

/// A K loop masked by `shift + k0 + offs_k < shift + K` (a scalar plus an `arange` against
/// a scalar), which for a `shift` near `i32::MAX` wraps within a block: the elements are
/// then no longer the range from its first to its last, and the unmasked loop must not run
/// a trip the scalar comparison alone would admit (the sum's wrap is checked). Against the
/// interpreter, which takes every element's mask as it is, for shifts that do not wrap
/// (where the unmasked loop runs) and that do.
#[test]
fn masks_of_a_wrapping_sum_keep_their_predicates() {
    let kernel = k_loop_kernel(KBound::Shifted);
    let mut rng = Rng::new(61);
    for shift in [0i64, i32::MAX as i64 - 40, i32::MAX as i64 - 100] {
        let c = k_loop_case(&kernel, 128, &[shift], &mut rng);
        for stages in [2, 3] {
            let t = Target {
                num_stages: stages,
                ..target(4)
            };
            let tk = check(&c, &t, &format!("shift {shift}, {stages} stages"));
            assert!(top_loops(&tk).len() > 1, "no loop of unmasked trips");
        }
        // Without a wrap every element is loaded; with one, some are and some are not.
        assert!(
            c.want[2].as_bytes().iter().any(|&b| b != 0),
            "shift {shift}: nothing loaded"
        );
    }
}

/// A K loop whose bound is carried (`k_left -= BLOCK_K` each step, rather than computed
/// from the loop variable): the trips cannot be sorted before the loop runs them, so there
/// is no loop of unmasked trips, but each iteration still loads behind one branch on the
/// bound of the iteration it prefetches (the carried value run ahead with the loads), and
/// the results equal the interpreter's on a ragged K.
#[test]
fn a_carried_bound_loads_behind_one_branch() {
    let kernel = k_loop_kernel(KBound::Carried);
    let mut rng = Rng::new(67);
    for kk in [100usize, 128, 17] {
        let c = k_loop_case(&kernel, kk, &[], &mut rng);
        for stages in [2, 3] {
            let t = Target {
                num_stages: stages,
                ..target(4)
            };
            let tk = check(&c, &t, &format!("K {kk}, {stages} stages"));
            let loops = top_loops(&tk);
            assert!(
                loops[0]
                    .iter()
                    .any(|s| matches!(s, Stmt::If { .. }) && is_global_load(s)),
                "K {kk}, {stages} stages: no branch around the first loop's loads"
            );
        }
    }
}

/// The matmul written with block pointers masks its operands on both dimensions, `0 <=
/// offset + arange < bound`, the zero a constant block: its K loop too runs the trips whose
/// masks all hold first, unpredicated (a constant is as uniform as a scalar bound), and its
/// results are the plain kernel's bit for bit, ragged or not.
#[test]
fn the_block_pointer_k_loop_runs_its_unmasked_trips_first() {
    let mut rng = Rng::new(61);
    let two_stages = Target {
        num_stages: 2,
        ..target(4)
    };
    let meta = MatmulMeta::fp16(64, 64, 32);
    for shape in [(64, 64, 128), (64, 64, 100), (33, 70, 31), (20, 20, 0)] {
        let mut c = case(&meta, shape, (false, false), &mut rng);
        // The plain kernel's results are the block-pointer kernel's in the interpreter.
        c.kernel = rutile_ir::seeds::matmul_block_ptr(&meta).unwrap();
        let tk = check(&c, &two_stages, &format!("{shape:?}"));
        let loops = top_loops(&tk);
        assert_eq!(loops.len(), 2, "{shape:?}: the unmasked trips, then the others");
        let predicated = |b: &[Stmt]| {
            b.iter()
                .filter(|s| {
                    matches!(
                        s,
                        Stmt::Load {
                            pred: Some(_),
                            mem: rutile_ir::thread::Memory::Global { .. },
                            ..
                        }
                    )
                })
                .count()
        };
        assert!(loops[0].iter().map(global_loads).sum::<usize>() > 0);
        assert_eq!(predicated(loops[0]), 0, "{shape:?}: unpredicated where the masks hold");
    }
}

//! The shared lowering, executed: kernels are lowered for several targets and
//! specializations, run by the SIMT simulator (`interp::simt`) and compared with the block
//! interpreter on random inputs, including ragged sizes that exercise masks.

use half::f16;
use rutile_ir::interp::{self, simt, ArgValue, FaultKind, HostBuffer, InterpError};
use rutile_ir::ir::ReduceOp;
use rutile_ir::lower::{lower, LowerError};
use rutile_ir::seeds;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::testing::Rng;
use rutile_ir::thread::{Expr, Stmt, ThreadKernel};
use rutile_ir::ScalarType::{self, Bool, F16, F32, I32};
use rutile_ir::{Elem, Kernel, Op};

// ---- inputs ----

fn ptr(buffer: usize) -> ArgValue {
    ArgValue::Ptr { buffer, offset: 0 }
}

fn int(v: i64) -> ArgValue {
    ArgValue::Int(v)
}

// ---- targets ----

fn target(warp_size: u32, num_warps: u32, shuffles: bool) -> Target {
    Target {
        shuffles,
        // As SPIR-V: f32 max/min reductions on integer keys where shuffles go through
        // subgroups of 8 or through shared memory.
        native_float_minmax: warp_size == 32 && shuffles,
        ..Target::vulkan(warp_size, num_warps, 48 * 1024)
    }
}

/// NVIDIA-like targets of 1 to 8 warps, lavapipe-like warps of 8, targets without
/// shuffles, AMD-like warps of 64, many small warps, and 32-byte vectors.
fn targets() -> Vec<Target> {
    vec![
        target(32, 1, true),
        target(32, 2, true),
        target(32, 4, true),
        target(32, 8, true),
        target(8, 1, true),
        target(8, 4, true),
        target(32, 4, false),
        target(8, 2, false),
        target(64, 2, true),
        target(16, 16, true),
        Target {
            max_vector_bytes: 32,
            ..target(32, 2, true)
        },
    ]
}

fn describe(t: &Target) -> String {
    format!(
        "warp {} x {} warps{}",
        t.warp_size,
        t.num_warps,
        if t.shuffles { "" } else { ", no shuffles" }
    )
}

/// What the runtime would specialize on: each argument divisible by 16 (pointers: their
/// address in bytes, with buffers 16-byte aligned).
fn honest_spec(kernel: &Kernel, args: &[ArgValue], buffers: &[HostBuffer]) -> Specialization {
    let divisible = kernel
        .params
        .iter()
        .zip(args)
        .map(|(_, a)| match *a {
            ArgValue::Ptr { buffer, offset } => (offset * buffers[buffer].elem().size_bytes()) % 16 == 0,
            ArgValue::Int(i) => i % 16 == 0,
            _ => false,
        })
        .collect();
    Specialization {
        divisible_by_16: divisible,
        equal_to_1: args.iter().map(|a| matches!(a, ArgValue::Int(1))).collect(),
    }
}

// ---- comparison ----

/// Whether two buffers agree: exactly (bit for bit, except that any NaN matches any NaN:
/// the IR leaves a NaN result's payload open), or floats within `rel` relative error or
/// `abs` absolute error.
fn compare(got: &HostBuffer, want: &HostBuffer, rel: f64, abs: f64) -> Result<(), String> {
    let close = |a: f64, b: f64| {
        (a.is_nan() && b.is_nan())
            || a == b
            || (a - b).abs() <= rel * a.abs().max(b.abs())
            || (a - b).abs() <= abs.max(1e-30)
    };
    let mismatch = |i: usize, g: String, w: String| Err(format!("element {i}: got {g}, expected {w}"));
    match want.elem() {
        F32 if rel > 0.0 || abs > 0.0 => {
            let (g, w) = (got.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
            for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
                if !close(a as f64, b as f64) {
                    return mismatch(i, a.to_string(), b.to_string());
                }
            }
        }
        F16 if rel > 0.0 || abs > 0.0 => {
            let (g, w) = (got.to_vec::<f16>().unwrap(), want.to_vec::<f16>().unwrap());
            // f16 results round once more: allow an ulp.
            for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
                if !close(a.to_f64(), b.to_f64()) && (a.to_bits() as i32 - b.to_bits() as i32).abs() > 1 {
                    return mismatch(i, a.to_string(), b.to_string());
                }
            }
        }
        F32 => {
            let (g, w) = (got.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
            for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
                if a.to_bits() != b.to_bits() && !(a.is_nan() && b.is_nan()) {
                    return mismatch(
                        i,
                        format!("{a} ({:#x})", a.to_bits()),
                        format!("{b} ({:#x})", b.to_bits()),
                    );
                }
            }
        }
        _ => {
            if got.as_bytes() != want.as_bytes() {
                let size = want.elem().size_bytes();
                let i = got
                    .as_bytes()
                    .iter()
                    .zip(want.as_bytes())
                    .position(|(a, b)| a != b)
                    .unwrap()
                    / size;
                let show = |b: &HostBuffer| match b.elem() {
                    I32 => b.to_vec::<i32>().unwrap()[i].to_string(),
                    F32 => b.to_vec::<f32>().unwrap()[i].to_string(),
                    F16 => b.to_vec::<f16>().unwrap()[i].to_string(),
                    Bool => b.to_bools().unwrap()[i].to_string(),
                    _ => format!("{:?}", &b.as_bytes()[i * size..(i + 1) * size]),
                };
                return mismatch(i, show(got), show(want));
            }
        }
    }
    Ok(())
}

/// One launch to check: the interpreter's results against the simulated lowering's.
struct Case {
    name: String,
    kernel: Kernel,
    grid: [u32; 3],
    args: Vec<ArgValue>,
    buffers: Vec<HostBuffer>,
    /// Relative and absolute tolerances for float outputs (0: bit-exact).
    rel: f64,
    abs: f64,
}

impl Case {
    fn new(
        name: impl Into<String>,
        kernel: Kernel,
        grid: [u32; 3],
        args: Vec<ArgValue>,
        buffers: Vec<HostBuffer>,
    ) -> Case {
        Case {
            name: name.into(),
            kernel,
            grid,
            args,
            buffers,
            rel: 0.0,
            abs: 0.0,
        }
    }
    fn tolerance(mut self, rel: f64) -> Case {
        self.rel = rel;
        self
    }
    /// For results that cancel, whose relative error is unbounded.
    fn absolute_tolerance(mut self, abs: f64) -> Case {
        self.abs = abs;
        self
    }
}

/// Lowers and simulates `case` for every target of `targets`, with the honest and the empty
/// specialization; returns the failures.
fn run_case(case: &Case, targets: &[Target]) -> Vec<String> {
    let mut want = case.buffers.clone();
    if let Err(e) = interp::run(&case.kernel, case.grid, &case.args, &mut want) {
        return vec![format!("{}: the interpreter fails: {e}", case.name)];
    }
    let mut failures = Vec::new();
    let specs = [
        ("honest", honest_spec(&case.kernel, &case.args, &case.buffers)),
        ("none", Specialization::none(case.args.len())),
    ];
    for t in targets {
        for (spec_name, spec) in &specs {
            let at = format!("{} [{}, {spec_name} spec]", case.name, describe(t));
            let tk = match lower(&case.kernel, t, spec) {
                Ok(tk) => tk,
                Err(e) => {
                    failures.push(format!("{at}: lowering fails: {e}"));
                    continue;
                }
            };
            let mut got = case.buffers.clone();
            if let Err(e) = simt::run_threads(&tk, case.grid, &case.args, &mut got) {
                if std::env::var_os("RUTILE_DUMP").is_some() {
                    eprintln!("{tk}");
                }
                failures.push(format!("{at}: {e}"));
                continue;
            }
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                if let Err(e) = compare(g, w, case.rel, case.abs) {
                    if std::env::var_os("RUTILE_DUMP").is_some() {
                        eprintln!("{tk}");
                    }
                    failures.push(format!("{at}: buffer {i}: {e}"));
                }
            }
        }
    }
    failures
}

fn check_all(cases: &[Case], targets: &[Target]) {
    let failures: Vec<String> = cases.iter().flat_map(|c| run_case(c, targets)).collect();
    if !failures.is_empty() {
        let n = failures.len();
        let limit = if std::env::var_os("RUTILE_ALL_FAILURES").is_some() {
            n
        } else {
            25
        };
        let shown: Vec<&str> = failures.iter().take(limit).map(String::as_str).collect();
        panic!("{n} failures:\n{}", shown.join("\n"));
    }
}

// ---- seed kernels ----

#[test]
fn vector_add_matches_the_interpreter() {
    let mut rng = Rng::new(1);
    let mut cases = Vec::new();
    for block in [1024, 128] {
        for n in [1usize, 7, 98_432, 98_433] {
            let x = rng.f32s(n, -100.0, 100.0);
            let y = rng.f32s(n, -100.0, 100.0);
            let kernel = seeds::vector_add(F32, block).unwrap();
            let buffers = vec![
                HostBuffer::from_slice(&x),
                HostBuffer::from_slice(&y),
                HostBuffer::zeros(F32, n),
            ];
            let grid = [n.div_ceil(block as usize) as u32, 1, 1];
            let args = vec![ptr(0), ptr(1), ptr(2), int(n as i64)];
            cases.push(Case::new(
                format!("vector_add(f32, {block}) n={n}"),
                kernel,
                grid,
                args,
                buffers,
            ));
        }
    }
    // f16: 8 elements per 16-byte vector.
    let n = 1000;
    let (x, y) = (rng.f16s(n, -1.0, 1.0), rng.f16s(n, -1.0, 1.0));
    let buffers = vec![
        HostBuffer::from_slice(&x),
        HostBuffer::from_slice(&y),
        HostBuffer::zeros(F16, n),
    ];
    let kernel = seeds::vector_add(F16, 256).unwrap();
    cases.push(Case::new(
        "vector_add(f16, 256) n=1000",
        kernel,
        [4, 1, 1],
        vec![ptr(0), ptr(1), ptr(2), int(n as i64)],
        buffers,
    ));
    check_all(&cases, &targets());
}

fn softmax_case(persistent: bool, rows: usize, cols: usize, rng: &mut Rng) -> Case {
    let block = seeds::softmax_block(cols as u32);
    let x = rng.f32s(rows * cols, -5.0, 5.0);
    let kernel = if persistent {
        seeds::softmax_persistent(block)
    } else {
        seeds::softmax(block)
    }
    .unwrap();
    let buffers = vec![HostBuffer::zeros(F32, rows * cols), HostBuffer::from_slice(&x)];
    let args = vec![
        ptr(0),
        ptr(1),
        int(cols as i64),
        int(cols as i64),
        int(rows as i64),
        int(cols as i64),
    ];
    let programs = if persistent {
        (rows as u32 / 2).max(1)
    } else {
        rows as u32
    };
    let name = format!(
        "softmax{} {rows}x{cols} (block {block}, {programs} programs)",
        if persistent { "_persistent" } else { "" }
    );
    Case::new(name, kernel, [programs, 1, 1], args, buffers).tolerance(1e-6)
}

#[test]
fn softmax_matches_the_interpreter() {
    let mut rng = Rng::new(2);
    let mut cases = Vec::new();
    for rows in 1..=4 {
        for cols in [1, 7, 781, 1024, 1025] {
            cases.push(softmax_case(false, rows, cols, &mut rng));
        }
    }
    check_all(&cases, &targets());
}

#[test]
fn softmax_with_every_argument_divisible() {
    // 16 rows of 1024 or 32 of 256: every argument is divisible by 16, so the honest
    // specialization is the full one.
    let mut rng = Rng::new(23);
    let mut cases = Vec::new();
    for (rows, cols) in [(16, 1024), (32, 256)] {
        for persistent in [false, true] {
            let case = softmax_case(persistent, rows, cols, &mut rng);
            assert_eq!(
                honest_spec(&case.kernel, &case.args, &case.buffers),
                Specialization::all(6)
            );
            cases.push(case);
        }
    }
    check_all(&cases, &targets());
}

#[test]
fn persistent_softmax_matches_the_interpreter() {
    let mut rng = Rng::new(3);
    let mut cases = Vec::new();
    for rows in 1..=4 {
        for cols in [1, 7, 781, 1024, 1025] {
            cases.push(softmax_case(true, rows, cols, &mut rng));
        }
    }
    check_all(&cases, &targets());
}

/// The persistent softmax's pipelined loop over rows (`softmax_persistent_staged`, 2 and 3
/// stages) on targets with asynchronous copies, against the interpreter: rows of 1024 and
/// 1008 (16-byte accesses: own copies; at 1008 the block's last vectors masked off, read
/// back as the load's -inf) and of 781 and 1000 (narrower accesses: plain loads), on 1 to
/// 4 rows walked by half as many programs.
#[test]
fn pipelined_softmax_matches_the_interpreter() {
    let mut rng = Rng::new(5);
    let mut cases = Vec::new();
    for stages in [2, 3] {
        for rows in 1..=4 {
            for cols in [781, 1000, 1008, 1024] {
                let mut case = softmax_case(true, rows, cols, &mut rng);
                let block = seeds::softmax_block(cols as u32);
                case.kernel = seeds::softmax_persistent_staged(block, stages).unwrap();
                case.name = format!("pipelined {stages} stages, {}", case.name);
                cases.push(case);
            }
        }
    }
    let asynchronous: Vec<Target> = [(32, 4), (32, 8), (8, 2)]
        .into_iter()
        .map(|(w, n)| Target {
            async_copy: true,
            ..target(w, n, true)
        })
        .collect();
    check_all(&cases, &asynchronous);
    // Aligned rows are copied ahead, and a masked load's -inf restored where its mask is off.
    let kernel = seeds::softmax_persistent(1024).unwrap();
    let t = lower(&kernel, &asynchronous[0], &Specialization::all(kernel.params.len())).unwrap();
    let (mut copies, mut selects) = (0, 0);
    t.walk(&mut |s| {
        copies += matches!(s, Stmt::AsyncCopy { .. }) as usize;
        selects += matches!(
            s,
            Stmt::Set {
                expr: Expr::Select(..),
                ..
            }
        ) as usize;
    });
    assert!(copies > 0 && selects > 0, "{copies} copies, {selects} selects:\n{t}");
}

// ---- targeted kernels ----

fn build(name: &str, body: impl FnOnce(&rutile_ir::KernelBuilder)) -> Kernel {
    Kernel::build(name, body).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A row-major `rows x cols` block of offsets `r * stride + c`.
fn offsets_2d<'b>(
    k: &'b rutile_ir::KernelBuilder,
    rows: u32,
    cols: u32,
    stride: rutile_ir::Value<'b>,
) -> rutile_ir::Value<'b> {
    let r = k.arange(0, rows as i32);
    let c = k.arange(0, cols as i32);
    r.expand_dims(1) * stride + c.expand_dims(0)
}

/// 2-D softmax along `axis` with keep_dims reductions broadcast back, over a ragged
/// `n_rows x n_cols` matrix in a `rows x cols` block.
fn softmax_2d(rows: u32, cols: u32, axis: u32) -> Kernel {
    build("softmax_2d", |k| {
        let (x, y) = (k.arg_ptr("x", F32), k.arg_ptr("y", F32));
        let (n_rows, n_cols) = (k.arg_i32("n_rows"), k.arg_i32("n_cols"));
        let r = k.arange(0, rows as i32).expand_dims(1);
        let c = k.arange(0, cols as i32).expand_dims(0);
        let offs = r * n_cols + c;
        let mask = r.lt(n_rows) & c.lt(n_cols);
        let v = k.load_masked(x + offs, mask, f32::NEG_INFINITY);
        let z = v - v.reduce_with(ReduceOp::Max, axis, true);
        let e = z.exp();
        let out = e / e.reduce_with(ReduceOp::Sum, axis, true);
        k.store_masked(y + offs, out, mask);
    })
}

#[test]
fn two_d_reductions_along_both_axes() {
    let mut rng = Rng::new(4);
    let mut cases = Vec::new();
    for (rows, cols, n_rows, n_cols) in [
        (8, 16, 8, 16),
        (16, 64, 13, 50),
        (64, 8, 64, 5),
        (4, 128, 3, 128),
        (2, 4, 2, 3),
        (128, 32, 100, 32),
    ] {
        for axis in [0, 1] {
            let x = rng.f32s((n_rows * n_cols) as usize, -4.0, 4.0);
            let buffers = vec![
                HostBuffer::from_slice(&x),
                HostBuffer::zeros(F32, (n_rows * n_cols) as usize),
            ];
            let args = vec![ptr(0), ptr(1), int(n_rows as i64), int(n_cols as i64)];
            let name = format!("softmax_2d {rows}x{cols} block, {n_rows}x{n_cols} matrix, axis {axis}");
            cases.push(Case::new(name, softmax_2d(rows, cols, axis), [1, 1, 1], args, buffers).tolerance(1e-6));
        }
    }
    check_all(&cases, &targets());
}

/// `op` along `axis` of a `rows x cols` block of `elem` (1-D when `rows` is 0), stored as
/// the result's type.
fn reduce_kernel(op: ReduceOp, elem: ScalarType, rows: u32, cols: u32, axis: u32) -> Kernel {
    build("reduce", |k| {
        let out_elem = match op {
            ReduceOp::ArgMax | ReduceOp::ArgMin => I32,
            _ => elem,
        };
        let (x, y) = (k.arg_ptr("x", elem), k.arg_ptr("y", out_elem));
        if rows == 0 {
            let v = k.load(x + k.arange(0, cols as i32));
            k.store(y, v.reduce_with(op, 0, false));
            return;
        }
        let v = k.load(x + offsets_2d(k, rows, cols, k.scalar(cols as i32, I32)));
        let red = v.reduce_with(op, axis, false);
        let n = if axis == 0 { cols } else { rows };
        k.store(y + k.arange(0, n as i32), red);
    })
}

fn reduce_case(op: ReduceOp, input: HostBuffer, rows: u32, cols: u32, axis: u32) -> Case {
    let elem = input.elem();
    let out_elem = match op {
        ReduceOp::ArgMax | ReduceOp::ArgMin => I32,
        _ => elem,
    };
    let n_out = match (rows, axis) {
        (0, _) => 1,
        (_, 0) => cols,
        _ => rows,
    } as usize;
    let name = format!("{op:?} of {elem} {rows}x{cols} along {axis}");
    let buffers = vec![input, HostBuffer::zeros(out_elem, n_out)];
    let rel = if elem.is_float() && op == ReduceOp::Sum {
        1e-6
    } else {
        0.0
    };
    Case::new(
        name,
        reduce_kernel(op, elem, rows, cols, axis),
        [1, 1, 1],
        vec![ptr(0), ptr(1)],
        buffers,
    )
    .tolerance(rel)
}

const SHAPES: [(u32, u32); 7] = [(0, 16), (0, 1024), (0, 2), (16, 16), (4, 256), (64, 4), (1, 8)];

/// Each shape of `SHAPES` with its element count and each axis it has (rows = 0 is 1-D).
fn shapes_and_axes() -> impl Iterator<Item = (u32, u32, usize, u32)> {
    SHAPES.into_iter().flat_map(|(rows, cols)| {
        let n = (rows.max(1) * cols) as usize;
        let axes: &[u32] = if rows == 0 { &[0] } else { &[0, 1] };
        axes.iter().map(move |&axis| (rows, cols, n, axis))
    })
}

#[test]
fn argmax_and_argmin_with_ties_and_nan() {
    let mut rng = Rng::new(5);
    let mut cases = Vec::new();
    for (rows, cols, n, axis) in shapes_and_axes() {
        // Few distinct values: many ties.
        let mut x: Vec<f32> = rng.i32s(n, -2, 3).into_iter().map(|v| v as f32).collect();
        for op in [ReduceOp::ArgMax, ReduceOp::ArgMin] {
            cases.push(reduce_case(op, HostBuffer::from_slice(&x), rows, cols, axis));
            let ints: Vec<i32> = x.iter().map(|&v| v as i32).collect();
            cases.push(reduce_case(op, HostBuffer::from_slice(&ints), rows, cols, axis));
        }
        // Some NaNs.
        for (i, v) in x.iter_mut().enumerate() {
            if rng.next_u64() % 7 == 0 || i == n / 2 {
                *v = f32::NAN;
            }
        }
        for op in [ReduceOp::ArgMax, ReduceOp::ArgMin, ReduceOp::Max, ReduceOp::Min] {
            cases.push(reduce_case(op, HostBuffer::from_slice(&x), rows, cols, axis));
        }
    }
    check_all(&cases, &targets());
}

/// f32 max and min over the values where their semantics bite: signed zeros (-0.0 below
/// +0.0), infinities, subnormals, NaNs of either sign and negative numbers near each other.
/// The targets of `targets()` without native f32 min/max reduce integer keys; each target
/// also folds a thread's elements into 1, 3 and 4 interleaved partials
/// (`Target::reduce_chains`), all exact.
#[test]
fn max_and_min_of_signed_zeros_infinities_and_nans() {
    let mut rng = Rng::new(8);
    let specials = [
        0.0f32,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::from_bits(1),
        f32::from_bits(0x8000_0001),
        -1.0,
        -1.000_000_1,
        f32::MAX,
        f32::MIN,
        f32::NAN,
        f32::from_bits(0xffc0_0001),
    ];
    let mut cases = Vec::new();
    for (rows, cols, n, axis) in shapes_and_axes() {
        // Without NaNs (from the first ten specials), then with them.
        for pool in [&specials[..10], &specials[..]] {
            let x: Vec<f32> = (0..n).map(|_| pool[rng.next_u64() as usize % pool.len()]).collect();
            for op in [ReduceOp::Max, ReduceOp::Min] {
                cases.push(reduce_case(op, HostBuffer::from_slice(&x), rows, cols, axis));
            }
        }
        // Only zeros of both signs: the sign of the result is all that can go wrong.
        let zeros: Vec<f32> = (0..n)
            .map(|_| if rng.next_u64() % 2 == 0 { 0.0 } else { -0.0 })
            .collect();
        for op in [ReduceOp::Max, ReduceOp::Min] {
            cases.push(reduce_case(op, HostBuffer::from_slice(&zeros), rows, cols, axis));
        }
    }
    let chained = targets().into_iter().flat_map(|t| {
        [1, 3, 4].map(|reduce_chains| Target {
            reduce_chains,
            ..t.clone()
        })
    });
    check_all(&cases, &chained.collect::<Vec<_>>());
}

#[test]
fn sums_maxes_and_mins_of_several_types() {
    let mut rng = Rng::new(6);
    let mut cases = Vec::new();
    for (rows, cols, n, axis) in shapes_and_axes() {
        // Positive floats, so that sums do not cancel (orders of summation differ).
        let h = HostBuffer::from_slice(
            &rng.f16s(n, -1.0, 1.0)
                .into_iter()
                .map(|v| -(-v).min(v))
                .collect::<Vec<f16>>(),
        );
        let i = HostBuffer::from_slice(&rng.i32s(n, -1000, 1000));
        let f = HostBuffer::from_slice(&rng.f32s(n, -10.0, 10.0).into_iter().map(f32::abs).collect::<Vec<f32>>());
        cases.push(reduce_case(ReduceOp::Sum, h.clone(), rows, cols, axis));
        cases.push(reduce_case(ReduceOp::Max, h, rows, cols, axis));
        cases.push(reduce_case(ReduceOp::Max, i.clone(), rows, cols, axis));
        cases.push(reduce_case(ReduceOp::Min, i.clone(), rows, cols, axis));
        cases.push(reduce_case(ReduceOp::Sum, i, rows, cols, axis));
        cases.push(reduce_case(ReduceOp::Sum, f.clone(), rows, cols, axis));
        cases.push(reduce_case(ReduceOp::Min, f, rows, cols, axis));
    }
    // Sums also folded into 3 and 4 interleaved partials a thread (`Target::sum_chains`).
    let chained = targets().into_iter().flat_map(|t| {
        [1, 3, 4].map(|sum_chains| Target {
            sum_chains,
            ..t.clone()
        })
    });
    check_all(&cases, &chained.collect::<Vec<_>>());
}

#[test]
fn arange_offsets_expand_dims_and_broadcast() {
    let mut cases = Vec::new();
    for (rows, cols) in [(16u32, 16u32), (2, 64), (64, 2), (1, 32), (32, 1), (8, 256), (4, 4)] {
        // The offsets themselves, a broadcast row and column, and a 3-D broadcast.
        let kernel = build("offsets", |k| {
            let (o, a, b) = (k.arg_ptr("o", I32), k.arg_ptr("a", I32), k.arg_ptr("b", I32));
            let offs = offsets_2d(k, rows, cols, k.scalar(cols as i32, I32));
            k.store(o + offs, offs);
            let row = k.arange(0, cols as i32).expand_dims(0).broadcast_to(&[rows, cols]);
            k.store(a + offs, row * 3);
            let col = k.arange(0, rows as i32).expand_dims(1).broadcast_to(&[rows, cols]);
            k.store(b + offs, col - 7);
        });
        let n = (rows * cols) as usize;
        let buffers = vec![
            HostBuffer::zeros(I32, n),
            HostBuffer::zeros(I32, n),
            HostBuffer::zeros(I32, n),
        ];
        cases.push(Case::new(
            format!("offsets {rows}x{cols}"),
            kernel,
            [1, 1, 1],
            vec![ptr(0), ptr(1), ptr(2)],
            buffers,
        ));
    }
    let kernel = build("offsets_3d", |k| {
        let o = k.arg_ptr("o", I32);
        let i = k.arange(0, 2).expand_dims(1).expand_dims(2);
        let j = k.arange(0, 4).expand_dims(0).expand_dims(2);
        let l = k.arange(0, 8).expand_dims(0).expand_dims(1);
        let offs = i * 32 + j * 8 + l;
        k.store(o + offs, offs * 10 + j);
    });
    cases.push(Case::new(
        "offsets 2x4x8",
        kernel,
        [1, 1, 1],
        vec![ptr(0)],
        vec![HostBuffer::zeros(I32, 64)],
    ));
    check_all(&cases, &targets());
}

#[test]
fn reshape_and_permute() {
    let mut rng = Rng::new(7);
    let mut cases = Vec::new();
    // Reshape a 1-D block to 2-D and reduce rows; reshape 2-D to another 2-D.
    for (n, rows) in [(64u32, 8u32), (256, 4), (16, 16), (1024, 32)] {
        let cols = n / rows;
        let kernel = build("reshape", |k| {
            let (x, y, z) = (k.arg_ptr("x", F32), k.arg_ptr("y", F32), k.arg_ptr("z", F32));
            let v = k.load(x + k.arange(0, n as i32));
            let m = v.reshape(&[rows, cols]);
            k.store(y + k.arange(0, rows as i32), m.max(1));
            let back = m.reshape(&[cols, rows]);
            k.store(z + offsets_2d(k, cols, rows, k.scalar(rows as i32, I32)), back * 2.0);
        });
        let buffers = vec![
            HostBuffer::from_slice(&rng.f32s(n as usize, -1.0, 1.0)),
            HostBuffer::zeros(F32, rows as usize),
            HostBuffer::zeros(F32, n as usize),
        ];
        cases.push(Case::new(
            format!("reshape {n} -> {rows}x{cols}"),
            kernel,
            [1, 1, 1],
            vec![ptr(0), ptr(1), ptr(2)],
            buffers,
        ));
    }
    // Transpose a 2-D block; permute a 3-D one.
    for (rows, cols) in [(16u32, 32u32), (4, 128), (64, 64), (1, 16), (8, 2)] {
        let kernel = build("trans", |k| {
            let (x, y) = (k.arg_ptr("x", I32), k.arg_ptr("y", I32));
            let v = k.load(x + offsets_2d(k, rows, cols, k.scalar(cols as i32, I32)));
            k.store(y + offsets_2d(k, cols, rows, k.scalar(rows as i32, I32)), v.trans());
        });
        let n = (rows * cols) as usize;
        let buffers = vec![
            HostBuffer::from_slice(&rng.i32s(n, -100, 100)),
            HostBuffer::zeros(I32, n),
        ];
        cases.push(Case::new(
            format!("trans {rows}x{cols}"),
            kernel,
            [1, 1, 1],
            vec![ptr(0), ptr(1)],
            buffers,
        ));
    }
    let kernel = build("permute", |k| {
        let (x, y) = (k.arg_ptr("x", I32), k.arg_ptr("y", I32));
        let i = k.arange(0, 2).expand_dims(1).expand_dims(2);
        let j = k.arange(0, 4).expand_dims(0).expand_dims(2);
        let l = k.arange(0, 8).expand_dims(0).expand_dims(1);
        let v = k.load(x + (i * 32 + j * 8 + l));
        // Result [8, 2, 4]: dimension 0 is source 2, 1 is 0, 2 is 1.
        let p = v.permute(&[2, 0, 1]);
        let a = k.arange(0, 8).expand_dims(1).expand_dims(2);
        let b = k.arange(0, 2).expand_dims(0).expand_dims(2);
        let c = k.arange(0, 4).expand_dims(0).expand_dims(1);
        k.store(y + (a * 8 + b * 4 + c), p);
    });
    let buffers = vec![
        HostBuffer::from_slice(&rng.i32s(64, -100, 100)),
        HostBuffer::zeros(I32, 64),
    ];
    cases.push(Case::new(
        "permute 2x4x8 by [2, 0, 1]",
        kernel,
        [1, 1, 1],
        vec![ptr(0), ptr(1)],
        buffers,
    ));
    check_all(&cases, &targets());
}

#[test]
fn where_casts_and_bitcasts() {
    let mut rng = Rng::new(8);
    let mut cases = Vec::new();
    for (block, n) in [(1024u32, 3000usize), (16, 40), (128, 128), (2, 5)] {
        let kernel = build("casts", |k| {
            let (x, y) = (k.arg_ptr("x", F32), k.arg_ptr("y", F32));
            let (w, a, h, b, bits) = (
                k.arg_ptr("w", F32),
                k.arg_ptr("a", I32),
                k.arg_ptr("h", F16),
                k.arg_ptr("b", Bool),
                k.arg_ptr("bits", I32),
            );
            let n = k.arg_i32("n");
            let offs = k.program_id(0) * block as i32 + k.arange(0, block as i32);
            let mask = offs.lt(n);
            let xv = k.load_masked(x + offs, mask, 1.0);
            let yv = k.load_masked(y + offs, mask, 2.0);
            k.store_masked(w + offs, k.where_(xv.gt(0.0), xv, yv * 2.0), mask);
            let xi = (xv * 100.0).to(I32);
            k.store_masked(a + offs, xi + offs % 3, mask);
            k.store_masked(h + offs, (xi.to(F16) + yv.to(F16)).to(F32).to(F16), mask);
            k.store_masked(b + offs, xv.lt(yv), mask);
            k.store_masked(bits + offs, xv.bitcast(I32) ^ xv.gt(yv).to(I32), mask);
        });
        let buffers = vec![
            HostBuffer::from_slice(&rng.f32s(n, -2.0, 2.0)),
            HostBuffer::from_slice(&rng.f32s(n, -2.0, 2.0)),
            HostBuffer::zeros(F32, n),
            HostBuffer::zeros(I32, n),
            HostBuffer::zeros(F16, n),
            HostBuffer::zeros(Bool, n),
            HostBuffer::zeros(I32, n),
        ];
        let args = vec![ptr(0), ptr(1), ptr(2), ptr(3), ptr(4), ptr(5), ptr(6), int(n as i64)];
        let grid = [n.div_ceil(block as usize) as u32, 1, 1];
        cases.push(Case::new(
            format!("where and casts, block {block}, n={n}"),
            kernel,
            grid,
            args,
            buffers,
        ));
    }
    check_all(&cases, &targets());
}

#[test]
fn masked_loads_with_block_other_on_ragged_sizes() {
    let mut rng = Rng::new(9);
    let mut cases = Vec::new();
    for (rows, cols, n_rows, n_cols) in [(16u32, 16u32, 11, 9), (4, 64, 3, 33), (32, 8, 32, 7), (2, 2, 1, 1)] {
        let kernel = build("masked_other", |k| {
            let (x, y) = (k.arg_ptr("x", F32), k.arg_ptr("y", F32));
            let (nr, nc) = (k.arg_i32("n_rows"), k.arg_i32("n_cols"));
            let r = k.arange(0, rows as i32).expand_dims(1);
            let c = k.arange(0, cols as i32).expand_dims(0);
            let mask = r.lt(nr) & c.lt(nc);
            // `other` varies over the block.
            let other = (r * 1000 + c).to(F32);
            let v = k.load_masked(x + (r * nc + c), mask, other);
            k.store(y + offsets_2d(k, rows, cols, k.scalar(cols as i32, I32)), v);
        });
        let buffers = vec![
            HostBuffer::from_slice(&rng.f32s((n_rows * n_cols) as usize, -1.0, 1.0)),
            HostBuffer::zeros(F32, (rows * cols) as usize),
        ];
        let args = vec![ptr(0), ptr(1), int(n_rows as i64), int(n_cols as i64)];
        cases.push(Case::new(
            format!("masked load with block other {rows}x{cols} of {n_rows}x{n_cols}"),
            kernel,
            [1, 1, 1],
            args,
            buffers,
        ));
    }
    check_all(&cases, &targets());
}

#[test]
fn atomics() {
    let mut rng = Rng::new(10);
    let mut cases = Vec::new();
    for (block, n) in [(128u32, 1000usize), (16, 100), (1024, 5000), (2, 9)] {
        // Many programs add into a small buffer (element order does not matter for
        // integers); each program bumps a counter and records the old value (programs run
        // in the same order in both); distinct-address atomics return old values.
        let kernel = build("atomics", |k| {
            let (x, hist, counter, olds) = (
                k.arg_ptr("x", I32),
                k.arg_ptr("hist", I32),
                k.arg_ptr("counter", I32),
                k.arg_ptr("olds", I32),
            );
            let (mx, cas, xchg, fsum) = (
                k.arg_ptr("mx", I32),
                k.arg_ptr("cas", I32),
                k.arg_ptr("xchg", I32),
                k.arg_ptr("fsum", F32),
            );
            let n = k.arg_i32("n");
            let pid = k.program_id(0);
            let offs = pid * block as i32 + k.arange(0, block as i32);
            let mask = offs.lt(n);
            let v = k.load_masked(x + offs, mask, 0);
            k.atomic_add(hist + offs % 4, v, Some(mask));
            let old = k.atomic_add(counter, 1, None);
            k.store(olds + pid, old);
            let prev = k.atomic_max(mx + offs, v, Some(mask));
            k.store_masked(mx + offs + n, prev, mask);
            let swapped = k.atomic_cas(cas + offs, 0, v, Some(mask));
            k.store_masked(cas + offs + n, swapped, mask);
            let got = k.atomic_xchg(xchg + offs, v * 2, Some(mask));
            k.store_masked(xchg + offs + n, got + 1, mask);
            // Small integers in f32: exact in any order.
            k.atomic_add(fsum + pid % 2, v.to(F32), Some(mask));
        });
        let x = rng.i32s(n, -50, 50);
        let programs = n.div_ceil(block as usize);
        let mut mx = rng.i32s(2 * n, -50, 50);
        mx[n..].fill(0);
        let cas: Vec<i32> = (0..2 * n).map(|i| if i < n { (i % 2) as i32 } else { 0 }).collect();
        let buffers = vec![
            HostBuffer::from_slice(&x),
            HostBuffer::zeros(I32, 4),
            HostBuffer::zeros(I32, 1),
            HostBuffer::zeros(I32, programs),
            HostBuffer::from_slice(&mx),
            HostBuffer::from_slice(&cas),
            HostBuffer::from_slice(&rng.i32s(2 * n, 0, 9)),
            HostBuffer::zeros(F32, 2),
        ];
        let args = vec![
            ptr(0),
            ptr(1),
            ptr(2),
            ptr(3),
            ptr(4),
            ptr(5),
            ptr(6),
            ptr(7),
            int(n as i64),
        ];
        cases.push(Case::new(
            format!("atomics, block {block}, n={n}"),
            kernel,
            [programs as u32, 1, 1],
            args,
            buffers,
        ));
    }
    // A 2-D atomic and a scalar atomic whose old value every thread uses.
    let kernel = build("atomics_2d", |k| {
        let (acc, out) = (k.arg_ptr("acc", I32), k.arg_ptr("out", I32));
        let offs = offsets_2d(k, 4, 8, k.scalar(8, I32));
        let old = k.atomic_add(acc + offs, offs, None);
        let first = k.atomic_add(acc + 32, 5, None);
        k.store(out + offs, old + first);
    });
    let buffers = vec![HostBuffer::from_slice(&rng.i32s(33, 0, 10)), HostBuffer::zeros(I32, 32)];
    cases.push(Case::new(
        "atomics 4x8 and scalar",
        kernel,
        [3, 1, 1],
        vec![ptr(0), ptr(1)],
        buffers,
    ));
    check_all(&cases, &targets());
}

#[test]
fn for_loops_with_carried_blocks_and_negative_steps() {
    let mut rng = Rng::new(11);
    let mut cases = Vec::new();
    for block in [16u32, 256, 2048] {
        let kernel = build("for_loops", |k| {
            let (x, y, z) = (k.arg_ptr("x", F32), k.arg_ptr("y", F32), k.arg_ptr("z", I32));
            let (steps, step) = (k.arg_i32("steps"), k.arg_i32("step"));
            let offs = k.arange(0, block as i32);
            let acc = k.zeros(&[block], F32);
            // Constant negative step, a carried block and a carried scalar.
            let out = k.for_range(steps - 1, -1, -1, &[acc, k.scalar(0, I32)], |i, c| {
                let v = k.load(x + i * block as i32 + offs);
                vec![c[0] * 0.5 + v, c[1] + i]
            });
            k.store(y + offs, out[0]);
            // Run-time step (negative here): the loop tests its direction.
            let count = k.for_range(steps * 3, 0, step, &[k.zeros(&[block], I32)], |i, c| {
                vec![c[0] + i + offs]
            });
            k.store(z + offs, count[0] + out[1]);
            // A carried pointer block.
            let p = k.for_range(0, steps, 1, &[x + offs], |_, c| vec![c[0] + block as i32]);
            k.store(y + block as i32 + offs, k.load(p[0] - block as i32));
        });
        let steps = 5;
        let buffers = vec![
            HostBuffer::from_slice(&rng.f32s(block as usize * steps, -1.0, 1.0)),
            HostBuffer::zeros(F32, 2 * block as usize),
            HostBuffer::zeros(I32, block as usize),
        ];
        let args = vec![ptr(0), ptr(1), ptr(2), int(steps as i64), int(-2)];
        cases.push(Case::new(
            format!("for loops, block {block}"),
            kernel,
            [1, 1, 1],
            args,
            buffers,
        ));
    }
    check_all(&cases, &targets());
}

#[test]
fn if_else_with_block_results_and_while() {
    let mut rng = Rng::new(12);
    let mut cases = Vec::new();
    for (rows, cols) in [(8u32, 32u32), (32, 4), (2, 512)] {
        let kernel = build("branches", |k| {
            let (x, y, z) = (k.arg_ptr("x", F32), k.arg_ptr("y", F32), k.arg_ptr("z", I32));
            let pid = k.program_id(0);
            let offs = offsets_2d(k, rows, cols, k.scalar(cols as i32, I32));
            let base = pid * (rows * cols) as i32;
            let v = k.load(x + base + offs);
            // Branch results in different layouts: a reduction kept as [rows, 1] in one
            // branch, a fresh block in the other.
            let res = k.if_else(
                (pid % 2).eq(0),
                || vec![v * 2.0, v.abs().reduce_with(ReduceOp::Sum, 1, true)],
                || vec![v + 1.0, k.full(&[rows, 1], 3.0, F32)],
            );
            k.store(y + base + offs, res[0] + res[1]);
            // while: halve until small, counting the steps (a carried block and scalar).
            let w = k.while_loop(
                &[v.abs() * 64.0, k.scalar(0, I32)],
                |c| c[1].lt(3) | c[0].max(1).max(0).gt(1.0),
                |c| vec![c[0] * 0.5, c[1] + 1],
            );
            k.store(z + pid, w[1]);
            k.if_then(pid.eq(1), || k.store(y + base + offs, w[0]));
        });
        let n = (rows * cols) as usize;
        let buffers = vec![
            HostBuffer::from_slice(&rng.f32s(3 * n, -4.0, 4.0)),
            HostBuffer::zeros(F32, 3 * n),
            HostBuffer::zeros(I32, 3),
        ];
        cases.push(
            Case::new(
                format!("if/while {rows}x{cols}"),
                kernel,
                [3, 1, 1],
                vec![ptr(0), ptr(1), ptr(2)],
                buffers,
            )
            .tolerance(1e-6),
        );
    }
    check_all(&cases, &targets());
}

#[test]
fn small_blocks_replicate_and_large_blocks_wrap() {
    let mut rng = Rng::new(13);
    let mut cases = Vec::new();
    // 1 to 16 elements over up to 256 threads: copies must not store, reduce or add twice.
    for block in [1u32, 2, 4, 16, 4096] {
        let kernel = build("replicated", |k| {
            let (x, y, s, a) = (
                k.arg_ptr("x", I32),
                k.arg_ptr("y", I32),
                k.arg_ptr("s", I32),
                k.arg_ptr("a", I32),
            );
            let n = k.arg_i32("n");
            let pid = k.program_id(0);
            let offs = pid * block as i32 + k.arange(0, block as i32);
            let mask = offs.lt(n);
            let v = k.load_masked(x + offs, mask, 0);
            k.store_masked(y + offs, v * 3, mask);
            k.store(s + pid, v.sum(0));
            k.atomic_add(a + offs % 2, v, Some(mask));
            let m = (v.expand_dims(0).broadcast_to(&[2, block]) + k.arange(0, 2).expand_dims(1)).max(1);
            k.store(s + k.num_programs(0) + pid * 2 + k.arange(0, 2), m);
        });
        let n = block as usize * 3 - 1;
        let buffers = vec![
            HostBuffer::from_slice(&rng.i32s(n, -9, 9)),
            HostBuffer::zeros(I32, n),
            HostBuffer::zeros(I32, 9),
            HostBuffer::zeros(I32, 2),
        ];
        let args = vec![ptr(0), ptr(1), ptr(2), ptr(3), int(n as i64)];
        cases.push(Case::new(
            format!("replicated block {block}"),
            kernel,
            [3, 1, 1],
            args,
            buffers,
        ));
    }
    check_all(&cases, &targets());
}

/// Loads a `rows x cols` block at `x + row_offset(r) + c` and stores it densely in `y`.
fn gather_rows(
    name: &str,
    rows: u32,
    cols: u32,
    row_offset: impl for<'b> Fn(&'b rutile_ir::KernelBuilder, rutile_ir::Value<'b>) -> rutile_ir::Value<'b>,
) -> Kernel {
    build(name, |k| {
        let (x, y) = (k.arg_ptr("x", F32), k.arg_ptr("y", F32));
        let r = k.arange(0, rows as i32);
        let c = k.arange(0, cols as i32);
        let v = k.load(x + row_offset(k, r).expand_dims(1) + c.expand_dims(0));
        k.store(y + offsets_2d(k, rows, cols, k.scalar(cols as i32, I32)), v);
    })
}

#[test]
fn vector_width_follows_row_alignment() {
    let mut rng = Rng::new(14);
    let (rows, cols) = (32u32, 64u32);
    let mut cases = Vec::new();
    // Rows at a run-time stride: vectors only when the stride is divisible by 16.
    for stride in [64i64, 65, 33, 16] {
        let kernel = build("strided_rows", |k| {
            let (x, y) = (k.arg_ptr("x", F32), k.arg_ptr("y", F32));
            let stride = k.arg_i32("stride");
            let r = k.arange(0, rows as i32);
            let c = k.arange(0, cols as i32);
            let v = k.load(x + r.expand_dims(1) * stride + c.expand_dims(0));
            k.store(y + offsets_2d(k, rows, cols, k.scalar(cols as i32, I32)), v);
        });
        let n = (rows as i64 * stride.max(cols as i64)) as usize;
        let buffers = vec![
            HostBuffer::from_slice(&rng.f32s(n, -1.0, 1.0)),
            HostBuffer::zeros(F32, (rows * cols) as usize),
        ];
        cases.push(Case::new(
            format!("rows at stride {stride}"),
            kernel,
            [1, 1, 1],
            vec![ptr(0), ptr(1), int(stride)],
            buffers,
        ));
    }
    // Rows at compile-time offsets that are not multiples of the vector: `3 r`, `r / 2`,
    // `r << 1` (and, for contrast, `r * 16`).
    type RowOffset = for<'a> fn(&'a rutile_ir::KernelBuilder, rutile_ir::Value<'a>) -> rutile_ir::Value<'a>;
    let offsets: [(&str, RowOffset); 6] = [
        ("3 r", |_, r| r * 3),
        ("r / 2", |_, r| r / 2),
        ("r << 1", |_, r| r << 1),
        ("where(r % 3 == 0, r, r)", |k, r| k.where_((r % 3).eq(0), r, r)),
        ("(r + r / 2 * 8) / 2", |_, r| (r + r / 2 * 8) / 2),
        ("16 r", |_, r| r * 16),
    ];
    // Offsets `i % n` with `n` divisible by 16 but varying from element to element.
    let kernel = build("rem_by_block", |k| {
        let (x, y) = (k.arg_ptr("x", F32), k.arg_ptr("y", F32));
        let i = k.arange(0, 64);
        let n = (i % 2) * 16 + 16;
        let v = k.load(x + i % n);
        k.store(y + i, v);
        let rows = i % n;
        let w = k.load(x + rows.expand_dims(1) + k.arange(0, 4).expand_dims(0));
        k.store(y + 64 + offsets_2d(k, 64, 4, k.scalar(4, I32)), w);
    });
    let buffers = vec![
        HostBuffer::from_slice(&rng.f32s(64, -1.0, 1.0)),
        HostBuffer::zeros(F32, 64 * 5),
    ];
    cases.push(Case::new(
        "offsets i % n for a varying n",
        kernel,
        [1, 1, 1],
        vec![ptr(0), ptr(1)],
        buffers,
    ));
    for (what, f) in offsets {
        let kernel = gather_rows("rows", rows, cols, f);
        let n = (rows * 16 + cols) as usize;
        let buffers = vec![
            HostBuffer::from_slice(&rng.f32s(n, -1.0, 1.0)),
            HostBuffer::zeros(F32, (rows * cols) as usize),
        ];
        cases.push(Case::new(
            format!("rows at {what}"),
            kernel,
            [1, 1, 1],
            vec![ptr(0), ptr(1)],
            buffers,
        ));
    }
    check_all(&cases, &targets());
}

#[test]
fn narrow_and_wide_element_types() {
    let mut rng = Rng::new(15);
    let mut cases = Vec::new();
    // 16-byte vectors hold 16 bytes but per-thread IR vectors at most 8 elements.
    let launches = [
        (ScalarType::I8, 1024u32, 4096usize),
        (ScalarType::U8, 256, 1000),
        (ScalarType::I16, 512, 1024),
        (ScalarType::F64, 128, 1000),
        (ScalarType::I64, 64, 1024),
    ];
    for (dtype, block, n) in launches {
        let kernel = seeds::vector_add(dtype, block).unwrap();
        let make = |rng: &mut Rng| {
            let bytes: Vec<u8> = (0..n * dtype.size_bytes())
                .map(|_| (rng.next_u64() % 7) as u8)
                .collect();
            HostBuffer::from_bytes(dtype, bytes).unwrap()
        };
        let buffers = vec![make(&mut rng), make(&mut rng), HostBuffer::zeros(dtype, n)];
        let grid = [n.div_ceil(block as usize) as u32, 1, 1];
        cases.push(Case::new(
            format!("vector_add({dtype}, {block})"),
            kernel,
            grid,
            vec![ptr(0), ptr(1), ptr(2), int(n as i64)],
            buffers,
        ));
    }
    // Booleans in memory: one byte each.
    let kernel = build("bools", |k| {
        let (x, y) = (k.arg_ptr("x", Bool), k.arg_ptr("y", Bool));
        let n = k.arg_i32("n");
        let offs = k.program_id(0) * 1024 + k.arange(0, 1024);
        let mask = offs.lt(n);
        let v = k.load_masked(x + offs, mask, false);
        k.store_masked(y + offs, !v, mask);
    });
    let bools: Vec<bool> = (0..4096).map(|_| rng.next_u64() % 2 == 0).collect();
    let buffers = vec![
        HostBuffer::from_bools(&bools),
        HostBuffer::from_bools(&vec![false; 4096]),
    ];
    cases.push(Case::new(
        "not of booleans",
        kernel,
        [4, 1, 1],
        vec![ptr(0), ptr(1), int(4096)],
        buffers,
    ));
    check_all(&cases, &targets());
}

#[test]
fn three_d_blocks_and_repeated_reductions() {
    let mut rng = Rng::new(16);
    let mut cases = Vec::new();
    for (a, b, c) in [(2u32, 4u32, 8u32), (4, 16, 32), (8, 2, 64), (16, 8, 1), (1, 32, 4)] {
        for axis in 0..3u32 {
            let kernel = build("reduce_3d", |k| {
                let (x, y, z, w) = (
                    k.arg_ptr("x", F32),
                    k.arg_ptr("y", F32),
                    k.arg_ptr("z", F32),
                    k.arg_ptr("w", I32),
                );
                let i = k.arange(0, a as i32).expand_dims(1).expand_dims(2);
                let j = k.arange(0, b as i32).expand_dims(0).expand_dims(2);
                let l = k.arange(0, c as i32).expand_dims(0).expand_dims(1);
                let v = k.load(x + (i * (b * c) as i32 + j * c as i32 + l));
                // Along one axis, kept and broadcast back.
                let m = v - v.reduce_with(ReduceOp::Max, axis, true);
                k.store(y + (i * (b * c) as i32 + j * c as i32 + l), m);
                // Twice: a slice of a slice, then to a scalar.
                let s = v.abs().sum(axis);
                let t = s.max(0);
                // The dimensions that remain after reducing `axis`.
                let kept: Vec<u32> = [a, b, c]
                    .iter()
                    .enumerate()
                    .filter(|&(d, _)| d != axis as usize)
                    .map(|(_, &n)| n)
                    .collect();
                let (n0, n1) = (kept[0], kept[1]);
                k.store(z + k.arange(0, n1 as i32), t);
                k.store(z + n1 as i32, t.max(0) + s.sum(1).sum(0));
                k.store(w + k.arange(0, n0 as i32), v.argmax(axis).max(1));
            });
            let n = (a * b * c) as usize;
            let buffers = vec![
                HostBuffer::from_slice(&rng.f32s(n, -8.0, 8.0)),
                HostBuffer::zeros(F32, n),
                HostBuffer::zeros(F32, 65),
                HostBuffer::zeros(I32, 64),
            ];
            cases.push(
                Case::new(
                    format!("3-D {a}x{b}x{c} along {axis}"),
                    kernel,
                    [1, 1, 1],
                    vec![ptr(0), ptr(1), ptr(2), ptr(3)],
                    buffers,
                )
                .tolerance(1e-6),
            );
        }
    }
    check_all(&cases, &targets());
}

#[test]
fn reductions_change_layouts_in_loops_and_branches() {
    let mut rng = Rng::new(17);
    let mut cases = Vec::new();
    for (rows, cols) in [(8u32, 32u32), (64, 4), (2, 256)] {
        let kernel = build("loop_layouts", |k| {
            let (x, y) = (k.arg_ptr("x", F32), k.arg_ptr("y", F32));
            let (steps, n) = (k.arg_i32("steps"), k.arg_i32("n"));
            let offs = offsets_2d(k, rows, cols, k.scalar(cols as i32, I32));
            // Carried row sums start in the default layout of [rows] and are replaced by a
            // reduction's slice layout; a carried column vector goes the other way.
            let init_rows = k.zeros(&[rows], F32);
            let init_cols = k.load(x + k.arange(0, cols as i32)).abs().expand_dims(0);
            let out = k.for_range(0, steps, 1, &[init_rows, init_cols], |i, c| {
                let v = k.load(x + i * (rows * cols) as i32 + offs).abs();
                let rows_sum = c[0] + v.sum(1);
                let cols_max = k.maximum(c[1], v.reduce_with(ReduceOp::Max, 0, true));
                let picked = k.if_else((i % 2).eq(0), || vec![rows_sum], || vec![rows_sum * 0.5]);
                vec![picked[0], cols_max]
            });
            k.store(y + k.arange(0, rows as i32), out[0]);
            k.store(y + rows as i32 + k.arange(0, cols as i32), out[1].sum(0));
            // Row sums as a row vector: expand_dims(0) of a slice along axis 1.
            let as_row = out[0].expand_dims(0).broadcast_to(&[cols, rows]);
            let t = as_row + k.arange(0, cols as i32).expand_dims(1).to(F32);
            let toffs = offsets_2d(k, cols, rows, k.scalar(rows as i32, I32));
            k.store_masked(y + (rows + cols) as i32 + toffs, t, toffs.lt(n));
        });
        let steps = 3;
        let size = (rows * cols) as usize;
        let buffers = vec![
            HostBuffer::from_slice(&rng.f32s(size * steps, -1.0, 1.0)),
            HostBuffer::zeros(F32, (rows + cols) as usize + size),
        ];
        let args = vec![ptr(0), ptr(1), int(steps as i64), int(size as i64 - 5)];
        cases.push(
            Case::new(
                format!("layouts through loops, {rows}x{cols}"),
                kernel,
                [1, 1, 1],
                args,
                buffers,
            )
            .tolerance(1e-6),
        );
    }
    check_all(&cases, &targets());
}

#[test]
fn scalars_grids_and_wide_offsets() {
    let mut rng = Rng::new(18);
    let mut cases = Vec::new();
    // Scalar loads and stores, program ids on three axes, i64 and u32 offsets.
    let kernel = build("scalars", |k| {
        let (x, y, z) = (k.arg_ptr("x", F32), k.arg_ptr("y", F32), k.arg_ptr("z", I32));
        let (p0, p1, p2) = (k.program_id(0), k.program_id(1), k.program_id(2));
        let id = (p2 * k.num_programs(1) + p1) * k.num_programs(0) + p0;
        let v = k.load(x + id);
        k.store(y + id, v * 2.0 + 1.0);
        let offs = (k.arange(0, 64).to(ScalarType::I64) + id.to(ScalarType::I64) * 64).to(ScalarType::I64);
        let w = k.load(x + 12 + offs);
        k.store(y + 12 + offs, k.where_(id.eq(3), w, -w));
        let u = k.arange(0, 64).to(ScalarType::U32) + (id * 64).to(ScalarType::U32);
        k.store(z + u, k.load(x + 12 + u).argmax(0) + id);
        let best = k.load(x + 12 + id * 64 + k.arange(0, 64)).argmax(0);
        k.store(z + 12 * 64 + best, id);
    });
    let grid = [3, 2, 2];
    let buffers = vec![
        HostBuffer::from_slice(&rng.f32s(12 + 12 * 64, -1.0, 1.0)),
        HostBuffer::zeros(F32, 12 + 12 * 64),
        HostBuffer::zeros(I32, 13 * 64),
    ];
    cases.push(Case::new(
        "scalars on a 3-D grid",
        kernel,
        grid,
        vec![ptr(0), ptr(1), ptr(2)],
        buffers,
    ));
    check_all(&cases, &targets());
}

#[test]
fn masks_from_every_comparison() {
    let mut rng = Rng::new(19);
    let mut cases = Vec::new();
    type Cmp = for<'a> fn(rutile_ir::Value<'a>, rutile_ir::Value<'a>) -> rutile_ir::Value<'a>;
    let comparisons: [(&str, Cmp); 10] = [
        ("offs < n", |o, n| o.lt(n)),
        ("offs <= n", |o, n| o.le(n)),
        ("offs > n", |o, n| o.gt(n)),
        ("offs >= n", |o, n| o.ge(n)),
        ("n < offs", |o, n| n.lt(o)),
        ("n <= offs", |o, n| n.le(o)),
        ("n > offs", |o, n| n.gt(o)),
        ("n >= offs", |o, n| n.ge(o)),
        ("offs == n", |o, n| o.eq(n)),
        ("offs != n", |o, n| o.ne(n)),
    ];
    for (what, cmp) in comparisons {
        let kernel = build("masks", |k| {
            let (x, y) = (k.arg_ptr("x", F32), k.arg_ptr("y", F32));
            let n = k.arg_i32("n");
            let offs = k.program_id(0) * 256 + k.arange(0, 256);
            let mask = cmp(offs, n);
            let v = k.load_masked(x + offs, mask, -1.0);
            k.store_masked(y + offs, v, mask);
            k.store(y + 512 + offs, v);
        });
        for n in [64, 80, 511] {
            let buffers = vec![
                HostBuffer::from_slice(&rng.f32s(512, -1.0, 1.0)),
                HostBuffer::zeros(F32, 1024),
            ];
            cases.push(Case::new(
                format!("mask {what} for n={n}"),
                kernel.clone(),
                [2, 1, 1],
                vec![ptr(0), ptr(1), int(n)],
                buffers,
            ));
        }
    }
    check_all(&cases, &targets());
}

#[test]
fn shape_sweep_2d() {
    let mut rng = Rng::new(20);
    let mut cases = Vec::new();
    let sizes = [1u32, 2, 4, 8, 32, 128, 512];
    for rows in sizes {
        for cols in sizes {
            if rows * cols > 8192 {
                continue;
            }
            let kernel = build("sweep", |k| {
                let (x, y, z) = (k.arg_ptr("x", F32), k.arg_ptr("y", F32), k.arg_ptr("z", I32));
                let (nr, nc) = (k.arg_i32("n_rows"), k.arg_i32("n_cols"));
                let r = k.arange(0, rows as i32).expand_dims(1);
                let c = k.arange(0, cols as i32).expand_dims(0);
                let mask = r.lt(nr) & c.lt(nc);
                let offs = r * cols as i32 + c;
                let v = k.load_masked(x + offs, mask, 0.5);
                let centered = v - v.reduce_with(ReduceOp::Max, 0, true) + v.reduce_with(ReduceOp::Min, 1, true);
                k.store_masked(y + offs, centered, mask);
                let t = (v * 2.0).trans();
                let toffs =
                    k.arange(0, cols as i32).expand_dims(1) * rows as i32 + k.arange(0, rows as i32).expand_dims(0);
                k.store(y + (rows * cols) as i32 + toffs, t);
                k.store(z + k.arange(0, cols as i32), v.argmax(0));
                k.store(z + cols as i32 + k.arange(0, rows as i32), v.argmin(1));
                k.store(z + (cols + rows) as i32, (v.abs() * 4.0).to(I32).sum(1).sum(0));
            });
            let n = (rows * cols) as usize;
            let x: Vec<f32> = rng.i32s(n, -3, 4).into_iter().map(|v| v as f32).collect();
            let buffers = vec![
                HostBuffer::from_slice(&x),
                HostBuffer::zeros(F32, 2 * n),
                HostBuffer::zeros(I32, (rows + cols + 1) as usize),
            ];
            let (nr, nc) = (rows.max(2) - 1, cols);
            let args = vec![ptr(0), ptr(1), ptr(2), int(nr as i64), int(nc as i64)];
            cases.push(Case::new(
                format!("sweep {rows}x{cols}"),
                kernel,
                [1, 1, 1],
                args,
                buffers,
            ));
        }
    }
    check_all(&cases, &targets());
}

// ---- decisions of the lowering ----

fn lowered(kernel: &Kernel, t: &Target, spec: &Specialization) -> ThreadKernel {
    lower(kernel, t, spec).unwrap_or_else(|e| panic!("{e}"))
}

/// Every statement of a kernel, depth first.
fn stmts(k: &ThreadKernel) -> Vec<Stmt> {
    let mut out = Vec::new();
    k.walk(&mut |s| out.push(s.clone()));
    out
}

/// The widths of the global loads and stores.
fn global_widths(k: &ThreadKernel) -> (Vec<usize>, Vec<usize>) {
    let (mut loads, mut stores) = (Vec::new(), Vec::new());
    for s in stmts(k) {
        match s {
            Stmt::Load {
                dsts,
                mem: rutile_ir::thread::Memory::Global { .. },
                ..
            } => loads.push(dsts.len()),
            Stmt::Store {
                values,
                mem: rutile_ir::thread::Memory::Global { .. },
                ..
            } => stores.push(values.len()),
            _ => {}
        }
    }
    (loads, stores)
}

fn shuffles(k: &ThreadKernel) -> usize {
    stmts(k)
        .iter()
        .filter(|s| {
            matches!(
                s,
                Stmt::Set {
                    expr: Expr::ShuffleXor { .. } | Expr::ShuffleIdx { .. },
                    ..
                }
            )
        })
        .count()
}

#[test]
fn vector_add_moves_16_bytes_when_divisible() {
    let kernel = seeds::vector_add(F32, 1024).unwrap();
    let t = target(32, 4, true);
    let (loads, stores) = global_widths(&lowered(&kernel, &t, &Specialization::all(4)));
    assert!(!loads.is_empty() && loads.iter().all(|&w| w == 4), "{loads:?}");
    assert!(!stores.is_empty() && stores.iter().all(|&w| w == 4), "{stores:?}");
    // Without n divisible by 16 the mask is not constant over 4 elements; without the
    // pointers divisible, the vectors are not aligned.
    let mut n_unknown = Specialization::all(4);
    n_unknown.divisible_by_16[3] = false;
    let mut x_unknown = Specialization::all(4);
    x_unknown.divisible_by_16[0] = false;
    for spec in [Specialization::none(4), n_unknown, x_unknown] {
        let (loads, stores) = global_widths(&lowered(&kernel, &t, &spec));
        let all = loads.iter().chain(&stores);
        assert!(all.clone().all(|&w| w == 1), "{spec:?}: {loads:?} {stores:?}");
    }
    // f16: 8 per 16 bytes; 8-byte vectors: 2 f32.
    let (loads, _) = global_widths(&lowered(
        &seeds::vector_add(F16, 1024).unwrap(),
        &t,
        &Specialization::all(4),
    ));
    assert!(loads.iter().all(|&w| w == 8), "{loads:?}");
    let narrow = Target {
        max_vector_bytes: 8,
        ..t
    };
    let (loads, _) = global_widths(&lowered(&kernel, &narrow, &Specialization::all(4)));
    assert!(loads.iter().all(|&w| w == 2), "{loads:?}");
}

#[test]
fn reductions_shuffle_only_when_the_target_can() {
    let kernel = seeds::softmax(1024).unwrap();
    let spec = Specialization::all(6);
    assert!(shuffles(&lowered(&kernel, &target(32, 4, true), &spec)) > 0);
    assert_eq!(shuffles(&lowered(&kernel, &target(32, 4, false), &spec)), 0);
    assert_eq!(shuffles(&lowered(&kernel, &target(8, 2, false), &spec)), 0);
}

#[test]
fn shared_memory_is_reported_and_limited() {
    let kernel = seeds::softmax(1024).unwrap();
    let spec = Specialization::all(6);
    // One warp with shuffles needs none; 4 warps exchange one f32 per warp; without
    // shuffles, one per thread.
    assert_eq!(lowered(&kernel, &target(32, 1, true), &spec).shared_bytes(), 0);
    let four = lowered(&kernel, &target(32, 4, true), &spec);
    assert_eq!(four.shared_bytes(), 16);
    assert_eq!(
        four.shared
            .iter()
            .map(|a| a.len * a.elem.size_bytes() as u32)
            .sum::<u32>(),
        16
    );
    // (This target reduces the f32 max on i32 keys, in a buffer of their own.)
    assert_eq!(
        lowered(&kernel, &target(32, 4, false), &spec).shared_bytes(),
        2 * 4 * 128
    );
    let native = Target {
        native_float_minmax: true,
        ..target(32, 4, false)
    };
    assert_eq!(lowered(&kernel, &native, &spec).shared_bytes(), 4 * 128);
    let tiny = Target {
        max_shared_bytes: 8,
        ..target(32, 4, true)
    };
    match lower(&kernel, &tiny, &spec) {
        Err(LowerError::OutOfSharedMemory {
            needed: 16, limit: 8, ..
        }) => {}
        other => panic!("expected OutOfSharedMemory, got {other:?}"),
    }
}

/// Where the backend holds bf16 and 8- and 16-bit integers in 4-byte words in shared
/// memory (SPIR-V), the limit counts them so: a bf16 matmul whose operand tiles fill 48 KiB
/// as bf16 needs 96 KiB there and is refused, where the same f16 one fits.
#[test]
fn narrow_shared_buffers_count_as_words_where_the_backend_widens_them() {
    let spec = Specialization::default();
    for (input, fits) in [(ScalarType::F16, true), (ScalarType::BF16, false)] {
        let meta = seeds::MatmulMeta {
            input,
            output: input,
            ..seeds::MatmulMeta::fp16(128, 256, 64)
        };
        let kernel = seeds::matmul(&meta).unwrap();
        let vulkan = Target::vulkan(32, 8, 48 * 1024);
        assert!(vulkan.narrow_shared_in_words);
        match lower(&kernel, &vulkan, &spec) {
            Ok(k) => {
                assert!(fits, "{input}");
                assert_eq!(k.shared_bytes(), 48 * 1024);
            }
            Err(LowerError::OutOfSharedMemory { needed, limit, .. }) => {
                assert!(!fits, "{input}");
                assert_eq!((needed, limit), (96 * 1024, 48 * 1024));
            }
            Err(e) => panic!("{input}: {e}"),
        }
        // Counted in their own size where the backend stores them so (PTX).
        let ptx = Target {
            narrow_shared_in_words: false,
            ..vulkan
        };
        let k = lower(&kernel, &ptx, &spec).unwrap();
        assert_eq!(k.shared_bytes(), 48 * 1024, "{input}");
    }
}

#[test]
fn unsupported_kernels_and_targets_are_errors() {
    // The operands of a 256x256x128 fp16 dot need 128 KiB of shared memory.
    let matmul = seeds::matmul(&seeds::MatmulMeta::fp16(256, 256, 128)).unwrap();
    match lower(&matmul, &target(32, 4, true), &Specialization::none(12)) {
        Err(LowerError::OutOfSharedMemory { needed, .. }) if needed >= 128 * 1024 => {}
        other => panic!("expected the dot to need too much shared memory, got {other:?}"),
    }
    let kernel = seeds::vector_add(F32, 1024).unwrap();
    assert!(matches!(
        lower(&kernel, &target(32, 3, true), &Specialization::none(4)),
        Err(LowerError::InvalidConfig(_))
    ));
    assert!(matches!(
        lower(&kernel, &target(24, 2, true), &Specialization::none(4)),
        Err(LowerError::InvalidConfig(_))
    ));
}

#[test]
fn too_many_threads_and_edited_kernels_are_errors() {
    let kernel = seeds::vector_add(F32, 1024).unwrap();
    // 2^16 warps of 2^16 threads overflow a u32 count (in the layouts, before).
    match lower(&kernel, &target(1 << 16, 1 << 16, true), &Specialization::none(4)) {
        Err(e @ LowerError::InvalidConfig(_)) => {
            assert!(
                e.to_string().contains("4294967296 threads per program; at most 65536"),
                "{e}"
            )
        }
        other => panic!("expected too many threads, got {other:?}"),
    }
    // A kernel's fields are public: a load edited to give pointers fails the verifier, where
    // the lowering took its result to be numbers (an unwrap of `None`, before).
    let mut edited = kernel.clone();
    let load = edited
        .insts
        .iter()
        .find_map(|(_, i)| matches!(i.op, Op::Load { .. }).then(|| i.results[0]))
        .unwrap();
    edited.values[load].ty.elem = Elem::Ptr(F32);
    match lower(&edited, &target(32, 4, true), &Specialization::none(4)) {
        Err(e @ LowerError::Invalid(_)) => assert!(e.to_string().contains("`load`"), "{e}"),
        other => panic!("expected the verifier's error, got {other:?}"),
    }
}

#[test]
fn a_false_specialization_is_caught_by_the_simulator() {
    // n = 98433 is not divisible by 16: a kernel that assumes it reads past the end.
    let n = 98_433;
    let kernel = seeds::vector_add(F32, 1024).unwrap();
    let tk = lowered(&kernel, &target(32, 4, true), &Specialization::all(4));
    let mut buffers = [
        HostBuffer::zeros(F32, n),
        HostBuffer::zeros(F32, n),
        HostBuffer::zeros(F32, n),
    ];
    let err = simt::run_threads(&tk, [97, 1, 1], &[ptr(0), ptr(1), ptr(2), int(n as i64)], &mut buffers).unwrap_err();
    assert!(
        matches!(
            err,
            InterpError::ThreadFault {
                kind: FaultKind::OutOfBounds,
                program: [96, 0, 0],
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("lowered from load at core-ir/src/seeds/vector_add.rs"),
        "{err}"
    );
}

#[test]
fn reductions_of_other_types_and_moved_pointers() {
    let mut rng = Rng::new(21);
    let mut cases = Vec::new();
    let bytes = |rng: &mut Rng, t: ScalarType, n: usize| {
        let raw = rng.bytes(n * t.size_bytes());
        HostBuffer::from_bytes(t, raw).unwrap()
    };
    for (rows, cols) in [(0u32, 64u32), (8, 32), (32, 8)] {
        let n = (rows.max(1) * cols) as usize;
        for axis in [0, 1] {
            if rows == 0 && axis == 1 {
                continue;
            }
            for t in [
                ScalarType::U8,
                ScalarType::I64,
                ScalarType::U32,
                ScalarType::U64,
                ScalarType::I16,
            ] {
                for op in [
                    ReduceOp::Sum,
                    ReduceOp::Max,
                    ReduceOp::Min,
                    ReduceOp::ArgMax,
                    ReduceOp::ArgMin,
                ] {
                    cases.push(reduce_case(op, bytes(&mut rng, t, n), rows, cols, axis));
                }
            }
            let bools: Vec<bool> = (0..n).map(|_| rng.next_u64() % 5 == 0).collect();
            for op in [ReduceOp::Max, ReduceOp::Min, ReduceOp::ArgMax, ReduceOp::ArgMin] {
                cases.push(reduce_case(op, HostBuffer::from_bools(&bools), rows, cols, axis));
            }
        }
    }
    // Pointer blocks reshaped and transposed before the load.
    let kernel = build("moved_pointers", |k| {
        let (x, y) = (k.arg_ptr("x", F32), k.arg_ptr("y", F32));
        let p = x + offsets_2d(k, 16, 8, k.scalar(8, I32));
        let v = k.load(p.trans());
        k.store(y + offsets_2d(k, 8, 16, k.scalar(16, I32)), v);
        let q = p.reshape(&[128]);
        k.store(y + 128 + k.arange(0, 128), k.load(q) + 1.0);
    });
    let buffers = vec![
        HostBuffer::from_slice(&rng.f32s(128, -1.0, 1.0)),
        HostBuffer::zeros(F32, 256),
    ];
    cases.push(Case::new(
        "moved pointers",
        kernel,
        [1, 1, 1],
        vec![ptr(0), ptr(1)],
        buffers,
    ));
    check_all(&cases, &targets());
}

/// The block IR orders a program's memory ops (the interpreter runs them one after
/// another); per-thread IR orders only each thread's own, so the lowering puts a barrier
/// where threads could meet on global memory. Here one thread stores the scalar and every
/// thread loads it back (read after write), then stores where others read (write after
/// read), also in a loop; the simulator, which reports any missing barrier, must agree
/// with the interpreter.
#[test]
fn global_accesses_of_different_threads_are_ordered() {
    let kernel = build("store_then_load", |k| {
        let y = k.arg_ptr("y", I32);
        k.store(y, k.program_id(0) + 5);
        let v = k.load(y);
        k.store(y + 1 + k.arange(0, 64), v + k.arange(0, 64));
        // Every thread reads element 0, then the owner overwrites it, three times.
        k.for_each(0, 3, 1, |i| {
            let w = k.load(y + k.arange(0, 16));
            k.store(y, w.sum(0) + i);
        });
    });
    for t in [target(32, 4, true), target(8, 4, true), target(32, 2, false)] {
        let tk = lowered(&kernel, &t, &Specialization::none(1));
        let mut got = [HostBuffer::zeros(I32, 65)];
        simt::run_threads(&tk, [1, 1, 1], &[ptr(0)], &mut got).unwrap_or_else(|e| panic!("{e}\n{tk}"));
        let mut want = [HostBuffer::zeros(I32, 65)];
        interp::run(&kernel, [1, 1, 1], &[ptr(0)], &mut want).unwrap();
        assert_eq!(got[0].to_vec::<i32>().unwrap(), want[0].to_vec::<i32>().unwrap());
    }
}

#[test]
fn nested_loops_with_reductions_and_wide_bounds() {
    let mut rng = Rng::new(22);
    let mut cases = Vec::new();
    for (rows, cols) in [(4u32, 64u32), (32, 8)] {
        let kernel = build("nested", |k| {
            let (x, y) = (k.arg_ptr("x", F32), k.arg_ptr("y", F32));
            let (outer, inner) = (k.arg_scalar("outer", ScalarType::I64), k.arg_i32("inner"));
            let offs = offsets_2d(k, rows, cols, k.scalar(cols as i32, I32));
            let init = k.zeros(&[rows], F32);
            // i64 bounds counting down; an inner loop whose reductions go through shared
            // memory every iteration; a while loop carrying a row vector of a reduction.
            let out = k.for_range(outer, k.scalar(0, ScalarType::I64), -1, &[init], |i, c| {
                let base = (i - 1).to(I32) * (rows * cols) as i32;
                let inner_out = k.for_range(0, inner, 1, &[c[0]], |j, d| {
                    let v = k.load(x + base + offs) + j.to(F32);
                    vec![d[0] + v.max(1) - v.min(1)]
                });
                vec![inner_out[0]]
            });
            k.store(y + k.arange(0, rows as i32), out[0]);
            let w = k.while_loop(
                &[out[0].expand_dims(0), k.scalar(0, I32)],
                |c| c[0].max(1).max(0).gt(1.0) & c[1].lt(50),
                |c| vec![c[0] * 0.5 - 0.25, c[1] + 1],
            );
            k.store(y + rows as i32 + k.arange(0, rows as i32).expand_dims(0), w[0]);
            k.store(y + 2 * rows as i32, w[1].to(F32));
        });
        let n = (rows * cols) as usize;
        let buffers = vec![
            HostBuffer::from_slice(&rng.f32s(3 * n, -1.0, 1.0)),
            HostBuffer::zeros(F32, 2 * rows as usize + 1),
        ];
        let args = vec![ptr(0), ptr(1), int(3), int(2)];
        cases.push(Case::new(format!("nested loops {rows}x{cols}"), kernel, [1, 1, 1], args, buffers).tolerance(1e-6));
    }
    check_all(&cases, &targets());
}

#[test]
fn rows_at_a_divisible_stride_still_vectorize() {
    // x + r[:, None] * stride + c[None, :]: 16-byte vectors when the stride is divisible by
    // 16, single elements otherwise; the same for rows at 16 r and at 3 r.
    let kernel = build("strided_rows", |k| {
        let (x, y) = (k.arg_ptr("x", F32), k.arg_ptr("y", F32));
        let stride = k.arg_i32("stride");
        let r = k.arange(0, 32);
        let c = k.arange(0, 64);
        let v = k.load(x + r.expand_dims(1) * stride + c.expand_dims(0));
        k.store(y + offsets_2d(k, 32, 64, k.scalar(64, I32)), v);
    });
    let t = target(32, 4, true);
    let (loads, _) = global_widths(&lowered(&kernel, &t, &Specialization::all(3)));
    assert!(loads.iter().all(|&w| w == 4), "{loads:?}");
    let mut odd = Specialization::all(3);
    odd.divisible_by_16[2] = false;
    let (loads, _) = global_widths(&lowered(&kernel, &t, &odd));
    assert!(loads.iter().all(|&w| w == 1), "{loads:?}");
    let at_16r = gather_rows("rows", 32, 64, |_, r| r * 16);
    let (loads, _) = global_widths(&lowered(&at_16r, &t, &Specialization::all(2)));
    assert!(loads.iter().all(|&w| w == 4), "{loads:?}");
    let at_3r = gather_rows("rows", 32, 64, |_, r| r * 3);
    let (loads, _) = global_widths(&lowered(&at_3r, &t, &Specialization::all(2)));
    assert!(loads.iter().all(|&w| w == 1), "{loads:?}");
}

/// The layer-norm forward of Triton's tutorial: loops over column blocks accumulate the mean
/// and the variance, scalar stores of the statistics, then the normalized row.
fn layer_norm(block: u32) -> Kernel {
    build("layer_norm_fwd", |k| {
        let (x, y, w, b) = (
            k.arg_ptr("X", F32),
            k.arg_ptr("Y", F32),
            k.arg_ptr("W", F32),
            k.arg_ptr("B", F32),
        );
        let (mean_ptr, rstd_ptr) = (k.arg_ptr("Mean", F32), k.arg_ptr("Rstd", F32));
        let (stride, n) = (k.arg_i32("stride"), k.arg_i32("N"));
        let eps = k.arg_scalar("eps", F32);
        let row = k.program_id(0);
        let (x, y) = (x + row * stride, y + row * stride);
        let cols = k.arange(0, block as i32);
        let sum = k.for_range(0, n, block as i32, &[k.zeros(&[block], F32)], |off, c| {
            let a = k.load_masked(x + off + cols, (off + cols).lt(n), 0.0);
            vec![c[0] + a]
        });
        let mean = sum[0].sum(0) / n.to(F32);
        let var = k.for_range(0, n, block as i32, &[k.zeros(&[block], F32)], |off, c| {
            let m = (off + cols).lt(n);
            let a = k.load_masked(x + off + cols, m, 0.0);
            let d = k.where_(m, a - mean, 0.0);
            vec![c[0] + d * d]
        });
        let rstd = (var[0].sum(0) / n.to(F32) + eps).rsqrt();
        k.store(mean_ptr + row, mean);
        k.store(rstd_ptr + row, rstd);
        k.for_each(0, n, block as i32, |off| {
            let m = (off + cols).lt(n);
            let (wv, bv) = (
                k.load_masked(w + off + cols, m, 0.0),
                k.load_masked(b + off + cols, m, 0.0),
            );
            let a = k.load_masked(x + off + cols, m, 0.0);
            k.store_masked(y + off + cols, (a - mean) * rstd * wv + bv, m);
        });
    })
}

#[test]
fn layer_norm_matches_the_interpreter() {
    let mut rng = Rng::new(24);
    let mut cases = Vec::new();
    for (rows, n, block) in [(3usize, 1000usize, 256u32), (2, 64, 64), (4, 1, 16), (1, 4096, 1024)] {
        let buffers = vec![
            HostBuffer::from_slice(&rng.f32s(rows * n, -3.0, 3.0)),
            HostBuffer::zeros(F32, rows * n),
            HostBuffer::from_slice(&rng.f32s(n, -1.0, 1.0)),
            HostBuffer::from_slice(&rng.f32s(n, -1.0, 1.0)),
            HostBuffer::zeros(F32, rows),
            HostBuffer::zeros(F32, rows),
        ];
        let args = vec![
            ptr(0),
            ptr(1),
            ptr(2),
            ptr(3),
            ptr(4),
            ptr(5),
            int(n as i64),
            int(n as i64),
            ArgValue::Float(1e-5),
        ];
        let name = format!("layer norm {rows}x{n}, block {block}");
        let case = Case::new(name, layer_norm(block), [rows as u32, 1, 1], args, buffers);
        // x - mean cancels: the mean's rounding (sums in another order) shows as absolute error.
        cases.push(case.tolerance(1e-5).absolute_tolerance(1e-5));
    }
    check_all(&cases, &targets());
}

// ---- dot ----

/// The seed matmul (fp16 in, f32 accumulation, grouped ordering, a loop over K) on ragged
/// sizes: bit for bit the interpreter's result (products of f16 are exact in f32 and both
/// accumulate in the order of k).
#[test]
fn matmul_seed_matches_the_interpreter() {
    let mut rng = Rng::new(41);
    let mut cases = Vec::new();
    for (bm, bn, bk) in [(16, 16, 16), (32, 16, 32)] {
        for activation in [None, Some(seeds::Activation::LeakyRelu)] {
            for (m, n, kk) in [(16usize, 16usize, 16usize), (37, 21, 19)] {
                let meta = seeds::MatmulMeta {
                    group_m: 2,
                    activation,
                    ..seeds::MatmulMeta::fp16(bm, bn, bk)
                };
                let kernel = seeds::matmul(&meta).unwrap();
                let a = rng.f16s(m * kk, -1.0, 1.0);
                let b = rng.f16s(kk * n, -1.0, 1.0);
                let buffers = vec![
                    HostBuffer::from_slice(&a),
                    HostBuffer::from_slice(&b),
                    HostBuffer::zeros(F16, m * n),
                ];
                let args: Vec<ArgValue> = [ptr(0), ptr(1), ptr(2)]
                    .into_iter()
                    .chain(seeds::matmul_row_major_args(m, n, kk).map(|v| int(v as i64)))
                    .collect();
                let grid = [seeds::matmul_grid(&meta, m as u32, n as u32), 1, 1];
                cases.push(Case::new(
                    format!("matmul {m}x{n}x{kk} blocks {bm}x{bn}x{bk} {activation:?}"),
                    kernel,
                    grid,
                    args,
                    buffers,
                ));
            }
        }
    }
    check_all(&cases, &targets()[..4]);
}

/// `dot` of f32, f64 and f16 blocks, with an accumulator that is also used afterwards,
/// operands in layouts of their own (a transposed load) and a dot inside a loop.
#[test]
fn dots_of_every_accumulator_type() {
    let mut rng = Rng::new(42);
    let mut cases = Vec::new();
    for (ty, acc_ty) in [(F32, F32), (ScalarType::F64, ScalarType::F64), (F16, F32)] {
        let (m, n, kk) = (16u32, 32u32, 16u32);
        let kernel = build("dots", |k| {
            let a = k.arg_ptr("a", ty);
            let b = k.arg_ptr("b", ty);
            let c = k.arg_ptr("c", acc_ty);
            let (am, ak) = (
                k.arange(0, m as i32).expand_dims(1),
                k.arange(0, kk as i32).expand_dims(0),
            );
            let (bk, bn) = (
                k.arange(0, kk as i32).expand_dims(1),
                k.arange(0, n as i32).expand_dims(0),
            );
            let x = k.load(a + am * kk as i32 + ak);
            // b is stored transposed: load [n, k] and transpose it.
            let yt = k.load(b + bn.trans() * kk as i32 + bk.trans());
            let y = yt.trans();
            let acc0 = k.zeros(&[m, n], acc_ty);
            let r = k.for_range(0, 3, 1, &[acc0], |_, c| vec![k.dot_acc(x, y, c[0])]);
            let (cm, cn) = (
                k.arange(0, m as i32).expand_dims(1),
                k.arange(0, n as i32).expand_dims(0),
            );
            k.store(c + cm * n as i32 + cn, r[0] + r[0]);
        });
        let (a, b) = if ty == F16 {
            (
                HostBuffer::from_slice(&rng.f16s((m * kk) as usize, -2.0, 2.0)),
                HostBuffer::from_slice(&rng.f16s((kk * n) as usize, -2.0, 2.0)),
            )
        } else if ty == F32 {
            (
                HostBuffer::from_slice(&rng.f32s((m * kk) as usize, -2.0, 2.0)),
                HostBuffer::from_slice(&rng.f32s((kk * n) as usize, -2.0, 2.0)),
            )
        } else {
            let f = |rng: &mut Rng, len: u32| (0..len).map(|_| rng.uniform(-2.0, 2.0)).collect::<Vec<f64>>();
            (
                HostBuffer::from_slice(&f(&mut rng, m * kk)),
                HostBuffer::from_slice(&f(&mut rng, kk * n)),
            )
        };
        let buffers = vec![a, b, HostBuffer::zeros(acc_ty, (m * n) as usize)];
        cases.push(Case::new(
            format!("dot {ty} -> {acc_ty}"),
            kernel,
            [1, 1, 1],
            vec![ptr(0), ptr(1), ptr(2)],
            buffers,
        ));
    }
    check_all(&cases, &targets());
}

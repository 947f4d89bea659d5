//! Per-access layouts: kernels whose loads and stores are contiguous along different axes
//! (transposes, permutes, column-major strides, operands loaded two ways) are lowered for
//! many targets, run by the SIMT simulator and compared with the interpreter; the layouts
//! chosen are checked in the per-thread IR, and the conversions between them for bank
//! conflicts.

use rutile_ir::interp::{self, simt, ArgValue, HostBuffer};
use rutile_ir::lower::lower;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::testing::Rng;
use rutile_ir::thread::{Memory, Stmt, ThreadKernel};
use rutile_ir::ScalarType::{self, F16, F32, I32, I8};
use rutile_ir::{Kernel, KernelBuilder, Value};

fn ptr(buffer: usize) -> ArgValue {
    ArgValue::Ptr { buffer, offset: 0 }
}

fn target(warp_size: u32, num_warps: u32) -> Target {
    Target {
        native_float_minmax: true,
        ..Target::vulkan(warp_size, num_warps, 64 * 1024)
    }
}

/// Warps of 32 (NVIDIA), 8 (lavapipe), 64 (AMD) and 16, over 1 to 16 warps.
fn targets() -> Vec<Target> {
    vec![
        target(32, 1),
        target(32, 2),
        target(32, 4),
        target(32, 8),
        target(8, 4),
        target(64, 2),
        target(16, 16),
    ]
}

/// The specialization the runtime would make: arguments divisible by 16 said so.
fn spec(args: &[ArgValue], buffers: &[HostBuffer]) -> Specialization {
    Specialization {
        divisible_by_16: args
            .iter()
            .map(|a| match *a {
                ArgValue::Ptr { buffer, offset } => offset * buffers[buffer].elem().size_bytes() % 16 == 0,
                ArgValue::Int(i) => i % 16 == 0,
                _ => false,
            })
            .collect(),
        equal_to_1: args.iter().map(|a| matches!(a, ArgValue::Int(1))).collect(),
    }
}

/// Lowers `kernel` for every target, with the honest and the empty specialization, runs
/// it in the simulator and compares every buffer with the interpreter's, bit for bit.
fn check(name: &str, kernel: &Kernel, grid: [u32; 3], args: &[ArgValue], buffers: &[HostBuffer]) {
    let mut want = buffers.to_vec();
    interp::run(kernel, grid, args, &mut want).unwrap_or_else(|e| panic!("{name}: interpreter: {e}"));
    for t in targets() {
        for s in [spec(args, buffers), Specialization::none(args.len())] {
            let tk = lower(kernel, &t, &s).unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut got = buffers.to_vec();
            simt::run_threads(&tk, grid, args, &mut got)
                .unwrap_or_else(|e| panic!("{name} [warp {} x {}]: {e}\n{tk}", t.warp_size, t.num_warps));
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    g.as_bytes() == w.as_bytes(),
                    "{name} [warp {} x {}, {:?}]: buffer {i} differs from the interpreter's",
                    t.warp_size,
                    t.num_warps,
                    s.divisible_by_16
                );
            }
        }
    }
}

fn random(rng: &mut Rng, elem: ScalarType, n: usize) -> HostBuffer {
    match elem {
        F32 => HostBuffer::from_slice(&rng.f32s(n, -4.0, 4.0)),
        F16 => HostBuffer::from_slice(&rng.f16s(n, -4.0, 4.0)),
        I32 => HostBuffer::from_slice(&rng.i32s(n, -1000, 1000)),
        I8 => HostBuffer::from_slice(&rng.bytes(n).iter().map(|&b| b as i8).collect::<Vec<i8>>()),
        _ => unreachable!("not used here"),
    }
}

/// `[rows, cols]` offsets `r * row_stride + c * col_stride` of a tile at `(r0, c0)`, and
/// the mask `r < m & c < n`.
fn tile<'b>(
    k: &'b KernelBuilder,
    (rows, cols): (u32, u32),
    (r0, c0): (Value<'b>, Value<'b>),
    (m, n): (Value<'b>, Value<'b>),
) -> (Value<'b>, Value<'b>, Value<'b>) {
    let r = (r0 + k.arange(0, rows as i32)).expand_dims(1);
    let c = (c0 + k.arange(0, cols as i32)).expand_dims(0);
    (r, c, r.lt(m) & c.lt(n))
}

/// A tiled transpose as a user writes it: load `x[r, c]` (rows of `x` contiguous), store
/// `out[c, r]` (contiguous along the tile's rows).
fn transpose(elem: ScalarType, rows: u32, cols: u32) -> Kernel {
    Kernel::build("transpose", |k| {
        let (x, out) = (k.arg_ptr("x", elem), k.arg_ptr("out", elem));
        let (m, n) = (k.arg_i32("m"), k.arg_i32("n"));
        let r0 = k.program_id(0) * rows as i32;
        let c0 = k.program_id(1) * cols as i32;
        let (r, c, mask) = tile(k, (rows, cols), (r0, c0), (m, n));
        let v = k.load_masked(x + (r * n + c), mask, 0);
        k.store_masked(out + (c * m + r), v, mask);
    })
    .unwrap()
}

#[test]
fn transposes_match_the_interpreter() {
    let mut rng = Rng::new(22);
    for (elem, rows, cols, m, n) in [
        (F32, 64u32, 64u32, 128usize, 64usize),
        (F32, 32, 32, 100, 77),
        (F32, 16, 64, 33, 130),
        (F16, 64, 32, 64, 96),
        (I8, 32, 64, 40, 70),
        (I32, 8, 4, 9, 5),
    ] {
        let kernel = transpose(elem, rows, cols);
        let buffers = vec![random(&mut rng, elem, m * n), random(&mut rng, elem, m * n)];
        let grid = [(m as u32).div_ceil(rows), (n as u32).div_ceil(cols), 1];
        let args = [ptr(0), ptr(1), ArgValue::Int(m as i64), ArgValue::Int(n as i64)];
        check(
            &format!("transpose {elem} {rows}x{cols} of {m}x{n}"),
            &kernel,
            grid,
            &args,
            &buffers,
        );
    }
}

/// A 3-D permute: `x[i, j, l]` (contiguous along `l`) to `out[l, j, i]` (contiguous
/// along `i`), through pointers alone.
#[test]
fn three_d_permutes_match_the_interpreter() {
    let mut rng = Rng::new(23);
    for (a, b, c) in [(8u32, 4u32, 16u32), (16, 2, 32), (4, 8, 8), (32, 1, 32)] {
        let kernel = Kernel::build("permute_3d", |k| {
            let (x, out) = (k.arg_ptr("x", F32), k.arg_ptr("out", F32));
            let i = k.arange(0, a as i32).expand_dims(1).expand_dims(2);
            let j = k.arange(0, b as i32).expand_dims(0).expand_dims(2);
            let l = k.arange(0, c as i32).expand_dims(0).expand_dims(1);
            let v = k.load(x + (i * (b * c) as i32 + j * c as i32 + l));
            k.store(out + (l * (a * b) as i32 + j * a as i32 + i), v * 2.0);
        })
        .unwrap();
        let n = (a * b * c) as usize;
        let buffers = vec![random(&mut rng, F32, n), random(&mut rng, F32, n)];
        check(
            &format!("permute {a}x{b}x{c}"),
            &kernel,
            [1, 1, 1],
            &[ptr(0), ptr(1)],
            &buffers,
        );
    }
}

/// Column-major operands: `a` is read down its columns, `b` along its rows, added (one of
/// them converted to the other's layout), and the sum stored both ways.
#[test]
fn operands_loaded_along_different_axes_meet() {
    let mut rng = Rng::new(24);
    for (rows, cols, m, n) in [(32u32, 64u32, 32usize, 64usize), (64, 16, 50, 13), (16, 16, 16, 16)] {
        let kernel = Kernel::build("column_major", |k| {
            let (a, b) = (k.arg_ptr("a", F32), k.arg_ptr("b", F32));
            let (out_r, out_c) = (k.arg_ptr("out_r", F32), k.arg_ptr("out_c", F32));
            let (m, n) = (k.arg_i32("m"), k.arg_i32("n"));
            let zero = k.scalar(0, I32);
            let (r, c, mask) = tile(k, (rows, cols), (zero, zero), (m, n));
            let va = k.load_masked(a + (c * m + r), mask, 1.0);
            let vb = k.load_masked(b + (r * n + c), mask, 2.0);
            let s = va + vb * va.exp();
            k.store_masked(out_r + (r * n + c), s, mask);
            k.store_masked(out_c + (c * m + r), s - vb, mask);
        })
        .unwrap();
        let len = m * n;
        let buffers: Vec<HostBuffer> = (0..4).map(|_| random(&mut rng, F32, len)).collect();
        let args = [
            ptr(0),
            ptr(1),
            ptr(2),
            ptr(3),
            ArgValue::Int(m as i64),
            ArgValue::Int(n as i64),
        ];
        check(
            &format!("column-major {rows}x{cols} of {m}x{n}"),
            &kernel,
            [1, 1, 1],
            &args,
            &buffers,
        );
    }
}

/// `out` from `tl.trans` of a loaded `rows x cols` tile `x` (row-major), `v[i, j] =
/// x[j, i]`, stored at `i * rows + j` (row-major: `v` moves between threads) or, as a copy,
/// at `j * cols + i` (contiguous along `v`'s rows, which are `x`'s columns as loaded).
fn trans_kernel(rows: u32, cols: u32, as_copy: bool) -> Kernel {
    Kernel::build("trans", |k| {
        let (x, out) = (k.arg_ptr("x", F32), k.arg_ptr("out", F32));
        let r = k.arange(0, rows as i32).expand_dims(1);
        let c = k.arange(0, cols as i32).expand_dims(0);
        let v = k.load(x + (r * cols as i32 + c)).trans();
        let i = k.arange(0, cols as i32).expand_dims(1);
        let j = k.arange(0, rows as i32).expand_dims(0);
        match as_copy {
            false => k.store(out + (i * rows as i32 + j), v),
            true => k.store(out + (j * cols as i32 + i), v * 2.0),
        }
    })
    .unwrap()
}

/// `trans` both ways on every target against the interpreter.
fn check_trans(seed: u64, as_copy: bool) {
    let mut rng = Rng::new(seed);
    for (rows, cols) in [(64u32, 64u32), (16, 128), (8, 8)] {
        let kernel = trans_kernel(rows, cols, as_copy);
        if as_copy {
            // `trans` renames the dimensions of its operand's layout: stored along the
            // loaded rows again, nothing moves between threads.
            for t in targets() {
                let tk = lower(&kernel, &t, &Specialization::all(2)).unwrap();
                let mut barriers = 0;
                tk.walk(&mut |s| barriers += matches!(s, Stmt::Barrier) as usize);
                let at = format!("{rows}x{cols} [warp {} x {}]", t.warp_size, t.num_warps);
                assert_eq!(barriers, 0, "{at}: {tk}");
            }
        }
        let n = (rows * cols) as usize;
        let buffers = vec![random(&mut rng, F32, n), random(&mut rng, F32, n)];
        let name = format!("trans {rows}x{cols}, as a copy: {as_copy}");
        check(&name, &kernel, [1, 1, 1], &[ptr(0), ptr(1)], &buffers);
    }
}

/// `tl.trans` of a loaded tile stored row-major: the permute's conversion is swizzled too.
#[test]
fn trans_then_store_matches_the_interpreter() {
    check_trans(25, false);
}

/// `trans` renames the dimensions of its operand's layout: a loaded tile, transposed and
/// stored through a pointer contiguous along the transposed tile's rows (the tile's
/// columns as they were loaded: a copy), moves nothing between threads, on every target.
#[test]
fn trans_is_a_renaming_of_the_layout() {
    check_trans(26, true);
}

/// The comment of the first statement lowered from a block op named `op`.
fn comment_of(tk: &ThreadKernel, op: &str) -> Vec<String> {
    let mut out = Vec::new();
    tk.walk(&mut |s| {
        if let Stmt::Comment(c) = s {
            if c.starts_with(&format!("{op} at ")) {
                out.push(c.clone());
            }
        }
    });
    out
}

/// The widths of the global stores and loads, and how many shared accesses there are.
fn widths(tk: &ThreadKernel) -> (Vec<usize>, Vec<usize>, usize) {
    let (mut loads, mut stores, mut shared) = (Vec::new(), Vec::new(), 0);
    tk.walk(&mut |s| match s {
        Stmt::Load { dsts, mem, .. } => match mem {
            Memory::Global { .. } => loads.push(dsts.len()),
            Memory::Shared { .. } => shared += 1,
        },
        Stmt::Store { values, mem, .. } => match mem {
            Memory::Global { .. } => stores.push(values.len()),
            Memory::Shared { .. } => shared += 1,
        },
        _ => {}
    });
    (loads, stores, shared)
}

/// The transpose's load runs along rows and its store along columns, both 16 bytes wide;
/// the dump names each access's layout; one conversion (two barriers) joins them.
#[test]
fn each_access_gets_its_own_pointers_layout() {
    let kernel = transpose(F32, 64, 64);
    let tk = lower(&kernel, &target(32, 4), &Specialization::all(4)).unwrap();
    let load = comment_of(&tk, "load");
    let store = comment_of(&tk, "store");
    assert!(
        load[0].ends_with("-> blocked<spt [1, 4], tpw [2, 16], wpc [4, 1], order [1, 0]>"),
        "{load:?}"
    );
    let (loads, stores, shared) = widths(&tk);
    assert!(loads.iter().all(|&w| w == 4), "loads move 16 bytes: {loads:?}");
    assert!(stores.iter().all(|&w| w == 4), "stores move 16 bytes: {stores:?}");
    // 64x64 elements over 128 threads: 8 vector writes and 32 scalar reads a thread.
    assert_eq!(shared, 8 + 32, "{tk}");
    let barriers = tk.body.iter().filter(|s| matches!(s, Stmt::Barrier)).count();
    assert_eq!(barriers, 2);
    // The store's per-thread code reads the tile down its columns: the layout of the
    // conversion's result is the store's.
    assert!(store.len() == 1, "{store:?}");
    // Without the specialization the same layouts hold, one element at a time.
    let plain = lower(&kernel, &target(32, 4), &Specialization::none(4)).unwrap();
    let (loads, stores, _) = widths(&plain);
    assert!(loads.iter().chain(&stores).all(|&w| w == 1));
    assert_eq!(
        comment_of(&plain, "load")[0],
        // (The warps stay `wpc [4, 1]`.)
        load[0].replace("spt [1, 4], tpw [2, 16]", "spt [1, 1], tpw [1, 32]")
    );
}

/// A kernel whose loads and stores share their axis converts nothing (vector add, a row
/// softmax): per-access layouts change only what they must.
#[test]
fn aligned_kernels_need_no_conversion() {
    let add = rutile_ir::seeds::vector_add(F32, 1024).unwrap();
    let tk = lower(&add, &target(32, 4), &Specialization::all(4)).unwrap();
    assert_eq!(widths(&tk).2, 0);
    let softmax = rutile_ir::seeds::softmax(1024).unwrap();
    let tk = lower(&softmax, &target(32, 4), &Specialization::all(softmax.params.len())).unwrap();
    let (loads, stores, _) = widths(&tk);
    assert!(loads.iter().chain(&stores).all(|&w| w == 4));
}

/// Bank conflicts of the conversions, counted by the simulator: the writes of a
/// transpose's conversion are conflict-free for every target and element type, and its
/// reads cost at most twice the ideal wavefronts (the floor with whole 16-byte writes when
/// the reader's lanes cover half a slot: see `lower/convert.rs`). Without the swizzle, the
/// reads of a 64x64 f32 tile take 16 times the ideal.
#[test]
fn conversions_are_nearly_free_of_bank_conflicts() {
    use rutile_ir::interp::simt::{run_threads_with_stats, SharedAccess};
    let mut rng = Rng::new(26);
    for (elem, rows, cols) in [
        (F32, 64u32, 64u32),
        (F32, 32, 32),
        (F32, 16, 64),
        (F16, 64, 64),
        (I8, 64, 64),
    ] {
        let kernel = transpose(elem, rows, cols);
        let (m, n) = (rows as usize, cols as usize);
        let buffers = vec![random(&mut rng, elem, m * n), random(&mut rng, elem, m * n)];
        let args = [ptr(0), ptr(1), ArgValue::Int(m as i64), ArgValue::Int(n as i64)];
        for t in targets() {
            let tk = lower(&kernel, &t, &Specialization::all(4)).unwrap();
            let mut got = buffers.clone();
            let stats = run_threads_with_stats(&tk, [1, 1, 1], &args, &mut got).unwrap();
            let (w, r) = (
                stats.op("store", SharedAccess::Store),
                stats.op("store", SharedAccess::Load),
            );
            let at = format!(
                "transpose {elem} {rows}x{cols}, {} warps of {}",
                t.num_warps, t.warp_size
            );
            assert!(w.accesses > 0 && r.accesses > 0, "{at}: no conversion");
            assert_eq!(w.conflicts(), 0, "{at}: writes {w:?}");
            assert!(r.wavefronts <= 2 * r.ideal_wavefronts, "{at}: reads {r:?}");
            if (elem, rows, t.warp_size) == (F32, 32, 32) || elem != F32 && t.warp_size == 32 {
                assert_eq!(r.conflicts(), 0, "{at}: reads {r:?}");
            }
        }
    }
    // 3-D permutes and `trans` through the same exchange.
    let kernel = Kernel::build("permute_3d", |k| {
        let (x, out) = (k.arg_ptr("x", F32), k.arg_ptr("out", F32));
        let i = k.arange(0, 8).expand_dims(1).expand_dims(2);
        let j = k.arange(0, 4).expand_dims(0).expand_dims(2);
        let l = k.arange(0, 32).expand_dims(0).expand_dims(1);
        let v = k.load(x + (i * 128 + j * 32 + l));
        k.store(out + (l * 32 + j * 8 + i), v);
    })
    .unwrap();
    let buffers = vec![random(&mut rng, F32, 1024), random(&mut rng, F32, 1024)];
    let tk = lower(&kernel, &target(32, 4), &Specialization::all(2)).unwrap();
    let stats = run_threads_with_stats(&tk, [1, 1, 1], &[ptr(0), ptr(1)], &mut buffers.clone()).unwrap();
    let (w, r) = (
        stats.op("store", SharedAccess::Store),
        stats.op("store", SharedAccess::Load),
    );
    assert!(
        w.conflicts() == 0 && r.wavefronts <= 2 * r.ideal_wavefronts,
        "permute: {w:?} {r:?}"
    );
}

/// The differential fuzzer's random kernels (whose 2-D tiles load and store row- or
/// column-major) lowered for every target and run in the simulator agree with the
/// interpreter (the GPU side of the same fuzzer is `examples/tests/differential.rs`).
#[test]
fn random_kernels_agree_in_the_simulator() {
    use rutile_ir::testing::random_kernel;
    const LEN: usize = 1024;
    let mut tried = 0;
    for seed in 0..60u64 {
        let Ok(kernel) = random_kernel(seed) else { continue };
        let mut rng = Rng::new(seed ^ 0xd1ff);
        let buffers = vec![
            HostBuffer::from_slice(&rng.f32s(LEN, -2.0, 2.0)),
            HostBuffer::from_slice(&rng.i32s(LEN, 0, 1000)),
            HostBuffer::from_slice(&rng.f16s(LEN, -1.0, 1.0)),
        ];
        let n = 1 + rng.below(LEN as u64) as i64;
        let args = [ptr(0), ptr(1), ptr(2), ArgValue::Int(n), ArgValue::Float(0.75)];
        let mut want = buffers.clone();
        interp::run(&kernel, [(LEN / 16) as u32, 1, 1], &args, &mut want).unwrap();
        for t in [target(32, 4), target(8, 2), target(64, 1)] {
            let tk = lower(&kernel, &t, &spec(&args, &buffers)).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            let mut got = buffers.clone();
            simt::run_threads(&tk, [(LEN / 16) as u32, 1, 1], &args, &mut got)
                .unwrap_or_else(|e| panic!("seed {seed}, warp {} x {}: {e}", t.warp_size, t.num_warps));
            // Sums add in another order in the lowering (trees): floats agree closely.
            let close = |g: f32, w: f32, rel: f32| g == w || (g - w).abs() <= rel * w.abs().max(1.0);
            let (ga, wa) = (got[0].to_vec::<f32>().unwrap(), want[0].to_vec::<f32>().unwrap());
            let (gc, wc) = (
                got[2].to_vec::<half::f16>().unwrap(),
                want[2].to_vec::<half::f16>().unwrap(),
            );
            for i in 0..LEN {
                assert!(
                    close(ga[i], wa[i], 1e-4),
                    "seed {seed}: a[{i}] = {} not {}\n{kernel}",
                    ga[i],
                    wa[i]
                );
                let (g, w) = (gc[i].to_f32(), wc[i].to_f32());
                assert!(close(g, w, 2e-3), "seed {seed}: c[{i}] = {g} not {w}\n{kernel}");
            }
            assert!(
                got[1].as_bytes() == want[1].as_bytes(),
                "seed {seed}: b differs\n{kernel}"
            );
        }
        tried += 1;
    }
    assert!(tried >= 50, "only {tried} random kernels built");
}

/// The matmul seed with a column-major B (`stride_bk = 1`): with the unit stride
/// specialized (Triton's `equal_to_1`), B's loads run down its columns (order `[0, 1]`),
/// and the result is the interpreter's on a ragged shape, row- or column-major.
#[test]
fn column_major_matmul_operands_load_down_their_columns() {
    use rutile_ir::seeds::{matmul, matmul_grid, MatmulMeta};
    let mut rng = Rng::new(27);
    let meta = MatmulMeta::fp16(32, 32, 16);
    let kernel = matmul(&meta).unwrap();
    let (m, n, kk) = (40usize, 48usize, 50usize);
    let mut staging = Vec::new();
    for b_column_major in [false, true] {
        let (stride_bk, stride_bn) = if b_column_major { (1, kk) } else { (n, 1) };
        let buffers = vec![
            random(&mut rng, F16, m * kk),
            random(&mut rng, F16, kk * n),
            HostBuffer::zeros(F16, m * n),
        ];
        let ints = [m, n, kk, kk, 1, stride_bk, stride_bn, n, 1];
        let mut args = vec![ptr(0), ptr(1), ptr(2)];
        args.extend(ints.iter().map(|&v| ArgValue::Int(v as i64)));
        let grid = [matmul_grid(&meta, m as u32, n as u32), 1, 1];
        let mut want = buffers.clone();
        interp::run(&kernel, grid, &args, &mut want).unwrap();
        let tk = lower(&kernel, &target(32, 4), &spec(&args, &buffers)).unwrap();
        let loads = comment_of(&tk, "load");
        let order = if b_column_major { "order [0, 1]" } else { "order [1, 0]" };
        assert!(loads[1].ends_with(&format!("{order}>")), "B's load: {loads:?}");
        let mut got = buffers.clone();
        let stats = simt::run_threads_with_stats(&tk, grid, &args, &mut got).unwrap();
        assert!(
            got[2].as_bytes() == want[2].as_bytes(),
            "column-major B: {b_column_major}"
        );
        // The dot's staging (on the CUDA cores here) costs about as much either way: a
        // column-major B is written down its columns into rows padded by a run of columns
        // (4.5 times the row-major staging's wavefronts unpadded).
        let dot = stats.op("dot", rutile_ir::interp::simt::SharedAccess::Store);
        println!("column-major B {b_column_major}: dot staging {dot:?}");
        staging.push(dot.wavefronts);
    }
    assert!(
        staging[1] * 10 <= staging[0] * 12,
        "staging wavefronts, B row-major then column-major: {staging:?}"
    );
}

/// Rows walked in blocks by a `for` loop from 0 (layer norm's three passes, the long-row
/// kernels' walks, forwards and backwards): the induction variable is a multiple of the
/// block, so each block stays aligned and its loads and stores move 16 bytes. Without that
/// fact about the induction variable every access was one element wide.
#[test]
fn rows_walked_by_a_loop_keep_their_accesses_wide() {
    use rutile_ir::seeds::{self, LayerNormMeta};
    let ln = LayerNormMeta::for_row(2048, F16).unwrap();
    let long_ln = LayerNormMeta {
        block_size: 4096,
        dtype: F16,
    };
    for (name, kernel, elem_bytes, scalar_stores) in [
        ("layer norm forward", seeds::layer_norm_forward(&ln).unwrap(), 2, 2),
        ("long-row layer norm", seeds::layer_norm_long(&long_ln).unwrap(), 2, 2),
        (
            "long-row softmax",
            seeds::softmax_long(4096, seeds::SoftmaxOptions::default()).unwrap(),
            4,
            0,
        ),
    ] {
        let tk = lower(&kernel, &target(32, 8), &Specialization::all(kernel.params.len())).unwrap();
        let (loads, stores, _) = widths(&tk);
        let wide = 16 / elem_bytes;
        assert!(
            !loads.is_empty() && loads.iter().all(|&w| w == wide),
            "{name}: loads {loads:?}"
        );
        let narrow = stores.iter().filter(|&&w| w == 1).count();
        assert!(
            narrow == scalar_stores && stores.iter().all(|&w| w == 1 || w == wide),
            "{name}: stores {stores:?}"
        );
    }
}

/// Row sums of an `[rows, cols]` tile of i32, stored to `out[r]`, and column sums to
/// `out2[c]`.
fn row_and_column_sums(rows: u32, cols: u32) -> Kernel {
    Kernel::build("sums", |k| {
        let (x, out, out2) = (k.arg_ptr("x", I32), k.arg_ptr("out", I32), k.arg_ptr("out2", I32));
        let (m, n) = (k.arg_i32("m"), k.arg_i32("n"));
        let (r, c, mask) = tile(
            k,
            (rows, cols),
            (k.program_id(0) * rows as i32, k.program_id(1) * cols as i32),
            (m, n),
        );
        let v = k.load_masked(x + (r * n + c), mask, 0);
        let rr = k.arange(0, rows as i32);
        k.store_masked(out + rr, v.sum(1), rr.lt(m));
        let cc = k.arange(0, cols as i32);
        k.store_masked(out2 + cc, v.sum(0), cc.lt(n));
    })
    .unwrap()
}

/// A block no larger than the program's threads is stored from the layout its value
/// has: the sums of rows that each lie in one warp (4 rows on 4 warps) go to memory from
/// the lanes that reduced them, with no barrier (coalesced, they would take a round trip
/// through shared memory between two barriers). Every target, the larger blocks (which
/// are converted) included, agrees with the interpreter, ragged tiles too.
#[test]
fn small_blocks_are_stored_from_their_own_layout() {
    let barriers = |kernel: &Kernel, t: &Target| {
        let tk = lower(kernel, t, &Specialization::all(kernel.params.len())).unwrap();
        let mut n = 0;
        tk.walk(&mut |s| n += matches!(s, Stmt::Barrier) as usize);
        n
    };
    let row_sums = Kernel::build("row_sums", |k| {
        let (x, out) = (k.arg_ptr("x", I32), k.arg_ptr("out", I32));
        let (m, n) = (k.arg_i32("m"), k.arg_i32("n"));
        let (r, c, mask) = tile(k, (4, 256), (k.program_id(0) * 4, k.program_id(1) * 256), (m, n));
        let v = k.load_masked(x + (r * n + c), mask, 0);
        let rr = k.arange(0, 4);
        k.store_masked(out + rr, v.sum(1), rr.lt(m));
    })
    .unwrap();
    assert_eq!(barriers(&row_sums, &target(32, 4)), 0, "row sums of 4 rows on 4 warps");
    let mut rng = Rng::new(5);
    for (rows, cols, m, n) in [
        (4, 256, 4, 256),
        (4, 256, 3, 250),
        (16, 64, 16, 64),
        (64, 16, 50, 9),
        (8, 512, 7, 500),
    ] {
        let kernel = row_and_column_sums(rows, cols);
        let buffers = vec![
            random(&mut rng, I32, (m * n) as usize),
            HostBuffer::zeros(I32, rows as usize),
            HostBuffer::zeros(I32, cols as usize),
        ];
        let args = [ptr(0), ptr(1), ptr(2), ArgValue::Int(m), ArgValue::Int(n)];
        check(
            &format!("sums of {rows}x{cols} ({m}x{n})"),
            &kernel,
            [1, 1, 1],
            &args,
            &buffers,
        );
    }
}

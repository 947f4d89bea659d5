//! Thread-block clusters in the SIMT simulator (`simt::run_threads` of a kernel whose
//! `cluster` is above 1): the lowered cluster softmax and layer norm against the
//! interpreter's clustered launches (`interp::run_clustered`) on random inputs (never zero),
//! for clusters of 2 to 4, several blocks and warps, NVIDIA- and Vulkan-like targets and a
//! target without shuffles, specialized and not, with ragged rows that leave a program's
//! share of a row partly or wholly masked; hand-built kernels that pin the model down
//! (remote stores land at the next cluster barrier, in every program of the cluster) and
//! the faults: a grid that does not split into clusters, a program that skips a cluster
//! barrier (an error, not a hang), remote stores outside the cluster or the buffer, before
//! the first or after the last cluster barrier, racing with each other or with the
//! receiver's own accesses, and cluster statements in a kernel without a cluster.

mod tutorial_support;

use rutile_ir::interp::{self, simt, ArgValue, FaultKind, HostBuffer, InterpError};
use rutile_ir::ir::{BinaryOp, CmpOp};
use rutile_ir::lower::lower;
use rutile_ir::seeds::{layer_norm_cluster, softmax_cluster, softmax_cluster_rows, LayerNormMeta, SoftmaxOptions};
use rutile_ir::target::{Specialization, Target};
use rutile_ir::testing::Rng;
use rutile_ir::thread::{Memory, Special, Stmt, ThreadKernel, ThreadKernelBuilder};
use rutile_ir::Kernel;
use rutile_ir::ScalarType::{F16, F32, I32};
use tutorial_support::rows::{affine_kernel, layer_norm_case, nonzero_f32s, rounds_kernel, softmax_args};
use tutorial_support::{ptr, values};

/// The targets a cluster kernel is lowered for, with clusters of `cluster`: NVIDIA's, a
/// Vulkan device's (warps of 32 and of 8, no NaN-propagating max, one variable per shared
/// buffer) and one without shuffles (reductions through shared memory).
fn targets(num_warps: u32, cluster: u32) -> Vec<(&'static str, Target)> {
    let nvidia = Target {
        cluster,
        ..Target::nvidia(num_warps, 48 * 1024)
    };
    vec![
        ("nvidia", nvidia.clone()),
        (
            "vulkan",
            Target {
                cluster,
                ..Target::vulkan(32, num_warps, 48 * 1024)
            },
        ),
        (
            "vulkan, warps of 8",
            Target {
                cluster,
                ..Target::vulkan(8, num_warps, 48 * 1024)
            },
        ),
        (
            "no shuffles",
            Target {
                shuffles: false,
                native_float_minmax: false,
                ..nvidia
            },
        ),
    ]
}

/// Runs `kernel` in clusters of `cluster` in the interpreter, then lowered for every target
/// of [`targets`] of `num_warps` under `spec` in the simulator, and compares every buffer: floats within
/// `rel` of the buffer's largest magnitude (f16: plus an ulp of the element), others exactly.
#[track_caller]
fn simulate_clustered(
    at: &str,
    kernel: &Kernel,
    (num_warps, cluster, spec): (u32, u32, &Specialization),
    grid: [u32; 3],
    args: &[ArgValue],
    buffers: &[HostBuffer],
    rel: f64,
) {
    let mut want = buffers.to_vec();
    interp::run_clustered(kernel, grid, cluster, args, &mut want)
        .unwrap_or_else(|e| panic!("{at}: the interpreter fails: {e}"));
    for (name, target) in targets(num_warps, cluster) {
        let at = format!("{at} [{name}, {num_warps} warps]");
        let tk = lower(kernel, &target, spec).unwrap_or_else(|e| panic!("{at}: lowering fails: {e}"));
        assert_eq!(tk.cluster, cluster, "{at}");
        let mut got = buffers.to_vec();
        simt::run_threads(&tk, grid, args, &mut got).unwrap_or_else(|e| panic!("{at}: {e}"));
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            if !matches!(w.elem(), F16 | F32) {
                assert_eq!(g.as_bytes(), w.as_bytes(), "{at}: buffer {i} differs");
                continue;
            }
            let (g, w) = (values(g), values(w));
            let scale = w.iter().fold(0.0f64, |s, v| s.max(v.abs()));
            let ulp = if buffers[i].elem() == F16 { 1.0 / 1024.0 } else { 0.0 };
            for (j, (&gv, &wv)) in g.iter().zip(&w).enumerate() {
                let bound = rel * scale + ulp * wv.abs();
                assert!(
                    (gv - wv).abs() <= bound,
                    "{at}: buffer {i} element {j}: simulated {gv}, interpreted {wv} (bound {bound:.2e})"
                );
            }
        }
    }
}

/// The row lengths of the tests of `cluster` programs of `block` columns: a full row, a row
/// whose last program's share is partly masked, and (for clusters of 3 or more) one whose
/// last program's share is wholly masked, the one before it partly; multiples of 16 where
/// the lowering may assume so (`divisible`), else ragged to the element.
fn row_lengths(block: u32, cluster: u32, divisible: bool) -> Vec<usize> {
    let (b, c) = (block as usize, cluster as usize);
    let (partly, wholly) = if divisible {
        (b * (c - 1) + 16, b * (c - 2) + 48.min(b - 16))
    } else {
        (b * (c - 1) + b / 2 + 3, b * (c - 2) + b / 3 + 1)
    };
    let mut lengths = vec![b * c, partly];
    if c >= 3 {
        lengths.push(wholly);
    }
    lengths
}

/// Blocks and warps of the tests: (block, warps) per cluster size.
const SHAPES: [(u32, u32); 3] = [(64, 1), (128, 2), (256, 4)];

#[test]
fn lowered_cluster_softmax_matches_the_interpreter() {
    let mut rng = Rng::new(0x5C1);
    for cluster in [2, 3, 4] {
        for (block, num_warps) in SHAPES {
            let kernel = softmax_cluster(block, cluster, SoftmaxOptions::default()).unwrap();
            for divisible in [true, false] {
                for cols in row_lengths(block, cluster, divisible) {
                    let rows = 2;
                    let x = nonzero_f32s(&mut rng, rows * cols, 0.125, 8.0);
                    let buffers = vec![HostBuffer::zeros(F32, rows * cols), HostBuffer::from_slice(&x)];
                    let args = softmax_args(rows, cols);
                    let spec = if divisible {
                        Specialization::all(args.len())
                    } else {
                        Specialization::none(args.len())
                    };
                    let at = format!("softmax {rows}x{cols}, {cluster} programs of {block}, divisible {divisible}");
                    let grid = [rows as u32 * cluster, 1, 1];
                    simulate_clustered(&at, &kernel, (num_warps, cluster, &spec), grid, &args, &buffers, 1e-6);
                }
            }
        }
    }
}

#[test]
fn lowered_cluster_layer_norm_matches_the_interpreter() {
    let mut rng = Rng::new(0x5C2);
    for cluster in [2, 3, 4] {
        for (i, (block, num_warps)) in SHAPES.into_iter().enumerate() {
            // f16 for one shape a cluster size.
            let dtype = if i == cluster as usize - 2 { F16 } else { F32 };
            let meta = LayerNormMeta {
                block_size: block,
                dtype,
            };
            let kernel = layer_norm_cluster(&meta, cluster).unwrap();
            for divisible in [true, false] {
                for n in row_lengths(block, cluster, divisible) {
                    let m = 2;
                    let (buffers, args) = layer_norm_case(&mut rng, dtype, m, n, (2.0, 6.0));
                    let spec = if divisible {
                        Specialization::all(args.len())
                    } else {
                        Specialization::none(args.len())
                    };
                    let at =
                        format!("layer norm {m}x{n} {dtype}, {cluster} programs of {block}, divisible {divisible}");
                    let grid = [m as u32 * cluster, 1, 1];
                    simulate_clustered(&at, &kernel, (num_warps, cluster, &spec), grid, &args, &buffers, 1e-5);
                }
            }
        }
    }
}

#[test]
fn lowered_reductions_in_a_loop_match_the_interpreter() {
    let mut rng = Rng::new(0x5C3);
    let kernel = rounds_kernel(64);
    for (cluster, clusters, rounds, num_warps) in [(2u32, 3u32, 4u32, 1u32), (3, 2, 3, 2), (4, 1, 2, 1)] {
        let blocks = (clusters * rounds * cluster) as usize;
        let buffers = vec![
            HostBuffer::from_slice(&nonzero_f32s(&mut rng, blocks * 64, 0.125, 4.0)),
            HostBuffer::zeros(F32, blocks),
            HostBuffer::zeros(F32, (clusters * cluster) as usize),
        ];
        let mut args: Vec<ArgValue> = (0..3).map(ptr).collect();
        args.extend([ArgValue::Int(cluster as i64), ArgValue::Int(rounds as i64)]);
        let at = format!("{rounds} rounds in {clusters} clusters of {cluster}");
        let spec = Specialization::none(args.len());
        let grid = [clusters * cluster, 1, 1];
        simulate_clustered(&at, &kernel, (num_warps, cluster, &spec), grid, &args, &buffers, 1e-6);
    }
}

#[test]
fn bank_conflicts_are_counted_over_every_program_of_every_cluster() {
    let kernel = softmax_cluster(64, 2, SoftmaxOptions::default()).unwrap();
    let (rows, cols) = (3, 100);
    let args = softmax_args(rows, cols);
    let tk = lower(
        &kernel,
        &Target {
            cluster: 2,
            shuffles: false,
            ..Target::nvidia(2, 48 * 1024)
        },
        &Specialization::none(args.len()),
    )
    .unwrap();
    let x = nonzero_f32s(&mut Rng::new(3), rows * cols, 0.125, 4.0);
    let run = |grid: [u32; 3]| {
        let mut buffers = vec![HostBuffer::zeros(F32, rows * cols), HostBuffer::from_slice(&x)];
        simt::run_threads_with_stats(&tk, grid, &args, &mut buffers).unwrap()
    };
    let (one, all) = (run([2, 1, 1]), run([2 * rows as u32, 1, 1]));
    assert!(one.accesses > 0);
    assert_eq!(all.accesses, rows as u64 * one.accesses);
}

/// A kernel of `n`-program clusters, one warp of 32: every program of rank `s` writes
/// `program_id * 100 + t` into element `s` of buffer 0 of the program of rank `t` (thread
/// `t < n` writing), between two cluster barriers; then its threads `t < n` copy element `t`
/// of its own buffer 0 to `out[program_id * n + t]`.
fn exchange_kernel(n: u32) -> ThreadKernel {
    let mut k = ThreadKernelBuilder::new("exchange", 1, 32);
    let out = k.ptr("out", I32);
    let slots = k.shared(I32, n);
    let pid = k.special(Special::ProgramId(0));
    let size = k.int(I32, n as i64);
    let rank = k.bin(BinaryOp::Rem, pid, size);
    let tid = k.thread_id();
    let writes = k.cmp(CmpOp::Lt, tid, size);
    let hundred = k.int(I32, 100);
    let scaled = k.bin(BinaryOp::Mul, pid, hundred);
    let value = k.bin(BinaryOp::Add, scaled, tid);
    k.push(Stmt::ClusterBarrier);
    k.push(Stmt::ClusterStore {
        alloc: slots,
        index: rank,
        rank: tid,
        value,
        pred: Some(writes),
    });
    k.push(Stmt::ClusterBarrier);
    let slot = k.bin(BinaryOp::Rem, tid, size);
    let got = k.load(I32, 1, Memory::Shared { alloc: slots }, slot, None);
    let row = k.bin(BinaryOp::Mul, pid, size);
    let at = k.bin(BinaryOp::Add, row, tid);
    k.store(got, Memory::Global { param: out }, at, Some(writes));
    with_cluster(k, n)
}

/// The kernel `k` builds, in clusters of `n`, verified.
fn with_cluster(k: ThreadKernelBuilder, n: u32) -> ThreadKernel {
    let kernel = unverified_with_cluster(k, n);
    rutile_ir::thread::verify(&kernel).unwrap_or_else(|e| panic!("{e}\n{kernel}"));
    kernel
}

/// The kernel `k` builds, in clusters of `n`, not verified: for what the verifier refuses
/// and the simulator must fault on too.
fn unverified_with_cluster(k: ThreadKernelBuilder, n: u32) -> ThreadKernel {
    let mut kernel = k.finish_unverified();
    kernel.cluster = n;
    kernel
}

/// Runs a kernel with one i32 output of `len` elements (filled with -1).
fn run_out(kernel: &ThreadKernel, grid: [u32; 3], len: usize) -> (Result<(), InterpError>, Vec<i32>) {
    let mut buffers = vec![HostBuffer::from_slice(&vec![-1i32; len])];
    let r = simt::run_threads(kernel, grid, &[ptr(0)], &mut buffers);
    (r, buffers[0].to_vec().unwrap())
}

#[test]
fn remote_stores_land_in_every_program_of_the_cluster() {
    for n in [2, 3, 4, 8, 16] {
        let clusters = 3;
        let programs = (n * clusters) as usize;
        let (r, out) = run_out(&exchange_kernel(n), [n * clusters, 1, 1], programs * n as usize);
        r.unwrap_or_else(|e| panic!("cluster {n}: {e}"));
        for q in 0..programs {
            let cluster_first = q / n as usize * n as usize;
            for s in 0..n as usize {
                let from = cluster_first + s;
                let want = (from * 100 + q % n as usize) as i32;
                assert_eq!(out[q * n as usize + s], want, "cluster {n}: program {q}, slot {s}");
            }
        }
    }
}

#[test]
fn a_grid_that_does_not_split_into_clusters_is_an_error() {
    let kernel = softmax_cluster(64, 3, SoftmaxOptions::default()).unwrap();
    let args = softmax_args(2, 100);
    let tk = lower(
        &kernel,
        &Target {
            cluster: 3,
            ..Target::nvidia(2, 48 * 1024)
        },
        &Specialization::none(args.len()),
    )
    .unwrap();
    let mut buffers = vec![HostBuffer::zeros(F32, 200), HostBuffer::from_slice(&[1.0f32; 200])];
    let e = simt::run_threads(&tk, [5, 1, 1], &args, &mut buffers).unwrap_err();
    assert_eq!(
        e,
        InterpError::GridNotClustered {
            grid: [5, 1, 1],
            cluster: 3
        }
    );
    assert!(e.to_string().contains("multiple of 3, got 5"), "{e}");
    let mut huge = tk.clone();
    huge.cluster = 17;
    let e = simt::run_threads(&huge, [17, 1, 1], &args, &mut buffers).unwrap_err();
    assert_eq!(e, InterpError::ClusterSize { cluster: 17 });
}

/// [`exchange_kernel`]'s cluster barriers, the second one skipped by the program of rank 1
/// of cluster `skipping` (its statements after it run).
fn skipping_kernel(n: u32, skipping: i64) -> ThreadKernel {
    let mut k = ThreadKernelBuilder::new("skipping", 1, 32);
    let out = k.ptr("out", I32);
    let pid = k.special(Special::ProgramId(0));
    let size = k.int(I32, n as i64);
    let cluster = k.bin(BinaryOp::Div, pid, size);
    let rank = k.bin(BinaryOp::Rem, pid, size);
    let one = k.int(I32, 1);
    let this = k.int(I32, skipping);
    let is_rank_1 = k.cmp(CmpOp::Eq, rank, one);
    let in_cluster = k.cmp(CmpOp::Eq, cluster, this);
    let skips = k.bin(BinaryOp::And, is_rank_1, in_cluster);
    k.push(Stmt::ClusterBarrier);
    k.push(Stmt::Comment("the second barrier".into()));
    k.if_(skips, |_| {}, |k| k.push(Stmt::ClusterBarrier));
    let tid = k.thread_id();
    let first = k.cmp(CmpOp::Eq, tid, one);
    k.store(vec![pid], Memory::Global { param: out }, pid, Some(first));
    with_cluster(k, n)
}

#[test]
fn a_program_that_skips_a_cluster_barrier_is_an_error_not_a_hang() {
    for (n, skipping, first) in [(2, 0, 0), (4, 0, 0), (3, 2, 6)] {
        let (r, _) = run_out(&skipping_kernel(n, skipping), [3 * n, 1, 1], 3 * n as usize);
        let e = r.unwrap_err();
        assert_eq!(
            e,
            InterpError::ClusterBarrierMismatch {
                context: "the second barrier".into(),
                first: [first, 0, 0],
                size: n,
                ended: [first + 1, 0, 0],
                waiting: [first, 0, 0],
                barriers: 1,
            },
            "{e}"
        );
        let text = e.to_string();
        assert!(
            text.contains(&format!(
                "program ({}, 0, 0) ended after 1 cluster barriers while program ({first}, 0, 0) waits at cluster barrier 2",
                first + 1
            )),
            "{text}"
        );
        assert!(text.contains("lowered from the second barrier"), "{text}");
    }
}

/// A kernel of clusters of `n` (one warp of 32) whose thread 0 stores 7 into element `index`
/// of buffer 0 (of `len`) of the program of rank `rank`, between two cluster barriers, with
/// `before` and `after` added before and after the store.
fn one_store(
    n: u32,
    len: u32,
    rank: i64,
    index: i64,
    before: impl FnOnce(&mut ThreadKernelBuilder),
    after: impl FnOnce(&mut ThreadKernelBuilder),
) -> ThreadKernel {
    let kernel = unverified_one_store(n, len, rank, index, before, after);
    rutile_ir::thread::verify(&kernel).unwrap_or_else(|e| panic!("{e}\n{kernel}"));
    kernel
}

/// [`one_store`] without the verifier, which refuses what the simulator must fault on too;
/// checks that it does refuse it, with `refused` in its message.
fn refused_one_store(
    refused: &str,
    before: impl FnOnce(&mut ThreadKernelBuilder),
    after: impl FnOnce(&mut ThreadKernelBuilder),
) -> ThreadKernel {
    let kernel = unverified_one_store(2, 4, 1, 0, before, after);
    let e = rutile_ir::thread::verify(&kernel).unwrap_err();
    assert!(e.contains(refused), "{e}");
    kernel
}

fn unverified_one_store(
    n: u32,
    len: u32,
    rank: i64,
    index: i64,
    before: impl FnOnce(&mut ThreadKernelBuilder),
    after: impl FnOnce(&mut ThreadKernelBuilder),
) -> ThreadKernel {
    let mut k = ThreadKernelBuilder::new("one_store", 1, 32);
    let _out = k.ptr("out", I32);
    let slots = k.shared(I32, len);
    let tid = k.thread_id();
    let zero = k.int(I32, 0);
    let first = k.cmp(CmpOp::Eq, tid, zero);
    let (rank, index, value) = (k.int(I32, rank), k.int(I32, index), k.int(I32, 7));
    before(&mut k);
    k.push(Stmt::Comment("the store".into()));
    k.push(Stmt::ClusterStore {
        alloc: slots,
        index,
        rank,
        value,
        pred: Some(first),
    });
    after(&mut k);
    unverified_with_cluster(k, n)
}

fn barrier(k: &mut ThreadKernelBuilder) {
    k.push(Stmt::ClusterBarrier);
}

#[track_caller]
fn thread_fault(r: Result<(), InterpError>, kind: FaultKind, message: &str) -> InterpError {
    let e = r.unwrap_err();
    match &e {
        InterpError::ThreadFault {
            kind: k,
            message: m,
            stmt,
            ..
        } => {
            assert_eq!(*k, kind, "{e}");
            assert!(m.contains(message), "{e}");
            assert!(stmt.starts_with("cluster_store"), "{e}");
        }
        _ => panic!("not a thread fault: {e}"),
    }
    e
}

#[test]
fn remote_stores_outside_the_cluster_or_the_buffer_are_out_of_bounds() {
    let (r, _) = run_out(&one_store(4, 4, 4, 0, barrier, barrier), [4, 1, 1], 4);
    let e = thread_fault(
        r,
        FaultKind::OutOfBounds,
        "rank 4, outside the cluster of 4 programs (ranks 0 to 3)",
    );
    assert!(e.to_string().contains("program (0, 0, 0), thread 0"), "{e}");
    let (r, _) = run_out(&one_store(2, 4, -1, 0, barrier, barrier), [2, 1, 1], 2);
    thread_fault(r, FaultKind::OutOfBounds, "rank -1, outside the cluster of 2");
    let (r, _) = run_out(&one_store(2, 4, 1, 4, barrier, barrier), [2, 1, 1], 2);
    thread_fault(
        r,
        FaultKind::OutOfBounds,
        "element 4 is outside shared0 (4 elements) of the cluster's program of rank 1",
    );
}

#[test]
fn remote_stores_need_a_cluster_barrier_before_and_after() {
    let (r, _) = run_out(&one_store(2, 4, 1, 0, |_| {}, barrier), [2, 1, 1], 2);
    thread_fault(r, FaultKind::MissingBarrier, "before the first cluster barrier");
    let (r, _) = run_out(&one_store(2, 4, 1, 0, barrier, |_| {}), [2, 1, 1], 2);
    thread_fault(r, FaultKind::MissingBarrier, "after the last cluster barrier");
    // Both: fine.
    let (r, _) = run_out(&one_store(2, 4, 1, 0, barrier, barrier), [4, 1, 1], 4);
    r.unwrap();
}

/// Thread 0 writes its id (0) into element 0 of buffer 0.
fn write_local(k: &mut ThreadKernelBuilder) {
    let zero = k.int(I32, 0);
    let first = zero_thread(k);
    k.store(vec![zero], Memory::Shared { alloc: 0 }, zero, Some(first));
}

/// Every thread reads element 0 of buffer 0; thread 0 stores it to `out[program_id]`.
fn read_local(k: &mut ThreadKernelBuilder) {
    let zero = k.int(I32, 0);
    let v = k.load(I32, 1, Memory::Shared { alloc: 0 }, zero, None);
    let pid = k.special(Special::ProgramId(0));
    let first = zero_thread(k);
    k.store(v, Memory::Global { param: 0 }, pid, Some(first));
}

#[test]
fn a_remote_store_races_with_the_receivers_own_accesses_between_the_barriers() {
    // The receiver (rank 1) reads the element between the same two cluster barriers, after
    // a barrier of its own program: still a race.
    let kernel = one_store(
        2,
        4,
        1,
        0,
        |k| {
            write_local(k);
            barrier(k);
        },
        |k| {
            k.push(Stmt::Barrier);
            read_local(k);
            barrier(k);
        },
    );
    let (r, _) = run_out(&kernel, [2, 1, 1], 2);
    let e = thread_fault(
        r,
        FaultKind::MissingBarrier,
        "a store into element 0 of shared0 of the cluster's program (1, 0, 0) (rank 1), which that program reads between the same two cluster barriers",
    );
    assert!(e.to_string().contains("program (0, 0, 0), thread 0"), "{e}");
    // The receiver writes it between them.
    let kernel = one_store(2, 4, 1, 0, barrier, |k| {
        write_local(k);
        barrier(k);
    });
    let (r, _) = run_out(&kernel, [2, 1, 1], 2);
    thread_fault(
        r,
        FaultKind::MissingBarrier,
        "which that program writes between the same two",
    );
    // Written before the first cluster barrier, overwritten remotely after it, read after
    // the second: ordered, and the remote value is read (rank 0 reads its own).
    let kernel = one_store(
        2,
        4,
        1,
        0,
        |k| {
            write_local(k);
            barrier(k);
        },
        |k| {
            barrier(k);
            read_local(k);
        },
    );
    let (r, out) = run_out(&kernel, [4, 1, 1], 4);
    r.unwrap();
    assert_eq!(out, [0, 7, 0, 7]);
    // Read before it lands (no second cluster barrier before the read): the element is read
    // before the program writes it.
    let kernel = one_store(2, 4, 1, 0, barrier, |k| {
        read_local(k);
        barrier(k);
    });
    let (r, _) = run_out(&kernel, [2, 1, 1], 2);
    let e = r.unwrap_err();
    assert!(
        matches!(
            &e,
            InterpError::ThreadFault {
                kind: FaultKind::Uninitialized,
                ..
            }
        ),
        "{e}"
    );
}

/// A boolean register: whether the thread is thread 0.
fn zero_thread(k: &mut ThreadKernelBuilder) -> rutile_ir::thread::Reg {
    let tid = k.thread_id();
    let zero = k.int(I32, 0);
    k.cmp(CmpOp::Eq, tid, zero)
}

/// A kernel of clusters of `n`: thread 0 of every program stores `value(program_id)` into
/// element 0 of buffer 0 of the program of rank 0, between two cluster barriers.
fn all_to_rank_0(n: u32, same: bool) -> ThreadKernel {
    let mut k = ThreadKernelBuilder::new("all_to_rank_0", 1, 32);
    let _out = k.ptr("out", I32);
    let slots = k.shared(I32, 1);
    let first = zero_thread(&mut k);
    let zero = k.int(I32, 0);
    let value = if same {
        k.int(I32, 5)
    } else {
        k.special(Special::ProgramId(0))
    };
    k.push(Stmt::ClusterBarrier);
    k.push(Stmt::ClusterStore {
        alloc: slots,
        index: zero,
        rank: zero,
        value,
        pred: Some(first),
    });
    k.push(Stmt::ClusterBarrier);
    with_cluster(k, n)
}

#[test]
fn remote_stores_of_different_values_to_one_element_race() {
    let (r, _) = run_out(&all_to_rank_0(3, true), [6, 1, 1], 6);
    r.unwrap();
    let (r, _) = run_out(&all_to_rank_0(3, false), [6, 1, 1], 6);
    let e = thread_fault(
        r,
        FaultKind::RacingStores,
        "program (0, 0, 0) (thread 0) and program (1, 0, 0) (thread 0) write different values to element 0 of shared0 of the cluster's program (0, 0, 0) (rank 0)",
    );
    assert!(e.to_string().contains("program (1, 0, 0), thread 0"), "{e}");
}

#[test]
fn cluster_statements_need_a_kernel_with_clusters() {
    let mut kernel = exchange_kernel(2);
    kernel.cluster = 1;
    let (r, _) = run_out(&kernel, [2, 1, 1], 4);
    let e = r.unwrap_err();
    assert!(
        matches!(&e, InterpError::ThreadFault { kind: FaultKind::InvalidIr, message, .. } if message.contains("needs a cluster")),
        "{e}"
    );
}

#[test]
fn warp_specialized_kernels_do_not_run_in_clusters() {
    let mut kernel = exchange_kernel(2);
    kernel.producer_warps = 4;
    let (r, _) = run_out(&kernel, [2, 1, 1], 4);
    let e = r.unwrap_err();
    assert!(
        matches!(&e, InterpError::ThreadFault { kind: FaultKind::InvalidIr, message, .. }
            if message.contains("a warp-specialized kernel in clusters of 2")),
        "{e}"
    );
}

fn arrive(k: &mut ThreadKernelBuilder) {
    k.push(Stmt::ClusterArrive);
}

fn wait(k: &mut ThreadKernelBuilder) {
    k.push(Stmt::ClusterWait);
}

#[test]
fn a_split_cluster_barrier_orders_what_came_before_its_arrive() {
    // Written locally before the arrive, overwritten remotely after the wait, read after
    // the cluster barrier that follows: ordered, and the remote value is read.
    let kernel = one_store(
        2,
        4,
        1,
        0,
        |k| {
            write_local(k);
            arrive(k);
            wait(k);
        },
        |k| {
            barrier(k);
            read_local(k);
        },
    );
    let (r, out) = run_out(&kernel, [4, 1, 1], 4);
    r.unwrap();
    assert_eq!(out, [0, 7, 0, 7]);
    // Written between the arrive and the wait: nothing orders it with the remote store.
    let kernel = one_store(
        2,
        4,
        1,
        0,
        |k| {
            arrive(k);
            write_local(k);
            wait(k);
        },
        |k| {
            barrier(k);
            read_local(k);
        },
    );
    let (r, _) = run_out(&kernel, [2, 1, 1], 2);
    thread_fault(
        r,
        FaultKind::MissingBarrier,
        "which that program writes between the same two",
    );
}

/// Split barriers that do not pair up at the kernel's top level: the verifier refuses them,
/// and so a launch in the simulator (which verifies first) is an invalid-IR error naming
/// why, not a hang or a wrong result.
#[test]
fn split_cluster_barriers_that_do_not_pair_up_are_invalid() {
    type Around = fn(&mut ThreadKernelBuilder);
    let cases: [(&str, Around, Around); 6] = [
        ("a cluster wait without a cluster arrive", wait, barrier),
        (
            "a second cluster arrive before the wait",
            |k| {
                arrive(k);
                arrive(k);
                wait(k);
            },
            barrier,
        ),
        (
            "a cluster barrier between a cluster arrive and its wait",
            |k| {
                arrive(k);
                barrier(k);
            },
            |k| {
                barrier(k);
                wait(k);
            },
        ),
        (
            "a store into another program between a cluster arrive and its wait",
            arrive,
            |k| {
                wait(k);
                barrier(k);
            },
        ),
        (
            "a cluster arrive without its wait before the kernel ends",
            barrier,
            |k| {
                barrier(k);
                arrive(k);
            },
        ),
        (
            "nested in control flow",
            |k| {
                let zero = k.int(I32, 0);
                let yes = k.cmp(CmpOp::Eq, zero, zero);
                k.push(Stmt::If {
                    cond: yes,
                    then_body: vec![Stmt::ClusterArrive],
                    else_body: Vec::new(),
                });
                wait(k);
            },
            barrier,
        ),
    ];
    for (message, before, after) in cases {
        let (r, _) = run_out(&refused_one_store(message, before, after), [2, 1, 1], 2);
        let e = r.unwrap_err();
        assert!(
            matches!(
                &e,
                InterpError::ThreadFault {
                    kind: FaultKind::InvalidIr,
                    ..
                }
            ) && e.to_string().contains(message),
            "{message}: {e}"
        );
    }
}

/// The statements of `k`'s body and nested lists, counted where `which` holds.
fn count(k: &ThreadKernel, which: impl Fn(&Stmt) -> bool) -> usize {
    let mut n = 0;
    k.walk(&mut |s| n += usize::from(which(s)));
    n
}

#[test]
fn the_lowering_keeps_only_the_cluster_barriers_something_needs() {
    // The softmax's one reduction (of a pair) is top-level: its barrier before the stores
    // is split (the arrive first in the kernel, the wait before the stores), one after.
    let kernel = softmax_cluster(64, 4, SoftmaxOptions::default()).unwrap();
    let target = Target {
        cluster: 4,
        ..Target::nvidia(2, 48 * 1024)
    };
    let tk = lower(&kernel, &target, &Specialization::none(6)).unwrap();
    let first = tk.body.iter().position(|s| !matches!(s, Stmt::Set { .. }));
    assert!(matches!(first.map(|i| &tk.body[i]), Some(Stmt::ClusterArrive)), "{tk}");
    assert_eq!(count(&tk, |s| matches!(s, Stmt::ClusterArrive)), 1, "{tk}");
    assert_eq!(count(&tk, |s| matches!(s, Stmt::ClusterWait)), 1, "{tk}");
    assert_eq!(count(&tk, |s| matches!(s, Stmt::ClusterBarrier)), 1, "{tk}");
    assert_eq!(count(&tk, |s| matches!(s, Stmt::ClusterStore { .. })), 2, "{tk}");
    // Two top-level reductions: the second has no barrier before its stores.
    let two = Kernel::build("two_reductions", |k| {
        let x = k.arg_ptr("x", F32);
        let out = k.arg_ptr("out", F32);
        let v = k.load(x + k.arange(0, 64));
        let total = v.sum(0).cluster_reduce(rutile_ir::ir::ReduceOp::Sum);
        k.store(
            out + k.program_id(0),
            total + v.max(0).cluster_reduce(rutile_ir::ir::ReduceOp::Max),
        );
    })
    .unwrap();
    let tk = lower(&two, &target, &Specialization::none(2)).unwrap();
    assert_eq!(count(&tk, |s| matches!(s, Stmt::ClusterWait)), 1, "{tk}");
    assert_eq!(count(&tk, |s| matches!(s, Stmt::ClusterBarrier)), 2, "{tk}");
    // Reductions in a loop: a whole barrier at the start (for reductions after the loop,
    // which cannot know whether it ran) and one before each reduction's stores.
    let tk = lower(&rounds_kernel(64), &target, &Specialization::none(5)).unwrap();
    assert_eq!(
        count(&tk, |s| matches!(s, Stmt::ClusterArrive | Stmt::ClusterWait)),
        0,
        "{tk}"
    );
    assert_eq!(count(&tk, |s| matches!(s, Stmt::ClusterBarrier)), 1 + 2 * 2, "{tk}");
}

/// A loop of `rounds` cluster maxima of `x`'s blocks, then a cluster sum after it, at the
/// kernel's top level: where the loop runs no round, that sum's stores rely on the barrier
/// at the kernel's start.
fn loop_then_top_level_kernel(block: u32) -> Kernel {
    use rutile_ir::ir::ReduceOp;
    Kernel::build("loop_then_top_level", |k| {
        let x = k.arg_ptr("x", F32);
        let max_out = k.arg_ptr("max", F32);
        let total_out = k.arg_ptr("total", F32);
        let rounds = k.arg_i32("rounds");
        let pid = k.program_id(0);
        let v = k.load(x + (pid * block as i32 + k.arange(0, block as i32)));
        k.for_range(0, rounds, 1, &[], |i, _| {
            k.store(
                max_out + (pid * rounds + i),
                (v * i).max(0).cluster_reduce(ReduceOp::Max),
            );
            vec![]
        });
        k.store(total_out + pid, v.sum(0).cluster_reduce(ReduceOp::Sum));
    })
    .unwrap()
}

#[test]
fn a_reduction_after_a_loop_of_reductions_that_may_not_run_is_ordered() {
    let mut rng = Rng::new(0x10C);
    let kernel = loop_then_top_level_kernel(64);
    for (cluster, rounds) in [(2u32, 0u32), (3, 2), (4, 0)] {
        let programs = (2 * cluster) as usize;
        let buffers = vec![
            HostBuffer::from_slice(&nonzero_f32s(&mut rng, programs * 64, 0.125, 4.0)),
            HostBuffer::zeros(F32, programs * rounds.max(1) as usize),
            HostBuffer::zeros(F32, programs),
        ];
        let mut args: Vec<ArgValue> = (0..3).map(ptr).collect();
        args.push(ArgValue::Int(rounds as i64));
        let at = format!("{rounds} rounds in clusters of {cluster}");
        let spec = Specialization::none(args.len());
        simulate_clustered(
            &at,
            &kernel,
            (1, cluster, &spec),
            [2 * cluster, 1, 1],
            &args,
            &buffers,
            1e-6,
        );
    }
}

#[test]
fn lowered_tuple_reductions_match_the_interpreter() {
    let mut rng = Rng::new(0xAF2);
    let kernel = affine_kernel();
    for (cluster, num_warps) in [(2u32, 1u32), (3, 2), (16, 2)] {
        let programs = 2 * cluster as usize;
        let x: Vec<i64> = rng
            .i32s(2 * programs, -(1 << 20), 1 << 20)
            .into_iter()
            .map(|v| i64::from(v) | 1)
            .collect();
        let buffers = vec![
            HostBuffer::from_slice(&x),
            HostBuffer::zeros(rutile_ir::ScalarType::I64, 2 * programs),
        ];
        let args = [ptr(0), ptr(1)];
        let at = format!("pairs in clusters of {cluster}");
        let spec = Specialization::none(args.len());
        simulate_clustered(
            &at,
            &kernel,
            (num_warps, cluster, &spec),
            [programs as u32, 1, 1],
            &args,
            &buffers,
            0.0,
        );
    }
}

/// The cluster softmax whose clusters walk rows in a pipelined loop: in the interpreter bit
/// for bit the one-row-a-cluster kernel's results, on grids of one cluster to one a row;
/// lowered (plain loads, and copies ahead from 2 stages where the target has asynchronous copies, its
/// cluster reduction then inside the loop) and simulated against the interpreter, on rows
/// ragged to the element that leave a program's share partly masked.
#[test]
fn lowered_cluster_row_walk_matches_the_interpreter() {
    let mut rng = Rng::new(0x5C4);
    for (cluster, block, num_warps) in [(2u32, 64u32, 1u32), (3, 128, 2), (4, 256, 4)] {
        let one_row = softmax_cluster(block, cluster, SoftmaxOptions::default()).unwrap();
        for divisible in [true, false] {
            let cols = row_lengths(block, cluster, divisible)[1];
            let rows = 5;
            let x = nonzero_f32s(&mut rng, rows * cols, 0.125, 8.0);
            let buffers = vec![HostBuffer::zeros(F32, rows * cols), HostBuffer::from_slice(&x)];
            let args = softmax_args(rows, cols);
            let mut want = buffers.clone();
            interp::run_clustered(&one_row, [rows as u32 * cluster, 1, 1], cluster, &args, &mut want).unwrap();
            let spec = if divisible {
                Specialization::all(args.len())
            } else {
                Specialization::none(args.len())
            };
            for stages in [1, 2, 3] {
                let kernel = softmax_cluster_rows(block, cluster, stages, SoftmaxOptions::default()).unwrap();
                for clusters in [1u32, 2, rows as u32] {
                    let grid = [clusters * cluster, 1, 1];
                    let at = format!(
                        "softmax {rows}x{cols}, {clusters} clusters of {cluster} programs of {block}, {stages} stages"
                    );
                    let mut got = buffers.clone();
                    interp::run_clustered(&kernel, grid, cluster, &args, &mut got).unwrap();
                    assert_eq!(
                        got[0].as_bytes(),
                        want[0].as_bytes(),
                        "{at}: differs from the one-row kernel"
                    );
                    if clusters != 2 {
                        continue;
                    }
                    simulate_clustered(&at, &kernel, (num_warps, cluster, &spec), grid, &args, &buffers, 1e-6);
                    let target = Target {
                        cluster,
                        async_copy: true,
                        ..Target::nvidia(num_warps, 48 * 1024)
                    };
                    let tk = lower(&kernel, &target, &spec).unwrap_or_else(|e| panic!("{at}: lowering fails: {e}"));
                    let mut copies = 0;
                    tk.walk(&mut |s| copies += matches!(s, Stmt::AsyncCopy { .. }) as usize);
                    assert_eq!(copies > 0, stages > 1, "{at}: {copies} asynchronous copies");
                    let mut simulated = buffers.clone();
                    simt::run_threads(&tk, grid, &args, &mut simulated).unwrap_or_else(|e| panic!("{at}: {e}"));
                    let (g, w) = (values(&simulated[0]), values(&want[0]));
                    for (j, (&gv, &wv)) in g.iter().zip(&w).enumerate() {
                        assert!(
                            (gv - wv).abs() <= 1e-6,
                            "{at} [asynchronous copies]: element {j}: simulated {gv}, interpreted {wv}"
                        );
                    }
                }
            }
        }
    }
}

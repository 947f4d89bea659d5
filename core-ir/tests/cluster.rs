//! `cluster_reduce` in the interpreter's clustered launches (`interp::run_clustered`):
//! programs that each reduce a block of a row and combine their partial results over their
//! cluster, against CPU references on random inputs (never zero), for clusters of 1 to 16
//! programs, several clusters along axis 0 and grids with `y` and `z` above 1; reductions
//! in a loop; the order the programs of a cluster take turns in; and the errors: launch
//! sizes that do not cluster, programs that reach the reduction unequally often (which must
//! return an error, not hang), faults and disagreeing programs.

mod tutorial_support;

use rutile_ir::interp::{self, capture_prints, ArgValue, FaultKind, HostBuffer, InterpError};
use rutile_ir::ir::ReduceOp::{self, Max, Min, Sum};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType::{self, F32, I32};
use rutile_ir::{Kernel, Value};
use tutorial_support::ptr;
use tutorial_support::rows::{affine_kernel, nonzero_f32s, rounds_kernel};

/// Elements of a row per program.
const BLOCK: u32 = 64;

/// Random i32s of either sign, mostly positive and large, so that sums of a hundred or so
/// wrap; never zero.
fn nonzero_i32s(rng: &mut Rng, n: usize) -> Vec<i32> {
    rng.i32s(n, -(1 << 29), 1 << 30)
        .into_iter()
        .map(|v| if v == 0 { 7 } else { v })
        .collect()
}

/// The row, rank and cluster of a program of a row kernel: the cluster `c` along axis 0
/// (of `cluster` programs) reduces row `(z * ny + y) * clusters_x + c`, its program of rank
/// `r` the `r`-th block of [`BLOCK`] elements of it.
fn row_and_rank<'b>(k: &'b rutile_ir::KernelBuilder, cluster: Value<'b>) -> (Value<'b>, Value<'b>) {
    let pid = k.program_id(0);
    let clusters_x = k.num_programs(0) / cluster;
    let row = (k.program_id(2) * k.num_programs(1) + k.program_id(1)) * clusters_x + pid / cluster;
    (row, pid % cluster)
}

/// `out_i[row * cluster + rank] = cluster_reduce(ops[i], reduce(ops[i], block))`: every
/// program stores what its reduction returned.
fn row_kernel(elem: ScalarType, ops: &[ReduceOp]) -> Kernel {
    Kernel::build("cluster_rows", |k| {
        let x = k.arg_ptr("x", elem);
        let outs: Vec<Value> = (0..ops.len()).map(|i| k.arg_ptr(&format!("out{i}"), elem)).collect();
        let cluster = k.arg_i32("cluster");
        let (row, rank) = row_and_rank(k, cluster);
        let offs = row * (cluster * BLOCK as i32) + rank * BLOCK as i32 + k.arange(0, BLOCK as i32);
        let v = k.load(x + offs);
        for (&op, &out) in ops.iter().zip(&outs) {
            let partial = v.reduce_with(op, 0, false);
            k.store(out + (row * cluster + rank), partial.cluster_reduce(op));
        }
    })
    .unwrap()
}

/// Runs [`row_kernel`] on `x` (`rows` rows of `cluster * BLOCK`) over `grid`; returns the
/// outputs, one element per program.
fn run_rows(kernel: &Kernel, x: HostBuffer, outputs: usize, grid: [u32; 3], cluster: u32) -> Vec<HostBuffer> {
    let programs = (grid[0] * grid[1] * grid[2]) as usize;
    let elem = x.elem();
    let mut buffers = vec![x];
    buffers.extend((0..outputs).map(|_| HostBuffer::zeros(elem, programs)));
    let mut args: Vec<ArgValue> = (0..=outputs).map(ptr).collect();
    args.push(ArgValue::Int(cluster as i64));
    interp::run_clustered(kernel, grid, cluster, &args, &mut buffers).unwrap();
    buffers.split_off(1)
}

/// The grids of the row tests for clusters of `n`: one cluster, several along axis 0, and
/// several along every axis.
fn grids(n: u32) -> [[u32; 3]; 3] {
    [[n, 1, 1], [3 * n, 1, 1], [2 * n, 3, 2]]
}

/// The f32 sum the interpreter computes: each block summed in f64 and rounded to f32, the
/// partial sums added in rank order in f64 and rounded once.
fn model_sum(row: &[f32]) -> f32 {
    row.chunks(BLOCK as usize)
        .map(|b| b.iter().map(|&v| v as f64).sum::<f64>() as f32 as f64)
        .sum::<f64>() as f32
}

#[test]
fn f32_row_max_and_sum_over_clusters_match_the_reference() {
    let mut rng = Rng::new(0xC1);
    let kernel = row_kernel(F32, &[Max, Sum]);
    for n in [1, 2, 3, 4, 8, 16] {
        for grid in grids(n) {
            let programs = (grid[0] * grid[1] * grid[2]) as usize;
            let rows = programs / n as usize;
            let cols = (n * BLOCK) as usize;
            let x = nonzero_f32s(&mut rng, rows * cols, 0.25, 4.0);
            let out = run_rows(&kernel, HostBuffer::from_slice(&x), 2, grid, n);
            let (max, sum) = (out[0].to_vec::<f32>().unwrap(), out[1].to_vec::<f32>().unwrap());
            for r in 0..rows {
                let row = &x[r * cols..(r + 1) * cols];
                let want_max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let exact: f64 = row.iter().map(|&v| v as f64).sum();
                for rank in 0..n as usize {
                    let at = format!("cluster {n}, grid {grid:?}, row {r}, rank {rank}");
                    let i = r * n as usize + rank;
                    assert_eq!(max[i], want_max, "{at}: max");
                    assert_eq!(sum[i], model_sum(row), "{at}: sum");
                    assert!(
                        (sum[i] as f64 - exact).abs() <= 1e-5 * exact.abs().max(1.0),
                        "{at}: sum"
                    );
                }
            }
        }
    }
}

#[test]
fn i32_row_sum_wraps_and_min_over_clusters_match_the_reference() {
    let mut rng = Rng::new(0xC2);
    let kernel = row_kernel(I32, &[Sum, Min, Max]);
    for n in [1, 2, 4, 8] {
        for grid in grids(n) {
            let programs = (grid[0] * grid[1] * grid[2]) as usize;
            let rows = programs / n as usize;
            let cols = (n * BLOCK) as usize;
            let x = nonzero_i32s(&mut rng, rows * cols);
            let out = run_rows(&kernel, HostBuffer::from_slice(&x), 3, grid, n);
            let got: Vec<Vec<i32>> = out.iter().map(|b| b.to_vec::<i32>().unwrap()).collect();
            for r in 0..rows {
                let row = &x[r * cols..(r + 1) * cols];
                let sum = row.iter().fold(0i32, |a, &v| a.wrapping_add(v));
                let wide: i64 = row.iter().map(|&v| v as i64).sum();
                if n >= 2 {
                    assert_ne!(sum as i64, wide, "the test wants sums that wrap");
                }
                let want = [sum, *row.iter().min().unwrap(), *row.iter().max().unwrap()];
                for rank in 0..n as usize {
                    let i = r * n as usize + rank;
                    let at = format!("cluster {n}, grid {grid:?}, row {r}, rank {rank}");
                    assert_eq!([got[0][i], got[1][i], got[2][i]], want, "{at}: sum, min, max");
                }
            }
        }
    }
}

#[test]
fn clusters_of_one_are_the_plain_launch() {
    let mut rng = Rng::new(0xC3);
    let kernel = row_kernel(F32, &[Max, Sum]);
    let grid = [6, 2, 1];
    let x = nonzero_f32s(&mut rng, 12 * BLOCK as usize, 0.25, 4.0);
    let clustered = run_rows(&kernel, HostBuffer::from_slice(&x), 2, grid, 1);
    let mut buffers = vec![
        HostBuffer::from_slice(&x),
        HostBuffer::zeros(F32, 12),
        HostBuffer::zeros(F32, 12),
    ];
    let args = [ptr(0), ptr(1), ptr(2), ArgValue::Int(1)];
    interp::run(&kernel, grid, &args, &mut buffers).unwrap();
    assert_eq!(clustered, buffers[1..]);
    // Each program's reduction is its own block's.
    let max = clustered[0].to_vec::<f32>().unwrap();
    for (p, block) in x.chunks(BLOCK as usize).enumerate() {
        assert_eq!(max[p], block.iter().copied().fold(f32::NEG_INFINITY, f32::max));
    }
}

#[test]
fn f32_max_propagates_a_nan_of_any_program_of_the_cluster() {
    let mut rng = Rng::new(0xC4);
    let kernel = row_kernel(F32, &[Max, Min]);
    let n = 4;
    let (rows, cols) = (6usize, (4 * BLOCK) as usize);
    let mut x = nonzero_f32s(&mut rng, rows * cols, 0.25, 4.0);
    // A NaN in rank 0's block of row 1, rank 2's of row 3, the last rank's of row 4.
    for (row, rank) in [(1, 0), (3, 2), (4, 3)] {
        x[row * cols + rank * BLOCK as usize + rng.below(BLOCK as u64) as usize] = f32::NAN;
    }
    let out = run_rows(&kernel, HostBuffer::from_slice(&x), 2, [n, rows as u32, 1], n);
    let (max, min) = (out[0].to_vec::<f32>().unwrap(), out[1].to_vec::<f32>().unwrap());
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        for rank in 0..n as usize {
            let i = r * n as usize + rank;
            if [1, 3, 4].contains(&r) {
                assert!(
                    max[i].is_nan() && min[i].is_nan(),
                    "row {r}, rank {rank}: {} {}",
                    max[i],
                    min[i]
                );
            } else {
                assert_eq!(max[i], row.iter().copied().fold(f32::NEG_INFINITY, f32::max));
                assert_eq!(min[i], row.iter().copied().fold(f32::INFINITY, f32::min));
            }
        }
    }
}

#[test]
fn reductions_in_a_loop_combine_round_by_round() {
    let mut rng = Rng::new(0xC5);
    let kernel = rounds_kernel(BLOCK);
    for (n, clusters, rounds) in [(2u32, 3u32, 5u32), (4, 2, 3), (8, 1, 4), (1, 2, 3)] {
        let blocks = (clusters * rounds * n) as usize;
        let x = nonzero_f32s(&mut rng, blocks * BLOCK as usize, 0.25, 4.0);
        let programs = (clusters * n) as usize;
        let mut buffers = vec![
            HostBuffer::from_slice(&x),
            HostBuffer::zeros(F32, blocks),
            HostBuffer::zeros(F32, programs),
        ];
        let args = [
            ptr(0),
            ptr(1),
            ptr(2),
            ArgValue::Int(n as i64),
            ArgValue::Int(rounds as i64),
        ];
        interp::run_clustered(&kernel, [clusters * n, 1, 1], n, &args, &mut buffers).unwrap();
        let max = buffers[1].to_vec::<f32>().unwrap();
        let total = buffers[2].to_vec::<f32>().unwrap();
        let width = (n * BLOCK) as usize;
        for c in 0..clusters as usize {
            let mut want_total = 0f32;
            for i in 0..rounds as usize {
                let round = &x[(c * rounds as usize + i) * width..][..width];
                want_total += model_sum(round);
                let want_max = round.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                for rank in 0..n as usize {
                    let at = (c * rounds as usize + i) * n as usize + rank;
                    assert_eq!(max[at], want_max, "cluster {n}: cluster {c}, round {i}, rank {rank}");
                }
            }
            for rank in 0..n as usize {
                assert_eq!(
                    total[c * n as usize + rank],
                    want_total,
                    "cluster {n}: cluster {c}, rank {rank}"
                );
            }
        }
    }
}

#[test]
fn a_reduction_orders_memory_like_a_barrier_in_a_fixed_turn_order() {
    // Each program marks itself and takes a ticket from a counter before the reduction,
    // and after it reads every mark of its cluster and takes a second ticket.
    let kernel = Kernel::build("cluster_turns", |k| {
        let marks = k.arg_ptr("marks", I32);
        let seen = k.arg_ptr("seen", I32);
        let counter = k.arg_ptr("counter", I32);
        let tickets = k.arg_ptr("tickets", I32);
        let cluster = k.arg_i32("cluster");
        let pid = k.program_id(0);
        let (c, rank) = (pid / cluster, pid % cluster);
        k.store(marks + pid, rank + 1);
        k.store(tickets + pid * 2, k.atomic_add(counter, 1, None));
        let count = k.scalar(1, I32).cluster_reduce(Sum);
        let lanes = k.arange(0, 16);
        let all = k
            .load_masked(marks + (c * cluster + lanes), lanes.lt(cluster), 0)
            .sum(0);
        k.store(seen + pid, all * 100 + count);
        k.store(tickets + (pid * 2 + 1), k.atomic_add(counter, 1, None));
    })
    .unwrap();
    for (n, clusters) in [(2u32, 3u32), (4, 2), (16, 1), (3, 2)] {
        let programs = (n * clusters) as usize;
        let mut buffers = vec![
            HostBuffer::zeros(I32, programs),
            HostBuffer::zeros(I32, programs),
            HostBuffer::zeros(I32, 1),
            HostBuffer::zeros(I32, 2 * programs),
        ];
        let args = [ptr(0), ptr(1), ptr(2), ptr(3), ArgValue::Int(n as i64)];
        interp::run_clustered(&kernel, [n * clusters, 1, 1], n, &args, &mut buffers).unwrap();
        let n = n as i32;
        let seen = buffers[1].to_vec::<i32>().unwrap();
        assert_eq!(seen, vec![n * (n + 1) / 2 * 100 + n; programs], "cluster {n}");
        // Cluster by cluster, rank 0 first: all tickets before the reduction, then all after.
        let tickets = buffers[3].to_vec::<i32>().unwrap();
        for p in 0..programs as i32 {
            let (c, rank) = (p / n, p % n);
            let want = [2 * n * c + rank, 2 * n * c + n + rank];
            assert_eq!(tickets[2 * p as usize..][..2], want, "cluster {n}: program {p}");
        }
    }
}

#[test]
fn prints_come_in_turn_order_and_reach_the_capture() {
    let kernel = Kernel::build("cluster_print", |k| {
        let pid = k.program_id(0);
        k.device_print("before", &[pid]);
        let sum = pid.cluster_reduce(Sum);
        k.device_print("after", &[sum]);
    })
    .unwrap();
    let (result, text) = capture_prints(|| interp::run_clustered(&kernel, [4, 1, 1], 2, &[], &mut []));
    result.unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let want = [
        "pid (0, 0, 0) idx () before: 0",
        "pid (1, 0, 0) idx () before: 1",
        "pid (0, 0, 0) idx () after: 1",
        "pid (1, 0, 0) idx () after: 1",
        "pid (2, 0, 0) idx () before: 2",
        "pid (3, 0, 0) idx () before: 3",
        "pid (2, 0, 0) idx () after: 5",
        "pid (3, 0, 0) idx () after: 5",
    ];
    assert_eq!(lines, want, "{text}");
}

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

fn sum_of_pids() -> Kernel {
    Kernel::build("cluster_pids", |k| {
        let out = k.arg_ptr("out", I32);
        let pid = k.program_id(0);
        k.store(out + pid, (pid + 1).cluster_reduce(Sum));
    })
    .unwrap()
}

#[test]
fn a_grid_that_does_not_split_into_clusters_is_an_error() {
    let kernel = sum_of_pids();
    let mut buffers = [HostBuffer::zeros(I32, 6)];
    let err = interp::run_clustered(&kernel, [6, 1, 1], 4, &[ptr(0)], &mut buffers).unwrap_err();
    assert_eq!(
        err,
        InterpError::GridNotClustered {
            grid: [6, 1, 1],
            cluster: 4
        }
    );
    assert_eq!(
        err.to_string(),
        "grid (6, 1, 1) does not split into clusters of 4 programs: expected axis 0 to be a multiple of 4, got 6"
    );
    assert_eq!(buffers[0].to_vec::<i32>().unwrap(), [0; 6], "no program ran");
}

#[test]
fn cluster_sizes_of_0_and_above_16_are_errors() {
    let kernel = sum_of_pids();
    for size in [0, 17, 32] {
        let mut buffers = [HostBuffer::zeros(I32, 64)];
        let err = interp::run_clustered(&kernel, [32, 1, 1], size, &[ptr(0)], &mut buffers).unwrap_err();
        assert_eq!(err, InterpError::ClusterSize { cluster: size });
        assert_eq!(
            err.to_string(),
            format!("a cluster of {size} programs: expected 1 to 16 programs a cluster")
        );
    }
    // 16 is fine.
    let mut buffers = [HostBuffer::zeros(I32, 32)];
    interp::run_clustered(&kernel, [32, 1, 1], 16, &[ptr(0)], &mut buffers).unwrap();
    let want: Vec<i32> = (0..32).map(|p| if p < 16 { 136 } else { 392 }).collect();
    assert_eq!(buffers[0].to_vec::<i32>().unwrap(), want);
}

/// A kernel whose program of rank `skip` (in clusters other than `only_cluster`'s, when
/// set) does `short` reductions and every other program `long`, in a loop.
fn uneven_kernel() -> Kernel {
    Kernel::build("cluster_uneven", |k| {
        let out = k.arg_ptr("out", I32);
        let cluster = k.arg_i32("cluster");
        let skip = k.arg_i32("skip");
        let only_cluster = k.arg_i32("only_cluster");
        let short = k.arg_i32("short");
        let long = k.arg_i32("long");
        let pid = k.program_id(0);
        let (c, rank) = (pid / cluster, pid % cluster);
        let uneven = rank.eq(skip) & (only_cluster.lt(0) | c.eq(only_cluster));
        let rounds = k.where_(uneven, short, long);
        k.for_each(0, rounds, 1, |_| {
            k.store(out + pid, (pid + 1).cluster_reduce(Sum));
        });
    })
    .unwrap()
}

fn run_uneven(grid0: u32, n: u32, skip: i64, only_cluster: i64, short: i64, long: i64) -> (InterpError, Vec<i32>) {
    let kernel = uneven_kernel();
    let mut buffers = [HostBuffer::zeros(I32, grid0 as usize)];
    let args = [
        ptr(0),
        ArgValue::Int(n as i64),
        ArgValue::Int(skip),
        ArgValue::Int(only_cluster),
        ArgValue::Int(short),
        ArgValue::Int(long),
    ];
    let err = interp::run_clustered(&kernel, [grid0, 1, 1], n, &args, &mut buffers).unwrap_err();
    (err, buffers[0].to_vec().unwrap())
}

#[test]
fn a_program_that_skips_the_reduction_is_an_error_not_a_hang() {
    for skip in [0, 1, 3] {
        let (err, _) = run_uneven(4, 4, skip, -1, 0, 1);
        let waiting = if skip == 0 { [1, 0, 0] } else { [0, 0, 0] };
        let InterpError::ClusterReduceMismatch {
            first,
            size,
            finished,
            waiting: w,
            reductions,
            ..
        } = err.clone()
        else {
            panic!("skip {skip}: {err}");
        };
        assert_eq!(
            (first, size, finished, w, reductions),
            ([0, 0, 0], 4, [skip as u32, 0, 0], waiting, 0)
        );
        let msg = err.to_string();
        let want = format!(
            "program ({skip}, 0, 0) of the cluster of programs (0..=3, 0, 0) finished after 0 cluster reductions \
             while program ({}, 0, 0) waits at reduction 1",
            waiting[0]
        );
        assert!(msg.starts_with("cluster_reduce at ") && msg.ends_with(&want), "{msg}");
    }
}

#[test]
fn a_mismatch_in_a_later_cluster_or_round_names_it() {
    // Cluster 1 (programs 2 and 3) mismatches; cluster 0 completed and stored its sums.
    let (err, out) = run_uneven(6, 2, 1, 1, 0, 1);
    assert!(
        err.to_string()
            .ends_with("program (3, 0, 0) of the cluster of programs (2..=3, 0, 0) finished after 0 cluster reductions while program (2, 0, 0) waits at reduction 1"),
        "{err}"
    );
    assert_eq!(out, [3, 3, 0, 0, 0, 0]);
    // Rank 2 stops after one round of three.
    let (err, _) = run_uneven(4, 4, 2, -1, 1, 3);
    assert!(
        err.to_string()
            .ends_with("program (2, 0, 0) of the cluster of programs (0..=3, 0, 0) finished after 1 cluster reductions while program (0, 0, 0) waits at reduction 2"),
        "{err}"
    );
    // Rank 2 goes on to a third round that the others never reach.
    let (err, out) = run_uneven(4, 4, 2, -1, 3, 2);
    assert!(
        err.to_string()
            .ends_with("program (0, 0, 0) of the cluster of programs (0..=3, 0, 0) finished after 2 cluster reductions while program (2, 0, 0) waits at reduction 3"),
        "{err}"
    );
    assert_eq!(out, [10; 4]);
}

#[test]
fn a_fault_in_one_program_stops_the_cluster() {
    // The program `bad` stores out of bounds before (or after) the reduction.
    let kernel = Kernel::build("cluster_fault", |k| {
        let out = k.arg_ptr("out", I32);
        let bad = k.arg_i32("bad");
        let after = k.arg_i32("after");
        let pid = k.program_id(0);
        let at = k.where_(pid.eq(bad), 1 << 20, pid);
        k.if_then(after.eq(0), || k.store(out + at, pid));
        let sum = (pid + 1).cluster_reduce(Sum);
        k.if_then(after.ne(0), || k.store(out + at, sum));
    })
    .unwrap();
    for (bad, after) in [(2, 0), (0, 0), (3, 0), (2, 1), (5, 1)] {
        let mut buffers = [HostBuffer::zeros(I32, 8)];
        let args = [ptr(0), ArgValue::Int(bad), ArgValue::Int(after)];
        let err = interp::run_clustered(&kernel, [8, 1, 1], 4, &args, &mut buffers).unwrap_err();
        let InterpError::Fault { kind, op, program, .. } = err else {
            panic!("{err}");
        };
        assert_eq!(
            (kind, op, program),
            (FaultKind::OutOfBounds, "store", [bad as u32, 0, 0])
        );
    }
}

#[test]
fn programs_that_disagree_on_a_reduction_are_invalid() {
    // Rank 1 reduces an f32 (or combines by max) where the others reduce an i32 by sum.
    for by_type in [true, false] {
        let kernel = Kernel::build("cluster_disagree", |k| {
            let out = k.arg_ptr("out", I32);
            let pid = k.program_id(0);
            let odd = (pid % 4).eq(1);
            k.if_then(odd, || {
                let v = if by_type {
                    pid.to(F32).cluster_reduce(Sum).to(I32)
                } else {
                    pid.cluster_reduce(Max)
                };
                k.store(out + pid, v);
            });
            k.if_then(!odd, || k.store(out + pid, pid.cluster_reduce(Sum)));
        })
        .unwrap();
        let mut buffers = [HostBuffer::zeros(I32, 4)];
        let err = interp::run_clustered(&kernel, [4, 1, 1], 4, &[ptr(0)], &mut buffers).unwrap_err();
        let InterpError::Fault {
            kind,
            op,
            program,
            ref message,
            ..
        } = err
        else {
            panic!("{err}");
        };
        assert_eq!((kind, op, program), (FaultKind::InvalidIr, "cluster_reduce", [3, 0, 0]));
        let want = if by_type {
            "at cluster reduction 1, program (0, 0, 0) passes i32 but program (1, 0, 0) passes f32"
        } else {
            "at cluster reduction 1, program (0, 0, 0) combines by sum but program (1, 0, 0) by max"
        };
        assert_eq!(message, want);
    }
}

/// The pairs of `x` composed from the first up, wrapping as i64 does.
fn composed(x: &[i64]) -> [i64; 2] {
    x.chunks(2).skip(1).fold([x[0], x[1]], |[m, c], b| {
        [m.wrapping_mul(b[0]), c.wrapping_mul(b[0]).wrapping_add(b[1])]
    })
}

#[test]
fn tuples_combine_in_rank_order_in_one_exchange() {
    let mut rng = Rng::new(0xAF);
    let kernel = affine_kernel();
    for n in [1u32, 2, 3, 4, 8, 16] {
        let programs = 3 * n as usize;
        let x: Vec<i64> = nonzero_i32s(&mut rng, 2 * programs)
            .into_iter()
            .map(i64::from)
            .collect();
        let mut buffers = vec![
            HostBuffer::from_slice(&x),
            HostBuffer::zeros(ScalarType::I64, 2 * programs),
        ];
        interp::run_clustered(&kernel, [programs as u32, 1, 1], n, &[ptr(0), ptr(1)], &mut buffers)
            .unwrap_or_else(|e| panic!("cluster {n}: {e}"));
        let got = buffers[1].to_vec::<i64>().unwrap();
        for c in 0..3 {
            let members = c * n as usize..(c + 1) * n as usize;
            let want = composed(&x[2 * members.start..2 * members.end]);
            if n >= 2 {
                let swapped = [
                    &x[2 * members.start + 2..2 * members.start + 4],
                    &x[2 * members.start..2 * members.start + 2],
                ]
                .concat();
                assert_ne!(
                    composed(&swapped),
                    composed(&x[2 * members.start..2 * members.start + 4]),
                    "the test wants an order that shows"
                );
            }
            for p in members {
                assert_eq!([got[2 * p], got[2 * p + 1]], want, "cluster {n}, program {p}");
            }
        }
    }
}

#[test]
fn the_online_softmax_pair_matches_the_reference() {
    // Each program's share of a row: its maximum and its sum of exp(x - max); the pair
    // combined over the cluster is the row's maximum and sum of exp(x - row max).
    let kernel = Kernel::build("cluster_softmax_stats", |k| {
        let x = k.arg_ptr("x", F32);
        let out = k.arg_ptr("out", F32);
        let pid = k.program_id(0);
        let v = k.load(x + (pid * BLOCK as i32 + k.arange(0, BLOCK as i32)));
        let m = v.max(0);
        let stats = k.cluster_reduce_n(&[m, (v - m).exp().sum(0)], |_, a, b| {
            let m = a[0].maximum(b[0]);
            vec![m, a[1] * (a[0] - m).exp() + b[1] * (b[0] - m).exp()]
        });
        k.store(out + 2 * pid, stats[0]);
        k.store(out + (2 * pid + 1), stats[1]);
    })
    .unwrap();
    let mut rng = Rng::new(0x50F);
    for n in [2u32, 5, 16] {
        let x = nonzero_f32s(&mut rng, (n * BLOCK) as usize, 0.5, 8.0);
        let mut buffers = vec![HostBuffer::from_slice(&x), HostBuffer::zeros(F32, 2 * n as usize)];
        interp::run_clustered(&kernel, [n, 1, 1], n, &[ptr(0), ptr(1)], &mut buffers).unwrap();
        let got = buffers[1].to_vec::<f32>().unwrap();
        let row_max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        let total: f64 = x.iter().map(|&v| (v as f64 - row_max).exp()).sum();
        for p in 0..n as usize {
            assert_eq!(got[2 * p] as f64, row_max, "cluster {n}, program {p}: maximum");
            let err = (got[2 * p + 1] as f64 - total).abs() / total;
            assert!(
                err < 1e-5,
                "cluster {n}, program {p}: sum {} against {total}",
                got[2 * p + 1]
            );
        }
    }
}

#[test]
fn cluster_reduce_n_checks_its_operands() {
    let e = Kernel::build("block_operand", |k| {
        let x = k.arg_ptr("x", F32);
        let v = k.load(x + k.arange(0, 4));
        k.cluster_reduce_n(&[v], |_, a, b| vec![a[0] + b[0]]);
    })
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("cluster_reduce") && e.contains("a scalar of 32 or 64 bits, got"),
        "{e}"
    );
    let e = Kernel::build("narrow_operand", |k| {
        let x = k.arg_ptr("x", ScalarType::F16);
        let v = k.load(x);
        k.cluster_reduce_n(&[v], |_, a, b| vec![a[0] + b[0]]);
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("operand 0") && e.contains("f16"), "{e}");
    let e = Kernel::build("wrong_yield", |k| {
        let x = k.arg_ptr("x", F32);
        let v = k.load(x);
        k.cluster_reduce_n(&[v, v], |_, a, _| vec![a[0]]);
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("cluster_reduce"), "{e}");
}

#[test]
fn cluster_reduce_n_without_a_cluster_is_its_operands_and_prints_its_combine() {
    let kernel = affine_kernel();
    let text = kernel.to_string();
    assert!(
        text.lines()
            .any(|l| l.contains("cluster_reduce %") && l.contains("combine(")),
        "{text}"
    );
    let x: Vec<i64> = vec![3, -5, 7, 11, -2, 4];
    let mut buffers = vec![HostBuffer::from_slice(&x), HostBuffer::zeros(ScalarType::I64, 6)];
    interp::run(&kernel, [3, 1, 1], &[ptr(0), ptr(1)], &mut buffers).unwrap();
    assert_eq!(buffers[1].to_vec::<i64>().unwrap(), x);
    // A cluster of one program: the same.
    let mut buffers = vec![HostBuffer::from_slice(&x), HostBuffer::zeros(ScalarType::I64, 6)];
    interp::run_clustered(&kernel, [3, 1, 1], 1, &[ptr(0), ptr(1)], &mut buffers).unwrap();
    assert_eq!(buffers[1].to_vec::<i64>().unwrap(), x);
}

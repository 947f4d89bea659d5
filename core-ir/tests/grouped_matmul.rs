//! The grouped GEMM tutorial's kernel: every problem of a list of ragged shapes (empty
//! ones, `K = 0`, one row, edges in every dimension) against a CPU product, with a
//! program a tile and with fewer programs walking the tiles, packed and aligned; the
//! interpreter's fault where the alignment it was promised is broken; and its lowering in
//! the SIMT simulator against the interpreter.

mod tutorial_support;

use half::f16;
use rutile_ir::interp::{self, ArgValue, HostBuffer};
use rutile_ir::seeds::{grouped_matmul, GroupedMatmulLayout, GroupedMatmulMeta};
use rutile_ir::testing::Rng;
use tutorial_support::{assert_close, ptr, simulate_targets, values};

/// `(M, N, K)` of each problem: edges in every dimension, an empty problem, an empty sum.
const PROBLEMS: [(usize, usize, usize); 6] = [
    (37, 45, 29),
    (32, 32, 64),
    (1, 70, 17),
    (50, 3, 40),
    (0, 20, 8),
    (5, 7, 0),
];

fn meta(block: u32, aligned: bool) -> GroupedMatmulMeta {
    GroupedMatmulMeta::new((block, block, block), aligned)
}

/// The problems' random matrices placed as `layout` says (padding left zero), the
/// output poisoned with NaN, and the tables: `[a, b, c, offsets, sizes, lds]`.
fn buffers(rng: &mut Rng, layout: &GroupedMatmulLayout) -> Vec<HostBuffer> {
    let mut a = vec![f16::ZERO; layout.lens[0]];
    let mut b = vec![f16::ZERO; layout.lens[1]];
    for (g, s) in layout.sizes.chunks(3).enumerate() {
        let (m, n, k) = (s[0] as usize, s[1] as usize, s[2] as usize);
        let (off, ld) = (&layout.offsets[3 * g..], &layout.lds[3 * g..]);
        for (buf, rows, cols, start, ld) in [(&mut a, m, k, off[0], ld[0]), (&mut b, k, n, off[1], ld[1])] {
            for r in 0..rows {
                for c in 0..cols {
                    buf[start as usize + r * ld as usize + c] = f16::from_f32(rng.f32s(1, -1.0, 1.0)[0]);
                }
            }
        }
    }
    vec![
        HostBuffer::from_slice(&a),
        HostBuffer::from_slice(&b),
        HostBuffer::from_slice(&vec![f16::NAN; layout.lens[2]]),
        HostBuffer::from_slice(&layout.offsets),
        HostBuffer::from_slice(&layout.sizes),
        HostBuffer::from_slice(&layout.lds),
    ]
}

fn args(layout: &GroupedMatmulLayout) -> Vec<ArgValue> {
    let mut args: Vec<ArgValue> = (0..6).map(ptr).collect();
    args.push(ArgValue::Int((layout.sizes.len() / 3) as i64));
    args
}

/// Every problem's C from the inputs in `bufs`, in f64, at C's places (NaN elsewhere), and
/// the largest `K` (for the bound).
fn reference(bufs: &[HostBuffer], layout: &GroupedMatmulLayout) -> Vec<f64> {
    let (a, b) = (values(&bufs[0]), values(&bufs[1]));
    let mut c = vec![f64::NAN; layout.lens[2]];
    for (g, s) in layout.sizes.chunks(3).enumerate() {
        let (m, n, k) = (s[0] as usize, s[1] as usize, s[2] as usize);
        let off: Vec<usize> = layout.offsets[3 * g..3 * g + 3].iter().map(|&v| v as usize).collect();
        let ld: Vec<usize> = layout.lds[3 * g..3 * g + 3].iter().map(|&v| v as usize).collect();
        for i in 0..m {
            for j in 0..n {
                let sum = (0..k)
                    .map(|p| a[off[0] + i * ld[0] + p] * b[off[1] + p * ld[1] + j])
                    .sum();
                c[off[2] + i * ld[2] + j] = sum;
            }
        }
    }
    c
}

/// The interpreter's C where the reference has one (padding must stay NaN: nothing
/// outside a problem's C is written), within fp16's rounding of sums of up to 64 products
/// of values in [-1, 1].
#[track_caller]
fn check(got: &HostBuffer, want: &[f64], at: &str) {
    let got = values(got);
    let (mut g, mut w) = (Vec::new(), Vec::new());
    for (i, (&gv, &wv)) in got.iter().zip(want).enumerate() {
        if wv.is_nan() {
            assert!(
                gv.is_nan(),
                "{at}: element {i} is outside every C but was written ({gv})"
            );
        } else {
            g.push(gv);
            w.push(wv);
        }
    }
    assert!(!w.is_empty(), "{at}: no output to check");
    assert_close(&g, &w, 1e-3, 4e-3, at);
}

#[test]
fn every_problem_matches_the_cpu_product() {
    let mut rng = Rng::new(21);
    for aligned in [false, true] {
        for block in [16, 32] {
            let meta = meta(block, aligned);
            let layout = GroupedMatmulLayout::new(&PROBLEMS, aligned).unwrap();
            let kernel = grouped_matmul(&meta).unwrap();
            let bufs = buffers(&mut rng, &layout);
            let want = reference(&bufs, &layout);
            let tiles = layout.tiles(&meta);
            // A program a tile; fewer programs than tiles walking them (as the tutorial's
            // one a multiprocessor); more programs than tiles (some find none).
            for grid in [tiles, 3, tiles + 5] {
                let mut run = bufs.clone();
                interp::run(&kernel, [grid, 1, 1], &args(&layout), &mut run)
                    .unwrap_or_else(|e| panic!("block {block}, aligned {aligned}, grid {grid}: {e}"));
                check(
                    &run[2],
                    &want,
                    &format!("block {block}, aligned {aligned}, grid {grid}"),
                );
            }
        }
    }
}

#[test]
fn aligned_layouts_pad_leading_dimensions_and_starts() {
    let layout = GroupedMatmulLayout::new(&PROBLEMS, true).unwrap();
    assert!(
        layout.offsets.iter().chain(&layout.lds).all(|v| v % 8 == 0),
        "{layout:?}"
    );
    // A of (37, 45, 29): rows of 32; B of (32, 32, 64) starts after the first B, 29 x 48.
    assert_eq!(&layout.lds[..3], &[32, 48, 48]);
    assert_eq!(layout.offsets[4], 29 * 48);
    let packed = GroupedMatmulLayout::new(&PROBLEMS, false).unwrap();
    assert_eq!(&packed.lds[..3], &[29, 45, 45]);
    assert_eq!(packed.offsets[3], 37 * 29);
    assert_eq!(packed.tiles(&meta(16, false)), 3 * 3 + 2 * 2 + 5 + 4 + 1);
}

#[test]
fn a_broken_alignment_promise_is_a_fault() {
    let meta = meta(16, true);
    // Packed, not aligned: the first A's rows are 29 elements long.
    let layout = GroupedMatmulLayout::new(&PROBLEMS, false).unwrap();
    let mut bufs = buffers(&mut Rng::new(3), &layout);
    let e = interp::run(&grouped_matmul(&meta).unwrap(), [4, 1, 1], &args(&layout), &mut bufs)
        .expect_err("the leading dimensions are not multiples of 8");
    let message = e.to_string();
    for part in ["broken hint", "multiple_of", "29 is not a multiple of 8"] {
        assert!(message.contains(part), "{message:?} does not say {part:?}");
    }
}

#[test]
fn lowered_kernels_match_the_interpreter() {
    let problems = [(20, 33, 24), (0, 8, 8), (16, 5, 40), (9, 16, 0)];
    for aligned in [false, true] {
        let meta = meta(16, aligned);
        let layout = GroupedMatmulLayout::new(&problems, aligned).unwrap();
        let bufs = buffers(&mut Rng::new(8), &layout);
        let kernel = grouped_matmul(&meta).unwrap();
        simulate_targets(
            &format!("grouped matmul, aligned {aligned}"),
            &kernel,
            [4, 1, 1],
            &args(&layout),
            &bufs,
            1e-5,
        );
    }
}

/// On Hopper's warpgroup MMAs, pipelined, as the runtime lowers the tutorial there (aligned
/// tables): A, masked by a `where` past its problem's K after its load, is an operand the
/// loop computes, so its loads are copied ahead into each thread's slots and it is stored
/// into two tiles in turn, the MMAs left in flight (`wait_group 1`); the simulator (which
/// reports a store into a tile an MMA in flight still reads) against the interpreter, on
/// ragged problems and 1 and 2 warpgroups.
#[test]
fn lowered_on_warpgroup_mmas_matches_the_interpreter() {
    use rutile_ir::target::Target;
    use rutile_ir::thread::Stmt;
    let problems = [(100, 70, 72), (64, 64, 128), (1, 30, 40), (70, 9, 0)];
    for (block, warps) in [((64, 64, 32), 4), ((128, 64, 32), 8)] {
        let meta = GroupedMatmulMeta::new(block, true);
        let layout = GroupedMatmulLayout::new(&problems, true).unwrap();
        let bufs = buffers(&mut Rng::new(9), &layout);
        let kernel = grouped_matmul(&meta).unwrap();
        let hopper = Target {
            mma_sync: true,
            wgmma: true,
            async_copy: true,
            num_stages: 3,
            ..Target::nvidia(warps, 227 * 1024)
        };
        let tk = rutile_ir::lower::lower(&kernel, &hopper, &tutorial_support::runtime_spec(&args(&layout))).unwrap();
        let mut in_flight = 0;
        tk.walk(&mut |s| in_flight += matches!(s, Stmt::WgmmaWait { pending: 1 }) as usize);
        let at = format!("grouped matmul {block:?} on {warps} warps");
        assert!(in_flight > 0, "{at}: no MMAs left in flight");
        tutorial_support::simulate_on(&at, &kernel, &[hopper], [3, 1, 1], &args(&layout), &bufs, 1e-5);
    }
}

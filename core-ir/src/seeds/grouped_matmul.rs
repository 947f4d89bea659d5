//! Triton's grouped GEMM tutorial: one launch multiplies a list of matrix pairs of
//! different shapes, its programs walking the tiles of every problem in turn.
//!
//! Triton's kernel reads each problem's matrices through pointers loaded from memory
//! (`tl.load(group_a_ptrs + g).to(tl.pointer_type(tl.float16))`). rutile has no pointers
//! in memory: a Vulkan storage buffer has no address a kernel could load. So here every
//! problem's A lives in one buffer (`a_ptr`), every B in another and every C in a third,
//! and what the kernel loads is where each problem's matrices start in them
//! (`group_offsets`, in elements). Everything else is the tutorial's: the sizes and
//! leading dimensions read per problem, the walk of `tile_idx` over the problems' tiles
//! by the launch's program count, a block of C per tile. Where the tutorial assumes whole
//! tiles, these mask the edges, so any shapes run.

use crate::{BuildError, Kernel, ScalarType};

/// The meta-parameters of [`grouped_matmul`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GroupedMatmulMeta {
    /// Rows of a problem's C each tile computes (the tutorial's `BLOCK_SIZE_M`): a power
    /// of two, at least 16.
    pub block_m: u32,
    /// Columns of C each tile computes (`BLOCK_SIZE_N`): a power of two, at least 16.
    pub block_n: u32,
    /// Elements of K each step multiplies (`BLOCK_SIZE_K`): a power of two, at least 16.
    pub block_k: u32,
    /// Whether the host promises that every offset in `group_offsets` and every leading
    /// dimension in `g_lds` is a multiple of 8 elements (16 bytes of f16), as the
    /// tutorial's `tl.multiple_of` hints promise, and that every row of A and B, the last
    /// included, spans its whole leading dimension in its buffer (as
    /// [`GroupedMatmulLayout`] lays them out): then the loads read rows up to that padded
    /// width and move 16 bytes at once. The interpreter checks the alignment and every
    /// access's bounds; a compiled kernel trusts them.
    pub aligned: bool,
}

impl GroupedMatmulMeta {
    /// Blocks of `block_m x block_n` with `block_k`-wide steps, the tables `aligned` or not.
    pub fn new((block_m, block_n, block_k): (u32, u32, u32), aligned: bool) -> GroupedMatmulMeta {
        GroupedMatmulMeta {
            block_m,
            block_n,
            block_k,
            aligned,
        }
    }
}

/// The number of elements a leading dimension or offset is a multiple of under
/// [`GroupedMatmulMeta::aligned`].
pub const GROUPED_MATMUL_ALIGN: i32 = 8;

/// `C_g = A_g @ B_g` for every problem `g` of a list, fp16 in and out with an f32
/// accumulator, row-major matrices with leading dimensions given per problem.
///
/// Parameters: `a_ptr`, `b_ptr`, `c_ptr` (f16: every problem's matrices), `group_offsets`
/// (i32, `[group_size, 3]`: where problem `g`'s A, B and C start, in elements),
/// `group_gemm_sizes` (i32, `[group_size, 3]`: its `M`, `N`, `K`), `g_lds` (i32,
/// `[group_size, 3]`: the leading dimensions of its A, B and C), `group_size` (i32). Any
/// grid along axis 0: program `p` computes tiles `p`, `p + num_programs`, ... of the
/// problems' tiles counted one problem after another (the tutorial launches as many
/// programs as the GPU has multiprocessors).
pub fn grouped_matmul(meta: &GroupedMatmulMeta) -> Result<Kernel, BuildError> {
    let (bm, bn, bk) = (meta.block_m as i32, meta.block_n as i32, meta.block_k as i32);
    let (block_m, block_n) = (meta.block_m, meta.block_n);
    Kernel::build("grouped_matmul_kernel", |k| {
        let a_ptr = k.arg_ptr("a_ptr", ScalarType::F16);
        let b_ptr = k.arg_ptr("b_ptr", ScalarType::F16);
        let c_ptr = k.arg_ptr("c_ptr", ScalarType::F16);
        let offsets = k.arg_ptr("group_offsets", ScalarType::I32);
        let sizes = k.arg_ptr("group_gemm_sizes", ScalarType::I32);
        let lds = k.arg_ptr("g_lds", ScalarType::I32);
        let group_size = k.arg_i32("group_size");
        // A value loaded from the problem table, promised aligned where the host says so.
        let aligned = |v| {
            if meta.aligned {
                k.multiple_of(v, GROUPED_MATMUL_ALIGN)
            } else {
                v
            }
        };
        let num_programs = k.num_programs(0);
        let first_tile = k.program_id(0);
        let no_tiles_before = k.scalar(0, ScalarType::I32);
        k.for_range(0, group_size, 1, &[first_tile, no_tiles_before], |g, carried| {
            let (tile_idx, last_problem_end) = (carried[0], carried[1]);
            let row = g * 3;
            let (gm, gn, gk) = (k.load(sizes + row), k.load(sizes + row + 1), k.load(sizes + row + 2));
            let num_n_tiles = k.cdiv(gn, bn);
            let num_tiles = k.cdiv(gm, bm) * num_n_tiles;
            let problem_end = last_problem_end + num_tiles;
            let walked = k.while_loop(
                &[tile_idx],
                |c| c[0].ge(last_problem_end) & c[0].lt(problem_end),
                |c| {
                    let tile_idx = c[0];
                    // The problem's leading dimensions and starts, loaded for each tile as
                    // the tutorial does: six cached scalar loads outside the K loop, where
                    // loaded once a problem they would be live across the walk (`ptxas`
                    // 12.9 then gave each configuration two more registers).
                    let (lda, ldb, ldc) = (
                        aligned(k.load(lds + row)),
                        aligned(k.load(lds + row + 1)),
                        aligned(k.load(lds + row + 2)),
                    );
                    let a_start = aligned(k.load(offsets + row));
                    let b_start = aligned(k.load(offsets + row + 1));
                    let c_start = aligned(k.load(offsets + row + 2));
                    let tile_in_gemm = tile_idx - last_problem_end;
                    let (tile_m, tile_n) = (tile_in_gemm / num_n_tiles, tile_in_gemm % num_n_tiles);

                    // Rows past the edge wrap for the loads (as the matmul tutorial's do)
                    // and are masked at the store; the K tail loads zeros.
                    let offs_am = (tile_m * bm + k.arange(0, bm)) % gm;
                    let offs_k = k.arange(0, bk);
                    let a_ptrs = a_ptr + a_start + (offs_am.expand_dims(1) * lda + offs_k.expand_dims(0));
                    let acc = k.zeros(&[block_m, block_n], ScalarType::F32);
                    let steps = k.cdiv(gk, bk);
                    // Aligned, rows of A and B are read up to their width padded to a
                    // multiple of 8 elements, so that every mask holds or fails for runs
                    // of 8 (16 bytes) and the loads stay 16 bytes wide; A's padding is then
                    // zeroed in registers (it may hold anything, and 0 * NaN is NaN), and
                    // B's padded columns only reach C's columns past the edge, which are
                    // not stored. Otherwise columns past the edge wrap too.
                    let padded = meta.aligned.then(|| {
                        let pad = |v| k.cdiv(v, GROUPED_MATMUL_ALIGN) * GROUPED_MATMUL_ALIGN;
                        (pad(gk), pad(gn))
                    });
                    let offs_bn = match padded {
                        Some(_) => tile_n * bn + k.arange(0, bn),
                        None => (tile_n * bn + k.arange(0, bn)) % gn,
                    };
                    let b_ptrs = b_ptr + b_start + (offs_k.expand_dims(1) * ldb + offs_bn.expand_dims(0));
                    let b_in_n = padded.map(|(_, n_padded)| offs_bn.expand_dims(0).lt(n_padded));
                    let out = k.for_range(0, steps, 1, &[acc, a_ptrs, b_ptrs], |step, carried| {
                        let (acc, a_ptrs, b_ptrs) = (carried[0], carried[1], carried[2]);
                        let k_left = gk - step * bk;
                        let a_in_k = |end| offs_k.expand_dims(0).lt(end);
                        let (a, b) = match (padded, b_in_n) {
                            (Some((k_padded, _)), Some(b_in_n)) => {
                                let a = k.load_masked(a_ptrs, a_in_k(k_padded - step * bk), 0.0);
                                let a = k.where_(a_in_k(k_left), a, 0.0);
                                (a, k.load_masked(b_ptrs, offs_k.expand_dims(1).lt(k_left) & b_in_n, 0.0))
                            }
                            _ => (
                                k.load_masked(a_ptrs, a_in_k(k_left), 0.0),
                                k.load_masked(b_ptrs, offs_k.expand_dims(1).lt(k_left), 0.0),
                            ),
                        };
                        vec![k.dot_acc(a, b, acc), a_ptrs + bk, b_ptrs + ldb * bk]
                    });
                    let c = out[0].to(ScalarType::F16);

                    let offs_cm = tile_m * bm + k.arange(0, bm);
                    let offs_cn = tile_n * bn + k.arange(0, bn);
                    let c_ptrs = c_ptr + c_start + (offs_cm.expand_dims(1) * ldc + offs_cn.expand_dims(0));
                    let c_mask = offs_cm.expand_dims(1).lt(gm) & offs_cn.expand_dims(0).lt(gn);
                    k.store_masked(c_ptrs, c, c_mask);
                    vec![tile_idx + num_programs]
                },
            );
            vec![walked[0], problem_end]
        });
    })
}

/// Where a list of problems' matrices go in [`grouped_matmul`]'s three buffers, and the
/// tables it reads: each problem's A (`m x k`), B (`k x n`) and C (`m x n`) row-major, one
/// after another in its buffer; under `aligned`, every leading dimension rounded up and
/// every matrix started at a multiple of [`GROUPED_MATMUL_ALIGN`] elements, as
/// [`GroupedMatmulMeta::aligned`] promises.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupedMatmulLayout {
    /// `group_offsets`: per problem, where its A, B and C start (elements).
    pub offsets: Vec<i32>,
    /// `group_gemm_sizes`: per problem, its `M`, `N`, `K`.
    pub sizes: Vec<i32>,
    /// `g_lds`: per problem, the leading dimensions of its A, B and C.
    pub lds: Vec<i32>,
    /// Elements of the A, B and C buffers.
    pub lens: [usize; 3],
}

impl GroupedMatmulLayout {
    /// The layout of `problems`, each `(m, n, k)`; an error when a buffer would pass
    /// `i32::MAX` elements (the kernel's offsets are `i32`).
    pub fn new(problems: &[(usize, usize, usize)], aligned: bool) -> Result<GroupedMatmulLayout, GroupedLayoutError> {
        let align = if aligned { GROUPED_MATMUL_ALIGN as usize } else { 1 };
        let round = |v: usize| v.div_ceil(align) * align;
        let mut layout = GroupedMatmulLayout {
            offsets: Vec::with_capacity(3 * problems.len()),
            sizes: Vec::with_capacity(3 * problems.len()),
            lds: Vec::with_capacity(3 * problems.len()),
            lens: [0; 3],
        };
        let too_large = |what: &'static str| GroupedLayoutError { what };
        for &(m, n, k) in problems {
            // Leading dimensions (row lengths) and rows of A, B and C.
            let shapes = [(round(k), m), (round(n), k), (round(n), m)];
            for (i, (ld, rows)) in shapes.into_iter().enumerate() {
                let start = round(layout.lens[i]);
                layout.offsets.push(start as i32);
                layout.lds.push(ld as i32);
                layout.lens[i] = start + ld * rows;
                if layout.lens[i] > i32::MAX as usize {
                    return Err(too_large(["A matrices", "B matrices", "C matrices"][i]));
                }
            }
            for v in [m, n, k] {
                layout.sizes.push(i32::try_from(v).map_err(|_| too_large("sizes"))?);
            }
        }
        Ok(layout)
    }

    /// The number of tiles of `meta`'s blocks over every problem: the grid that gives each
    /// tile its own program.
    pub fn tiles(&self, meta: &GroupedMatmulMeta) -> u32 {
        self.sizes
            .chunks(3)
            .map(|s| (s[0] as u32).div_ceil(meta.block_m) * (s[1] as u32).div_ceil(meta.block_n))
            .sum()
    }
}

/// Problems too large for [`grouped_matmul`]'s `i32` offsets.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("grouped_matmul: the problems' {what} take more than i32::MAX elements (its offsets are i32)")]
pub struct GroupedLayoutError {
    /// What overflowed: the A, B or C matrices, or the sizes.
    pub what: &'static str,
}

use crate::{BuildError, Kernel, ScalarType};

/// Programs along x and y (and one along z) for [`transpose`] of an `m x n` input in
/// `block_m x block_n` tiles: `[cdiv(m, block_m), cdiv(n, block_n), 1]`.
pub fn transpose_grid(m: u32, n: u32, block_m: u32, block_n: u32) -> [u32; 3] {
    [m.div_ceil(block_m), n.div_ceil(block_n), 1]
}

/// `out = x^T` for `x` (`m x n`, row-major with row stride `stride_xm`) into `out` (`n x m`,
/// row-major with row stride `stride_om`), one `block_m x block_n` tile per program, as a
/// Triton user writes it: program `(pid_m, pid_n)` loads the tile `x[rm, rn]` and stores it
/// to `out[rn, rm]`, both masked by `rm < m & rn < n`. The tile is never transposed
/// explicitly (no `trans`): the store's pointers are `out + rn[None, :] * stride_om +
/// rm[:, None]`, contiguous along axis 0 of the tile, where the load's are contiguous
/// along axis 1.
///
/// Not one of the tutorials: it is in the seeds as the plain kernel whose load and store
/// are contiguous along different axes, which a lowering must coalesce both ways (through
/// shared memory) to approach the copy ceiling. The GPU tests and the benchmark use it.
///
/// Parameters: `x, out` (pointers to `elem`), `m, n, stride_xm, stride_om` (i32).
/// Grid: [`transpose_grid`].
pub fn transpose(elem: ScalarType, block_m: u32, block_n: u32) -> Result<Kernel, BuildError> {
    let (bm, bn) = (block_m as i32, block_n as i32);
    Kernel::build("transpose_kernel", |k| {
        let x = k.arg_ptr("x", elem);
        let out = k.arg_ptr("out", elem);
        let (m, n) = (k.arg_i32("m"), k.arg_i32("n"));
        let stride_xm = k.arg_i32("stride_xm");
        let stride_om = k.arg_i32("stride_om");

        let (pid_m, pid_n) = (k.program_id(0), k.program_id(1));
        let rm = pid_m * bm + k.arange(0, bm);
        let rn = pid_n * bn + k.arange(0, bn);
        let mask = rm.expand_dims(1).lt(m) & rn.expand_dims(0).lt(n);
        let tile = k.load_masked(x + (rm.expand_dims(1) * stride_xm + rn.expand_dims(0)), mask, 0);
        k.store_masked(out + (rn.expand_dims(0) * stride_om + rm.expand_dims(1)), tile, mask);
    })
}

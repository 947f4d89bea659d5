use crate::{BuildError, Kernel, ScalarType::F32};

/// The smallest power of two at least `n_cols` (the block that holds one row).
pub fn softmax_block(n_cols: u32) -> u32 {
    n_cols.max(1).next_power_of_two()
}

/// The tutorial's heuristic for the number of warps of one row's program.
pub fn softmax_num_warps(block: u32) -> u32 {
    match block {
        b if b >= 4096 => 16,
        b if b >= 2048 => 8,
        _ => 4,
    }
}

/// Row-wise softmax of an `n_rows x n_cols` f32 matrix, one row per program, as the fused
/// softmax tutorial. Parameters: `output_ptr, input_ptr` (pointers), `input_row_stride,
/// output_row_stride, n_rows, n_cols` (i32). `block` is at least `n_cols`. Grid: `n_rows`.
pub fn softmax(block: u32) -> Result<Kernel, BuildError> {
    Kernel::build("softmax_kernel", |k| {
        let out = k.arg_ptr("output_ptr", F32);
        let inp = k.arg_ptr("input_ptr", F32);
        let in_stride = k.arg_i32("input_row_stride");
        let out_stride = k.arg_i32("output_row_stride");
        let _n_rows = k.arg_i32("n_rows");
        let n_cols = k.arg_i32("n_cols");
        let row = k.program_id(0);
        let cols = k.arange(0, block as i32);
        let mask = cols.lt(n_cols);
        let x = k.load_masked(inp + row * in_stride + cols, mask, f32::NEG_INFINITY);
        let z = x - x.max(0);
        let num = z.exp();
        let y = num / num.sum(0);
        k.store_masked(out + row * out_stride + cols, y, mask);
    })
}

/// The persistent form: each program loops over rows `pid, pid + num_programs, ...`, as
/// the persistent softmax tutorial (launch `NUM_SM x occupancy` programs). Same parameters
/// as [`softmax`].
pub fn softmax_persistent(block: u32) -> Result<Kernel, BuildError> {
    Kernel::build("softmax_kernel_persistent", |k| {
        let out = k.arg_ptr("output_ptr", F32);
        let inp = k.arg_ptr("input_ptr", F32);
        let in_stride = k.arg_i32("input_row_stride");
        let out_stride = k.arg_i32("output_row_stride");
        let n_rows = k.arg_i32("n_rows");
        let n_cols = k.arg_i32("n_cols");
        let row_start = k.program_id(0);
        let row_step = k.num_programs(0);
        k.for_each(row_start, n_rows, row_step, |row| {
            let cols = k.arange(0, block as i32);
            let mask = cols.lt(n_cols);
            let row_ptr = inp + row * in_stride;
            let x = k.load_masked(row_ptr + cols, mask, f32::NEG_INFINITY);
            let z = x - x.max(0);
            let num = z.exp();
            let y = num / num.sum(0);
            k.store_masked(out + row * out_stride + cols, y, mask);
        });
    })
}

//! The softmax the fused-softmax tutorial measures its kernel against: `naive_softmax`,
//! torch's unfused operations, one kernel each, every intermediate going through memory:
//!
//! ```text
//! x_max = x.max(dim=1)[0]                  # row_max:  reads MN, writes M
//! z = x - x_max[:, None]                   # subtract: reads MN + M, writes MN
//! numerator = torch.exp(z)                 # exp:      reads MN, writes MN
//! denominator = numerator.sum(dim=1)       # row_sum:  reads MN, writes M
//! ret = numerator / denominator[:, None]   # divide:   reads MN + M, writes MN
//! ```
//!
//! 5MN + 2M elements read and 3MN + 2M written, where the fused kernel reads MN and writes
//! MN: the tutorial's argument for fusing. Written with rutile so that both sides of the
//! comparison run through the same compiler and device. The reductions hold one row per
//! program (as the fused kernel, with its `num_warps` heuristic); the element-wise kernels
//! run over the flat matrix, as torch's do.

use crate::{BuildError, Kernel, ScalarType::F32};

/// Elements each program of the element-wise kernels handles.
pub const NAIVE_SOFTMAX_ELEMENTWISE_BLOCK: u32 = 1024;

/// A reduction of each row to one value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RowReduction {
    Max,
    Sum,
}

/// An element-wise operation of each element with its row's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RowBroadcast {
    /// `x - row[r]`.
    Subtract,
    /// `x / row[r]`, correctly rounded.
    Divide,
}

/// The five kernels of the naive softmax of rows of `n_cols` columns, in the order they
/// run. Launch arguments and grids: [`NaiveSoftmax::row_max`] and
/// [`NaiveSoftmax::row_sum`] take `out, input, input_row_stride, n_cols` with one program
/// per row; [`NaiveSoftmax::subtract`] and [`NaiveSoftmax::divide`] take `out, input,
/// row_values, n_cols, n_elements`, and [`NaiveSoftmax::exp`] `out, input, n_elements`,
/// with [`naive_softmax_elementwise_grid`] programs. The element-wise kernels need
/// contiguous rows.
#[derive(Clone, Debug)]
pub struct NaiveSoftmax {
    /// `x_max = x.max(dim=1)`: each row's maximum, one program per row.
    pub row_max: Kernel,
    /// `z = x - x_max[:, None]`, over the flat matrix.
    pub subtract: Kernel,
    /// `numerator = exp(z)`, over the flat matrix.
    pub exp: Kernel,
    /// `denominator = numerator.sum(dim=1)`: each row's sum, one program per row.
    pub row_sum: Kernel,
    /// `numerator / denominator[:, None]`, correctly rounded, over the flat matrix.
    pub divide: Kernel,
    /// The block of the row reductions: the smallest power of two at least `n_cols`.
    pub row_block: u32,
}

impl NaiveSoftmax {
    /// The kernels for rows of `n_cols` columns.
    pub fn new(n_cols: u32) -> Result<NaiveSoftmax, BuildError> {
        let row_block = super::softmax_block(n_cols);
        let block = NAIVE_SOFTMAX_ELEMENTWISE_BLOCK;
        Ok(NaiveSoftmax {
            row_max: row_reduce(RowReduction::Max, row_block)?,
            subtract: row_broadcast(RowBroadcast::Subtract, block)?,
            exp: exp(block)?,
            row_sum: row_reduce(RowReduction::Sum, row_block)?,
            divide: row_broadcast(RowBroadcast::Divide, block)?,
            row_block,
        })
    }
}

/// The programs of an element-wise kernel of [`NaiveSoftmax`] over `n_elements`.
pub fn naive_softmax_elementwise_grid(n_elements: u32) -> u32 {
    n_elements.div_ceil(NAIVE_SOFTMAX_ELEMENTWISE_BLOCK)
}

/// `out[r] = op(input[r, 0..n_cols])`, one row per program; `block` is at least `n_cols`.
/// Parameters: `out_ptr, input_ptr` (f32 pointers), `input_row_stride, n_cols` (i32).
fn row_reduce(op: RowReduction, block: u32) -> Result<Kernel, BuildError> {
    let name = match op {
        RowReduction::Max => "naive_softmax_row_max",
        RowReduction::Sum => "naive_softmax_row_sum",
    };
    Kernel::build(name, |k| {
        let out = k.arg_ptr("out_ptr", F32);
        let inp = k.arg_ptr("input_ptr", F32);
        let in_stride = k.arg_i32("input_row_stride");
        let n_cols = k.arg_i32("n_cols");
        let row = k.program_id(0);
        let cols = k.arange(0, block as i32);
        let mask = cols.lt(n_cols);
        // The identity of each reduction fills the lanes past the row.
        let row_values = match op {
            RowReduction::Max => k
                .load_masked(inp + row * in_stride + cols, mask, f32::NEG_INFINITY)
                .max(0),
            RowReduction::Sum => k.load_masked(inp + row * in_stride + cols, mask, 0.0f32).sum(0),
        };
        k.store(out + row, row_values);
    })
}

/// `out[i] = op(input[i], row_values[i / n_cols])` over `n_elements` of a contiguous
/// matrix, `block` elements per program. Parameters: `out_ptr, input_ptr, row_ptr` (f32
/// pointers), `n_cols, n_elements` (i32).
fn row_broadcast(op: RowBroadcast, block: u32) -> Result<Kernel, BuildError> {
    let name = match op {
        RowBroadcast::Subtract => "naive_softmax_subtract",
        RowBroadcast::Divide => "naive_softmax_divide",
    };
    Kernel::build(name, |k| {
        let out = k.arg_ptr("out_ptr", F32);
        let inp = k.arg_ptr("input_ptr", F32);
        let rows = k.arg_ptr("row_ptr", F32);
        let n_cols = k.arg_i32("n_cols");
        let n = k.arg_i32("n_elements");
        let offsets = k.program_id(0) * block + k.arange(0, block as i32);
        let mask = offsets.lt(n);
        let x = k.load_masked(inp + offsets, mask, 0.0f32);
        // Lanes past the end read row 0's value (never stored): a masked load needs a
        // value there, and 1 keeps the division of those lanes finite.
        let r = k.load_masked(rows + offsets / n_cols, mask, 1.0f32);
        let y = match op {
            RowBroadcast::Subtract => x - r,
            RowBroadcast::Divide => x.fdiv(r, true),
        };
        k.store_masked(out + offsets, y, mask);
    })
}

/// `out[i] = exp(input[i])` over `n_elements`, `block` elements per program. Parameters:
/// `out_ptr, input_ptr` (f32 pointers), `n_elements` (i32).
fn exp(block: u32) -> Result<Kernel, BuildError> {
    Kernel::build("naive_softmax_exp", |k| {
        let out = k.arg_ptr("out_ptr", F32);
        let inp = k.arg_ptr("input_ptr", F32);
        let n = k.arg_i32("n_elements");
        let offsets = k.program_id(0) * block + k.arange(0, block as i32);
        let mask = offsets.lt(n);
        k.store_masked(out + offsets, k.load_masked(inp + offsets, mask, 0.0f32).exp(), mask);
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::{self, ArgValue, HostBuffer};
    use crate::testing::Rng;

    fn ptr(buffer: usize) -> ArgValue {
        ArgValue::Ptr { buffer, offset: 0 }
    }

    /// The five kernels in the interpreter, as a device would run them; buffers: x, the
    /// row values, two matrices of intermediates.
    fn naive(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
        let s = NaiveSoftmax::new(cols as u32).unwrap();
        let n = rows * cols;
        let (x_buf, row_buf, a, b) = (0, 1, 2, 3);
        let mut buffers = [
            HostBuffer::from_slice(x),
            HostBuffer::zeros(F32, rows),
            HostBuffer::zeros(F32, n),
            HostBuffer::zeros(F32, n),
        ];
        let (c, ne) = (ArgValue::Int(cols as i64), ArgValue::Int(n as i64));
        let row_grid = [rows as u32, 1, 1];
        let flat_grid = [naive_softmax_elementwise_grid(n as u32), 1, 1];
        let mut run = |kernel: &Kernel, grid, args: &[ArgValue]| interp::run(kernel, grid, args, &mut buffers).unwrap();
        run(&s.row_max, row_grid, &[ptr(row_buf), ptr(x_buf), c, c]);
        run(&s.subtract, flat_grid, &[ptr(a), ptr(x_buf), ptr(row_buf), c, ne]);
        run(&s.exp, flat_grid, &[ptr(b), ptr(a), ne]);
        run(&s.row_sum, row_grid, &[ptr(row_buf), ptr(b), c, c]);
        run(&s.divide, flat_grid, &[ptr(a), ptr(b), ptr(row_buf), c, ne]);
        buffers[a].to_vec().unwrap()
    }

    fn fused(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
        let kernel = super::super::softmax(super::super::softmax_block(cols as u32)).unwrap();
        let c = ArgValue::Int(cols as i64);
        let mut buffers = [HostBuffer::zeros(F32, rows * cols), HostBuffer::from_slice(x)];
        let args = [ptr(0), ptr(1), c, c, ArgValue::Int(rows as i64), c];
        interp::run(&kernel, [rows as u32, 1, 1], &args, &mut buffers).unwrap();
        buffers[0].to_vec().unwrap()
    }

    /// Ragged sizes: rows narrower than their block, and matrices that end inside an
    /// element-wise program.
    #[test]
    fn naive_softmax_matches_the_fused_one() {
        for (i, (rows, cols)) in [(1, 1), (3, 5), (37, 781), (64, 1024), (5, 1500)]
            .into_iter()
            .enumerate()
        {
            let mut rng = Rng::new(0x5eed + i as u64);
            // Wide enough a spread that the max subtraction matters (exp(40) alone is 2e17).
            let x = rng.f32s(rows * cols, -40.0, 40.0);
            let (got, want) = (naive(&x, rows, cols), fused(&x, rows, cols));
            assert_eq!(got.len(), want.len());
            for (j, (g, w)) in got.iter().zip(&want).enumerate() {
                // The same operations in the same order as the fused kernel; the sums may
                // still round differently where the reductions combine in another order.
                let tolerance = 1e-6 * w.abs() + 1e-30;
                assert!(
                    (g - w).abs() <= tolerance && g.is_finite(),
                    "{rows}x{cols}: element {j} (row {}): naive {g}, fused {w}",
                    j / cols
                );
            }
            let row_sums: Vec<f32> = got.chunks(cols).map(|r| r.iter().sum()).collect();
            assert!(
                row_sums.iter().all(|s| (s - 1.0).abs() < 1e-5),
                "{rows}x{cols}: rows sum to {row_sums:?}"
            );
        }
    }
}

use crate::{BuildError, Kernel, ScalarType};

/// `z = x + y` over `n` elements of `dtype`, `block` elements per program, as the vector
/// add tutorial. Parameters: `x, y, z` (pointers), `n` (i32). Grid: `cdiv(n, block)`.
pub fn vector_add(dtype: ScalarType, block: u32) -> Result<Kernel, BuildError> {
    Kernel::build("add_kernel", |k| {
        let x = k.arg_ptr("x_ptr", dtype);
        let y = k.arg_ptr("y_ptr", dtype);
        let z = k.arg_ptr("output_ptr", dtype);
        let n = k.arg_i32("n_elements");
        let pid = k.program_id(0);
        let offsets = pid * block + k.arange(0, block as i32);
        let mask = offsets.lt(n);
        let xs = k.load_masked(x + offsets, mask, 0);
        let ys = k.load_masked(y + offsets, mask, 0);
        k.store_masked(z + offsets, xs + ys, mask);
    })
}

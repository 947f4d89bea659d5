//! What the tests of the f64 functions share: an element-wise kernel of one f64 operand
//! run in the interpreter, and errors in ulps.

#![allow(dead_code)] // each test file uses its own part

use rutile_ir::interp::{self, ArgValue, HostBuffer};
use rutile_ir::ScalarType::F64;
use rutile_ir::{Kernel, Value};

pub const BLOCK: i32 = 256;
pub type Unary = for<'b> fn(Value<'b>) -> Value<'b>;

pub fn kernel(f: Unary) -> Kernel {
    Kernel::build("f64_function", |k| {
        let (px, out) = (k.arg_ptr("x", F64), k.arg_ptr("out", F64));
        let n = k.arg_i32("n");
        let offs = k.program_id(0) * BLOCK + k.arange(0, BLOCK);
        let mask = offs.lt(n);
        k.store_masked(out + offs, f(k.load_masked(px + offs, mask, 0.0)), mask);
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

pub fn launch(x: &[f64]) -> (Vec<ArgValue>, Vec<HostBuffer>, [u32; 3]) {
    let ptr = |buffer| ArgValue::Ptr { buffer, offset: 0 };
    let args = vec![ptr(0), ptr(1), ArgValue::Int(x.len() as i64)];
    let bufs = vec![HostBuffer::from_slice(x), HostBuffer::zeros(F64, x.len())];
    (args, bufs, [(x.len() as u32).div_ceil(BLOCK as u32), 1, 1])
}

pub fn apply(f: Unary, x: &[f64]) -> Vec<f64> {
    let (args, mut bufs, grid) = launch(x);
    interp::run(&kernel(f), grid, &args, &mut bufs).unwrap();
    bufs[1].to_vec::<f64>().unwrap()
}

/// The spacing of f64 at `v` (at least the smallest normal's).
pub fn ulp(v: f64) -> f64 {
    let w = v.abs().max(f64::MIN_POSITIVE);
    f64::from_bits(w.to_bits() + 1) - w
}

/// `|got - want|` in ulps of `want` (at least the smallest normal's).
pub fn ulps(got: f64, want: f64) -> f64 {
    if got.is_nan() && want.is_nan() || got == want {
        return 0.0;
    }
    // A NaN where a number is due (a comparison with NaN would let it pass), or an
    // infinity where a finite value is.
    if got.is_nan() || want.is_nan() || got.is_infinite() || want.is_infinite() {
        return f64::INFINITY;
    }
    (got - want).abs() / ulp(want)
}

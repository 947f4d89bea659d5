//! `dot`: `a @ b + acc` for `[M, K]` and `[K, N]` blocks into an `[M, N]` accumulator.
//!
//! - f16/bf16 inputs: products are exact in f32 and accumulate in f32, one rounding per step
//!   (`acc += a * b`, k ascending), as tensor cores do up to their internal order.
//! - f32 inputs: accumulate in f32 with a fused multiply-add per step, as a GPU's FMA loop.
//!   With [`DotPrecision::Tf32`] each operand is first rounded to tf32 (`round_to_tf32`, as
//!   PTX's `cvt.rna.tf32.f32`); products of tf32 values are then exact in f32, so this loop
//!   differs from what the tensor cores compute only in the sums: the device
//!   (`mma.sync.m16n8k8`) adds each step's 8 products to the accumulator in an order and
//!   with a rounding of its own (not to nearest: the differences grow with `K` as a bias
//!   does). Each side rounds at most once per `k` into f32, by at most one f32 unit, so they
//!   differ by at most about `K · 2^-23 · Σ_k |a_ik b_kj|` (measured on an H100 with inputs
//!   in [-1, 1]: 1e-5 relative in the Frobenius norm at K = 4096, 1.3e-6 at K = 512).
//!   Against the product of the unrounded operands, the rounding adds up to about
//!   `2^-10 · Σ_k |a_ik b_kj|` (each operand within 2^-11 relative; measured 2.6e-4 in the
//!   Frobenius norm). Where the tensor cores do not take the `dot`, the lowering rounds the
//!   operands alike and runs this loop's `fma`s in its order: these results bit for bit.
//! - f64 inputs, or an f64 accumulator: fused multiply-adds in f64.
//! - Integer inputs (say i8 into i32): exact products, wrapping sums in the accumulator type.
//!
//! The result (of the accumulator's type) is rounded once from the accumulation precision
//! (which only matters for an f16/bf16 accumulator). Loops run i-k-j so that the inner loop
//! streams rows of `b` and the accumulator, which the compiler vectorizes.

use super::error::{invalid, Fault};
use super::tensor::{round_floats, wrap_ints, Data, Tensor};
use crate::ir::{round_to_tf32, DotPrecision};
use crate::types::{ScalarType, Type};

pub(crate) fn dot(a: &Tensor, b: &Tensor, acc: &Tensor, precision: DotPrecision, ty: Type) -> Result<Tensor, Fault> {
    let (ad, bd, cd) = (a.ty.shape.dims(), b.ty.shape.dims(), acc.ty.shape.dims());
    if ad.len() != 2 || bd.len() != 2 || cd.len() != 2 || ad[1] != bd[0] || cd != [ad[0], bd[1]] {
        return Err(invalid!(
            "dot of {} and {} into {}: shapes must be [M, K], [K, N], [M, N]",
            a.ty,
            b.ty,
            acc.ty
        ));
    }
    if ty != acc.ty {
        return Err(invalid!("dot into {} cannot give {ty}", acc.ty));
    }
    let (sa, sb, sc) = (a.scalar_type("dot")?, b.scalar_type("dot")?, acc.scalar_type("dot")?);
    if sa != sb && !(sa.is_fp8() && sb.is_fp8()) {
        return Err(invalid!(
            "dot operands must have one element type (or be fp8 both), got {sa} and {sb}"
        ));
    }
    if let Some(name) = precision.name().filter(|_| sa != ScalarType::F32) {
        return Err(invalid!("dot with input precision {name} of {sa} operands (f32 only)"));
    }
    let (m, k, n) = (ad[0] as usize, ad[1] as usize, bd[1] as usize);
    let data = match (&a.data, &b.data, &acc.data) {
        (Data::Float(x), Data::Float(y), Data::Float(c)) => {
            let mut out = if sa == ScalarType::F64 || sc == ScalarType::F64 {
                let mut c = c.clone();
                mm(m, k, n, x, y, &mut c, axpy_fma_f64);
                c
            } else {
                let round = |v: f64| match precision {
                    // (tf32x3's three products are within 2^-21 of these; see `DotPrecision`.)
                    DotPrecision::Ieee | DotPrecision::Tf32x3 => v as f32,
                    DotPrecision::Tf32 => round_to_tf32(v as f32),
                };
                let x: Vec<f32> = x.iter().map(|&v| round(v)).collect();
                let y: Vec<f32> = y.iter().map(|&v| round(v)).collect();
                let mut c32: Vec<f32> = c.iter().map(|&v| v as f32).collect();
                if sa == ScalarType::F32 {
                    mm(m, k, n, &x, &y, &mut c32, axpy_fma_f32);
                } else {
                    mm(m, k, n, &x, &y, &mut c32, axpy_f32);
                }
                c32.into_iter().map(f64::from).collect()
            };
            round_floats(sc, &mut out);
            Data::Float(out)
        }
        (Data::Int(x), Data::Int(y), Data::Int(c)) => {
            let mut c = c.clone();
            mm(m, k, n, x, y, &mut c, |c, a, b| {
                c.iter_mut()
                    .zip(b)
                    .for_each(|(c, &b)| *c = c.wrapping_add(a.wrapping_mul(b)))
            });
            wrap_ints(sc, &mut c);
            Data::Int(c)
        }
        _ => return Err(invalid!("dot of {sa} into {sc} is not supported")),
    };
    Ok(Tensor { ty, data })
}

/// `c += a @ b`, i-k-j, with `axpy(c_row, a_ik, b_row)` as the inner loop.
#[inline]
fn mm<T: Copy>(m: usize, k: usize, n: usize, a: &[T], b: &[T], c: &mut [T], axpy: impl Fn(&mut [T], T, &[T])) {
    for i in 0..m {
        let c_row = &mut c[i * n..(i + 1) * n];
        for kk in 0..k {
            axpy(c_row, a[i * k + kk], &b[kk * n..(kk + 1) * n]);
        }
    }
}

/// `c += a * b`, rounding the product and then the sum (the product of f16s or bf16s is
/// exact in f32, so this is also the fused result for them).
fn axpy_f32(c: &mut [f32], a: f32, b: &[f32]) {
    c.iter_mut().zip(b).for_each(|(c, &b)| *c += a * b);
}

/// `c = fma(a, b, c)` in f32.
fn axpy_fma_f32(c: &mut [f32], a: f32, b: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU supports FMA, checked just above.
        return unsafe { axpy_fma_f32_hw(c, a, b) };
    }
    c.iter_mut().zip(b).for_each(|(c, &b)| *c = a.mul_add(b, *c));
}

/// `c = fma(a, b, c)` in f64.
fn axpy_fma_f64(c: &mut [f64], a: f64, b: &[f64]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU supports FMA, checked just above.
        return unsafe { axpy_fma_f64_hw(c, a, b) };
    }
    c.iter_mut().zip(b).for_each(|(c, &b)| *c = a.mul_add(b, *c));
}

// With the FMA feature enabled, `mul_add` compiles to vector FMA instructions instead of a
// call to the C library's `fmaf` per element; the results are identical.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
fn axpy_fma_f32_hw(c: &mut [f32], a: f32, b: &[f32]) {
    c.iter_mut().zip(b).for_each(|(c, &b)| *c = a.mul_add(b, *c));
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
fn axpy_fma_f64_hw(c: &mut [f64], a: f64, b: &[f64]) {
    c.iter_mut().zip(b).for_each(|(c, &b)| *c = a.mul_add(b, *c));
}

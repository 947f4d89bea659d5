//! Cases of the directed-rounding arithmetic (libdevice's `add_rd`, `div_ru`, `sqrt_rz`,
//! `fma_rn`, ...) and conversions (`double2float_rd`, `ll2float_ru`, `float2int_rz`, ...,
//! and f32 and f64 to f16 and bf16, Triton's `fp_downcast_rounding`):
//! every op in every direction on f32 and f64, bit for bit against the
//! interpreter, which rounds the exact result in integers. Every third second operand is
//! the first or its negation, so that sums cancel to exact zeros (whose sign the direction
//! picks) and quotients are exactly one.

use super::*;
use rutile::{RoundedOp, Rounding};

/// The directed-rounding cases, with the known mismatches marked (none are).
pub fn rounded_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for op in RoundedOp::ALL {
        for rounding in Rounding::ALL {
            for t in [F32, F64] {
                let ins = vec![(t, Domain::General); op.arity()];
                let mut cs = elementwise_cases(op.name(rounding), &ins, t, Rule::Exact, move |k, x| {
                    let args: Vec<_> = x.iter().map(|&v| v.into()).collect();
                    k.rounded(op, rounding, &args)
                });
                for c in &mut cs {
                    if c.bufs.len() < 2 {
                        continue;
                    }
                    let x = c.bufs[0].init.clone();
                    for (i, y) in c.bufs[1].init.iter_mut().enumerate() {
                        if i % 3 == 0 {
                            *y = if i % 2 == 0 { x[i] } else { V::F(-x[i].f()) };
                        }
                    }
                }
                cases.extend(cs);
            }
        }
    }
    // Conversions in a direction: the inexact ones (one op each) and float to integer
    // (rounded to an integral value first).
    let conversions = [
        (I32, F32),
        (U32, F32),
        (I64, F32),
        (U64, F32),
        (F64, F32),
        (I64, F64),
        (U64, F64),
        (F32, I32),
        (F64, I64),
        (F32, U32),
        // Triton's `fp_downcast_rounding`.
        (F32, F16),
        (F32, BF16),
        (F64, F16),
        (F64, BF16),
    ];
    for (from, to) in conversions {
        for rounding in Rounding::ALL {
            let op = format!("{}->{}", RoundedOp::Convert.name(rounding), to.name());
            let mut cs = elementwise_cases(&op, &[(from, Domain::General)], to, Rule::Exact, move |_, x| {
                x[0].to_rounded(to, rounding)
            });
            for c in &mut cs {
                c.dtype = from;
            }
            cases.extend(cs);
        }
    }
    cases
}

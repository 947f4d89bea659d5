//! Cases of the directed-rounding arithmetic (libdevice's `add_rd`, `div_ru`, `sqrt_rz`,
//! `fma_rn`, ...): every op in every direction on f32 and f64, bit for bit against the
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
    cases
}

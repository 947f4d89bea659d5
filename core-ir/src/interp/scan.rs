//! Scans and reductions with a combine region, `gather`, `sort` and `histogram`: the exact
//! semantics the devices are tested against.
//!
//! A scan or reduction runs its combine region once per step on scalars, in order along
//! the axis (a left fold), as [`crate::ir::Op::Scan`] defines it. `sort` runs the same
//! bitonic network as the lowering, so that every device agrees with it element for
//! element, NaNs included.

use super::error::{invalid, Fault, FaultKind, InterpError};
use super::eval::Program;
use super::tensor::{Data, Tensor};
use crate::ir::{Inst, Op, Region, ValueId};
use crate::types::{Shape, Type};
use std::rc::Rc;

/// A block's shape split around `axis`: `(outer, n, inner)`, row-major.
fn around(shape: Shape, axis: usize) -> (usize, usize, usize) {
    let dims = shape.dims();
    let outer = dims[..axis].iter().map(|&d| d as usize).product();
    let inner = dims[axis + 1..].iter().map(|&d| d as usize).product();
    (outer, dims[axis] as usize, inner)
}

/// The single element `i` of `t`, as a scalar.
fn element(t: &Tensor, i: usize) -> Rc<Tensor> {
    Rc::new(Tensor {
        ty: Type::scalar(t.ty.scalar_type().expect("numbers, checked by the typing")),
        data: t.data.gather(&[i]),
    })
}

/// Writes scalar `v` into element `i` of `data`.
fn put(data: &mut Data, i: usize, v: &Tensor) {
    match (data, &v.data) {
        (Data::Int(d), Data::Int(s)) => d[i] = s[0],
        (Data::Float(d), Data::Float(s)) => d[i] = s[0],
        (Data::Bool(d), Data::Bool(s)) => d[i] = s[0],
        (Data::Ptr(d), Data::Ptr(s)) => d[i] = s[0],
        _ => unreachable!("the combine yields the operands' types (verified)"),
    }
}

impl<'a> Program<'a> {
    /// The combine region of an op with one (`scan`, `reduce`, `cluster_reduce_n`) over the
    /// tuple `values`, and their values.
    pub(super) fn combine_inputs(
        &self,
        inst: &'a Inst,
        values: &[ValueId],
    ) -> Result<(&'a Region, Vec<Rc<Tensor>>), InterpError> {
        let Some(region) = inst.regions.first().filter(|r| r.args.len() == 2 * values.len()) else {
            return Err(self.fault_at(
                inst,
                invalid!("needs one combine region with {} arguments", 2 * values.len()),
            ));
        };
        let inputs = values
            .iter()
            .map(|&v| self.value(v))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|f| self.fault_at(inst, f))?;
        Ok((region, inputs))
    }

    /// `scan` and `reduce` with a combine region.
    pub(super) fn exec_combine(&mut self, inst: &'a Inst) -> Result<(), InterpError> {
        let (values, axis, reverse, keep_axis) = match &inst.op {
            Op::Scan { values, axis, reverse } => (values, *axis as usize, *reverse, true),
            Op::ReduceCombine { values, axis } => (values, *axis as usize, false, false),
            _ => return Err(self.fault_at(inst, invalid!("not a scan or reduction"))),
        };
        let (region, inputs) = self.combine_inputs(inst, values)?;
        let shape = inputs[0].ty.shape;
        if axis >= shape.rank() || inputs.iter().any(|t| t.ty.shape != shape) {
            return Err(self.fault_at(inst, invalid!("operands of shape {shape} along axis {axis}")));
        }
        let (outer, n, inner) = around(shape, axis);
        let mut outs: Vec<Tensor> = inputs.iter().map(|t| (**t).clone()).collect();
        let mut reduced: Vec<Vec<Rc<Tensor>>> = vec![Vec::with_capacity(outer * inner); values.len()];
        for o in 0..outer {
            for i in 0..inner {
                let at = |k: usize| o * n * inner + k * inner + i;
                let order: Vec<usize> = if reverse {
                    (0..n).rev().collect()
                } else {
                    (0..n).collect()
                };
                let mut acc: Vec<Rc<Tensor>> = inputs.iter().map(|t| element(t, at(order[0]))).collect();
                for &k in &order[1..] {
                    let mut args = acc.clone();
                    args.extend(inputs.iter().map(|t| element(t, at(k))));
                    self.bind_args(&region.args, args).map_err(|f| self.fault_at(inst, f))?;
                    acc = self.run_body(region)?;
                    if keep_axis {
                        for (out, a) in outs.iter_mut().zip(&acc) {
                            put(&mut out.data, at(k), a);
                        }
                    }
                }
                for (r, a) in reduced.iter_mut().zip(acc) {
                    r.push(a);
                }
            }
        }
        let results: Vec<Rc<Tensor>> = if keep_axis {
            outs.into_iter().map(Rc::new).collect()
        } else {
            let reduced_shape = shape.remove_axis(axis).expect("axis in range");
            reduced
                .into_iter()
                .zip(&inputs)
                .map(|(parts, t)| {
                    let mut data = t.data.gather(&vec![0; parts.len()]);
                    for (j, p) in parts.iter().enumerate() {
                        put(&mut data, j, p);
                    }
                    Rc::new(Tensor {
                        ty: t.ty.with_shape(reduced_shape),
                        data,
                    })
                })
                .collect()
        };
        self.bind_results(inst, results)
    }
}

/// `tl.gather`: `out[.., i, ..] = src[.., index[.., i, ..], ..]`.
pub(super) fn gather(src: &Tensor, index: &Tensor, axis: u8, ty: Type) -> Result<Tensor, Fault> {
    let axis = axis as usize;
    if ty != src.ty.with_shape(index.ty.shape) || axis >= src.ty.shape.rank() {
        return Err(invalid!(
            "gather of {} by {} along axis {axis} as {ty}",
            src.ty,
            index.ty
        ));
    }
    let (_, n, src_inner) = around(src.ty.shape, axis);
    let (_, m, inner) = around(index.ty.shape, axis);
    debug_assert_eq!(src_inner, inner);
    let idx = index.ints()?;
    let mut picks = Vec::with_capacity(idx.len());
    for (j, &k) in idx.iter().enumerate() {
        if k < 0 || k as usize >= n {
            return Err(Fault {
                kind: FaultKind::OutOfBounds,
                message: format!(
                    "index {k} (element {j} of the index) is outside [0, {n}) along axis {axis} of {}",
                    src.ty
                ),
            });
        }
        let (o, i) = (j / (m * inner), j % inner);
        picks.push(o * n * inner + k as usize * inner + i);
    }
    Ok(Tensor {
        ty,
        data: src.data.gather(&picks),
    })
}

/// The steps of the bitonic network that sorts `n` (a power of two) elements: `(k, j)`,
/// where element `i` meets element `i ^ j` and the pair sorts ascending when `i & k == 0`.
pub(crate) fn bitonic_steps(n: usize) -> Vec<(usize, usize)> {
    let mut steps = Vec::new();
    let mut k = 2;
    while k <= n {
        let mut j = k / 2;
        while j > 0 {
            steps.push((k, j));
            j /= 2;
        }
        k *= 2;
    }
    steps
}

/// `tl.sort` along `axis` by the bitonic network (see [`crate::ir::Op::Sort`]).
pub(super) fn sort(x: &Tensor, axis: u8, descending: bool, ty: Type) -> Result<Tensor, Fault> {
    let axis = axis as usize;
    if ty != x.ty || axis >= x.ty.shape.rank() {
        return Err(invalid!("sort of {} along axis {axis} as {ty}", x.ty));
    }
    let (outer, n, inner) = around(x.ty.shape, axis);
    fn network<T: Copy>(
        v: &mut [T],
        (outer, n, inner): (usize, usize, usize),
        descending: bool,
        less: impl Fn(T, T) -> bool,
    ) {
        for (k, j) in bitonic_steps(n) {
            for o in 0..outer {
                for i in 0..inner {
                    let at = |c: usize| o * n * inner + c * inner + i;
                    for c in 0..n {
                        let p = c ^ j;
                        if p < c {
                            continue;
                        }
                        // `c` keeps the smaller element when its pair sorts ascending.
                        let ascending = (c & k == 0) != descending;
                        let (a, b) = (v[at(c)], v[at(p)]);
                        let swap = if ascending { less(b, a) } else { less(a, b) };
                        if swap {
                            v[at(c)] = b;
                            v[at(p)] = a;
                        }
                    }
                }
            }
        }
    }
    let mut data = x.data.clone();
    let dims = (outer, n, inner);
    match &mut data {
        Data::Int(v) => {
            if x.ty.scalar_type().is_some_and(|s| s.is_unsigned_int()) {
                network(v, dims, descending, |a, b| (a as u64) < (b as u64))
            } else {
                network(v, dims, descending, |a, b| a < b)
            }
        }
        Data::Float(v) => network(v, dims, descending, |a, b| a < b),
        _ => return Err(invalid!("sort of {}", x.ty)),
    }
    Ok(Tensor { ty, data })
}

/// `tl.histogram`: how many elements equal each of `0..num_bins`.
pub(super) fn histogram(x: &Tensor, num_bins: u32, ty: Type) -> Result<Tensor, Fault> {
    let unsigned = x.ty.scalar_type().is_some_and(|s| s.is_unsigned_int());
    let mut counts = vec![0i64; num_bins as usize];
    for &v in x.ints()? {
        let v = if unsigned {
            (v as u64).min(u32::MAX as u64) as i64
        } else {
            v
        };
        if (0..num_bins as i64).contains(&v) {
            counts[v as usize] += 1;
        }
    }
    Ok(Tensor {
        ty,
        data: Data::Int(counts),
    })
}

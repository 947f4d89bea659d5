//! Ops that create blocks or move elements between shapes: constants, `arange`, `splat`,
//! `broadcast`, `expand_dims`, `reshape`, `permute`, and reductions.
//!
//! Reductions run sequentially along the axis. Float sums accumulate in f64 and round once
//! to the element type at the end (GPUs add in a tree, in the element type or f32, so
//! results agree up to rounding); integer sums wrap. `max`/`min` propagate NaN as
//! `maximum`/`minimum` do; `argmax`/`argmin` give the first extreme, with NaN the largest
//! (argmax) or smallest (argmin) value, so the first NaN wins either way.

use super::elementwise::{fmax, fmin};
use super::error::{invalid, Fault};
use super::tensor::{int_fits, round_float, wrap_int, Data, Tensor};
use crate::ir::{Literal, ReduceOp};
use crate::types::{Elem, ScalarType, Shape, Type, MAX_RANK};

pub(crate) fn constant(value: Literal, ty: Type) -> Result<Tensor, Fault> {
    let n = ty.shape.numel();
    let s = ty
        .scalar_type()
        .ok_or_else(|| invalid!("a constant cannot be a pointer ({ty})"))?;
    let data = match value {
        Literal::Bool(b) if s.is_bool() => Data::Bool(vec![b; n]),
        Literal::Int(i) if s.is_int() => {
            // The literal holds the bits of the type, zero- or sign-extended: an unsigned
            // literal may also arrive sign-extended (a u64 above i64::MAX always does).
            let bits = s.bits();
            let sign_extended = (i << (64 - bits)) >> (64 - bits) == i;
            if !(int_fits(s, i) || s.is_unsigned_int() && sign_extended) {
                return Err(invalid!("literal {i} does not fit {s}"));
            }
            Data::Int(vec![wrap_int(s, i); n])
        }
        Literal::Float(x) if s.is_float() => Data::Float(vec![round_float(s, x); n]),
        _ => return Err(invalid!("literal {value} cannot have type {ty}")),
    };
    Ok(Tensor { ty, data })
}

pub(crate) fn arange(start: i32, end: i32, ty: Type) -> Result<Tensor, Fault> {
    let n = (end as i64 - start as i64).max(0) as usize;
    if ty != Type::block(Elem::Scalar(ScalarType::I32), Shape::new(&[n as u32]).unwrap()) {
        return Err(invalid!("arange({start}, {end}) gives <{n}xi32>, not {ty}"));
    }
    Ok(Tensor {
        ty,
        data: Data::Int((start..end).map(|i| i as i64).collect()),
    })
}

pub(crate) fn splat(x: &Tensor, ty: Type) -> Result<Tensor, Fault> {
    if !x.ty.is_scalar() || x.ty.elem != ty.elem {
        return Err(invalid!(
            "splat takes a scalar of the result's element type; got {} for {ty}",
            x.ty
        ));
    }
    Ok(Tensor {
        ty,
        data: x.data.splat(ty.shape.numel()),
    })
}

/// Row-major multi-indices of `shape` padded to [`MAX_RANK`] with leading zeros, visited in
/// order; `f` gets each index's position in the source layout given by `strides`.
fn for_each_source_index(shape: Shape, strides: [usize; MAX_RANK], mut f: impl FnMut(usize)) {
    let rank = shape.rank();
    let mut dims = [1usize; MAX_RANK];
    let mut st = [0usize; MAX_RANK];
    for i in 0..rank {
        dims[MAX_RANK - rank + i] = shape.dims()[i] as usize;
        st[MAX_RANK - rank + i] = strides[i];
    }
    for i in 0..dims[0] {
        for j in 0..dims[1] {
            let base = i * st[0] + j * st[1];
            for k in 0..dims[2] {
                f(base + k * st[2]);
            }
        }
    }
}

pub(crate) fn broadcast(x: &Tensor, ty: Type) -> Result<Tensor, Fault> {
    let (from, to) = (x.ty.shape, ty.shape);
    let fits = from.rank() == to.rank() && from.dims().iter().zip(to.dims()).all(|(&a, &b)| a == b || a == 1);
    if x.ty.elem != ty.elem || !fits {
        return Err(invalid!("cannot broadcast {} to {ty}", x.ty));
    }
    if from == to {
        return Ok(Tensor {
            ty,
            data: x.data.clone(),
        });
    }
    // Source strides, 0 along broadcast dimensions.
    let mut strides = from.strides();
    for (i, &d) in from.dims().iter().enumerate() {
        if d == 1 {
            strides[i] = 0;
        }
    }
    let mut indices = Vec::with_capacity(to.numel());
    for_each_source_index(to, strides, |i| indices.push(i));
    Ok(Tensor {
        ty,
        data: x.data.gather(&indices),
    })
}

pub(crate) fn expand_dims(x: &Tensor, axis: u8, ty: Type) -> Result<Tensor, Fault> {
    let expected = x.ty.shape.insert_axis(axis as usize);
    if x.ty.elem != ty.elem || expected != Some(ty.shape) {
        return Err(invalid!("expand_dims of {} at axis {axis} cannot give {ty}", x.ty));
    }
    Ok(Tensor {
        ty,
        data: x.data.clone(),
    })
}

pub(crate) fn reshape(x: &Tensor, ty: Type) -> Result<Tensor, Fault> {
    if x.ty.elem != ty.elem || x.ty.shape.numel() != ty.shape.numel() {
        return Err(invalid!("cannot reshape {} to {ty}", x.ty));
    }
    Ok(Tensor {
        ty,
        data: x.data.clone(),
    })
}

pub(crate) fn permute(x: &Tensor, perm: &[u8], ty: Type) -> Result<Tensor, Fault> {
    let from = x.ty.shape;
    let rank = from.rank();
    let mut seen = [false; MAX_RANK];
    let valid = perm.len() == rank
        && perm
            .iter()
            .all(|&p| (p as usize) < rank && !std::mem::replace(&mut seen[p as usize], true));
    if !valid {
        return Err(invalid!("{perm:?} is not a permutation of the {rank} axes of {}", x.ty));
    }
    let dims: Vec<u32> = perm.iter().map(|&p| from.dims()[p as usize]).collect();
    if x.ty.elem != ty.elem || Shape::new(&dims) != Some(ty.shape) {
        return Err(invalid!("permute {perm:?} of {} cannot give {ty}", x.ty));
    }
    let src = from.strides();
    let mut strides = [0; MAX_RANK];
    for (i, &p) in perm.iter().enumerate() {
        strides[i] = src[p as usize];
    }
    let mut indices = Vec::with_capacity(from.numel());
    for_each_source_index(ty.shape, strides, |i| indices.push(i));
    Ok(Tensor {
        ty,
        data: x.data.gather(&indices),
    })
}

pub(crate) fn reduce(op: ReduceOp, x: &Tensor, axis: u8, ty: Type) -> Result<Tensor, Fault> {
    let shape = x.ty.shape;
    let axis = axis as usize;
    if axis >= shape.rank() {
        return Err(invalid!(
            "{} along axis {axis} of {}, which has rank {}",
            op.name(),
            x.ty,
            shape.rank()
        ));
    }
    let s = x.scalar_type("a reduction's operand")?;
    let out_elem = match op {
        ReduceOp::ArgMax | ReduceOp::ArgMin => Elem::Scalar(ScalarType::I32),
        _ => x.ty.elem,
    };
    if Some(ty) != shape.remove_axis(axis).map(|s| Type::block(out_elem, s)) {
        return Err(invalid!("{} of {} along axis {axis} cannot give {ty}", op.name(), x.ty));
    }
    let dims = shape.dims();
    let outer: usize = dims[..axis].iter().map(|&d| d as usize).product();
    let n = dims[axis] as usize;
    let inner: usize = dims[axis + 1..].iter().map(|&d| d as usize).product();
    // Folds each lane `[o, :, i]` with `f`, starting from its first element.
    fn fold<T: Copy, A: Copy>(
        v: &[T],
        (outer, n, inner): (usize, usize, usize),
        init: impl Fn(T) -> A,
        f: impl Fn(A, T, usize) -> A,
    ) -> Vec<A> {
        let mut out = Vec::with_capacity(outer * inner);
        for o in 0..outer {
            let base = o * n * inner;
            for i in 0..inner {
                let mut acc = init(v[base + i]);
                for k in 1..n {
                    acc = f(acc, v[base + k * inner + i], k);
                }
                out.push(acc);
            }
        }
        out
    }
    let dims3 = (outer, n, inner);
    let unsupported = || invalid!("{} is not defined for {s}", op.name());
    let data = match (&x.data, op) {
        (Data::Float(v), ReduceOp::Sum) => Data::Float(
            fold(v, dims3, |a| a, |acc, a, _| acc + a)
                .into_iter()
                .map(|a| round_float(s, a))
                .collect(),
        ),
        (Data::Float(v), ReduceOp::Max) => Data::Float(fold(v, dims3, |a| a, |acc, a, _| fmax(acc, a))),
        (Data::Float(v), ReduceOp::Min) => Data::Float(fold(v, dims3, |a| a, |acc, a, _| fmin(acc, a))),
        (Data::Float(v), ReduceOp::ArgMax) => {
            Data::Int(arg(v, dims3, |a, best| !best.is_nan() && (a.is_nan() || a > best)))
        }
        (Data::Float(v), ReduceOp::ArgMin) => {
            Data::Int(arg(v, dims3, |a, best| !best.is_nan() && (a.is_nan() || a < best)))
        }
        (Data::Int(v), ReduceOp::Sum) => Data::Int(
            fold(v, dims3, |a| a, |acc, a, _| acc.wrapping_add(a))
                .into_iter()
                .map(|a| wrap_int(s, a))
                .collect(),
        ),
        // Unsigned values compare as u64 (the others are zero-extended, so that is exact).
        (Data::Int(v), ReduceOp::Max) if s.is_unsigned_int() => {
            Data::Int(fold(v, dims3, |a| a, |acc, a, _| (acc as u64).max(a as u64) as i64))
        }
        (Data::Int(v), ReduceOp::Min) if s.is_unsigned_int() => {
            Data::Int(fold(v, dims3, |a| a, |acc, a, _| (acc as u64).min(a as u64) as i64))
        }
        (Data::Int(v), ReduceOp::Max) => Data::Int(fold(v, dims3, |a| a, |acc, a, _| acc.max(a))),
        (Data::Int(v), ReduceOp::Min) => Data::Int(fold(v, dims3, |a| a, |acc, a, _| acc.min(a))),
        (Data::Int(v), ReduceOp::ArgMax) if s.is_unsigned_int() => {
            Data::Int(arg(v, dims3, |a, best| a as u64 > best as u64))
        }
        (Data::Int(v), ReduceOp::ArgMin) if s.is_unsigned_int() => {
            Data::Int(arg(v, dims3, |a, best| (a as u64) < best as u64))
        }
        (Data::Int(v), ReduceOp::ArgMax) => Data::Int(arg(v, dims3, |a, best| a > best)),
        (Data::Int(v), ReduceOp::ArgMin) => Data::Int(arg(v, dims3, |a, best| a < best)),
        (Data::Bool(v), ReduceOp::Max) => Data::Bool(fold(v, dims3, |a| a, |acc, a, _| acc | a)),
        (Data::Bool(v), ReduceOp::Min) => Data::Bool(fold(v, dims3, |a| a, |acc, a, _| acc & a)),
        (Data::Bool(v), ReduceOp::ArgMax) => Data::Int(arg(v, dims3, |a, best| a & !best)),
        (Data::Bool(v), ReduceOp::ArgMin) => Data::Int(arg(v, dims3, |a, best| !a & best)),
        (Data::Bool(_), ReduceOp::Sum) => return Err(unsupported()),
        (Data::Ptr(_), _) => unreachable!("scalar_type rejects pointers"),
    };
    Ok(Tensor { ty, data })
}

/// The index of the first element of each lane that no later element `better`s.
fn arg<T: Copy>(v: &[T], (outer, n, inner): (usize, usize, usize), better: impl Fn(T, T) -> bool) -> Vec<i64> {
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        let base = o * n * inner;
        for i in 0..inner {
            let (mut best, mut at) = (v[base + i], 0);
            for k in 1..n {
                let a = v[base + k * inner + i];
                if better(a, best) {
                    best = a;
                    at = k;
                }
            }
            out.push(at as i64);
        }
    }
    out
}

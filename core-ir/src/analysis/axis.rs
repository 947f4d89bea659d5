//! Axis analysis, as Triton's `AxisInfo`: for each integer or pointer block and each
//! dimension, how long the runs of consecutive values are (contiguity), the largest power
//! of two dividing the first value of each run (divisibility), and how long the runs of
//! equal values are (constancy). Loads and stores use it to prove that a thread's elements
//! are adjacent and aligned, so they can move 16 bytes at once.
//!
//! For pointers, contiguity and divisibility are in elements; a pointer parameter is
//! divisible by 16 bytes when the specialization says so.

use crate::ir::{AxisHint, BinaryOp, CmpOp, HintKind, Kernel, Literal, Op, Region, ValueId};
use crate::target::Specialization;
use crate::types::{Elem, MAX_RANK};

/// Facts for one value, per dimension. All entries are powers of two (at least 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AxisInfo {
    /// Per dimension, the length of the runs of consecutive values (each element one more
    /// than the previous along the dimension) the block is made of.
    pub contiguity: [u64; MAX_RANK],
    /// Per dimension, the largest power of two known to divide the first value of each run
    /// (a scalar's in slot 0). Pointers count in elements of their pointee.
    pub divisibility: [u64; MAX_RANK],
    /// Per dimension, the length of the runs of equal values the block is made of.
    pub constancy: [u64; MAX_RANK],
    /// The value when it is a known constant (scalars and uniform blocks).
    pub constant: Option<i64>,
}

/// The largest divisibility tracked (beyond it, nothing changes in practice).
const MAX_DIV: u64 = 1 << 30;

impl AxisInfo {
    /// Nothing known.
    pub fn unknown() -> AxisInfo {
        AxisInfo {
            contiguity: [1; MAX_RANK],
            divisibility: [1; MAX_RANK],
            constancy: [1; MAX_RANK],
            constant: None,
        }
    }
    fn uniform(div: u64, shape: &[u32], constant: Option<i64>) -> AxisInfo {
        let mut a = AxisInfo {
            constant,
            ..AxisInfo::unknown()
        };
        // Scalars keep their divisibility in slot 0.
        a.divisibility[0] = div;
        for (d, &n) in shape.iter().enumerate() {
            a.divisibility[d] = div;
            a.constancy[d] = n as u64;
        }
        a
    }
}

fn pow2_divisor(v: i64) -> u64 {
    if v == 0 {
        MAX_DIV
    } else {
        (1u64 << v.unsigned_abs().trailing_zeros()).min(MAX_DIV)
    }
}

fn gcd_pow2(a: u64, b: u64) -> u64 {
    a.min(b)
}

/// The axis facts of every value of `kernel` (indexed by value), the author's hints
/// (`kernel.hints`) taken wherever a value is defined.
pub fn analyze(kernel: &Kernel, spec: &Specialization) -> Vec<AxisInfo> {
    let hints = Hints::of(kernel);
    let mut info = vec![AxisInfo::unknown(); kernel.values.len()];
    // Values no rule below defines (`if` and `while` arguments) keep their hints alone.
    for h in &kernel.hints {
        info[h.value.index()] = hints.apply(h.value, AxisInfo::unknown());
    }
    for (i, p) in kernel.params.iter().enumerate() {
        let div = if spec.is_divisible(i) { 16 } else { 1 };
        // Pointer divisibility is counted in elements.
        let div = match p.ty.elem {
            Elem::Ptr(s) => (div / s.size_bytes() as u64).max(1),
            Elem::Scalar(_) => div,
        };
        // An integer known to be 1 is the constant 1 (a unit stride keeps runs contiguous).
        let a = if spec.is_one(i) && matches!(p.ty.elem, Elem::Scalar(s) if s.is_int()) {
            AxisInfo::uniform(1, &[], Some(1))
        } else {
            AxisInfo::uniform(div, &[], None)
        };
        info[p.value.index()] = hints.apply(p.value, a);
    }
    region(kernel, &kernel.body, &mut info, &hints);
    info
}

/// The hints of a kernel by value (empty for a kernel without hints, the common case, which
/// then costs nothing).
struct Hints<'k> {
    by_value: Vec<Vec<&'k AxisHint>>,
}

impl<'k> Hints<'k> {
    fn of(kernel: &'k Kernel) -> Hints<'k> {
        let mut by_value = Vec::new();
        if !kernel.hints.is_empty() {
            by_value.resize_with(kernel.values.len(), Vec::new);
        }
        for h in &kernel.hints {
            if let Some(slot) = by_value.get_mut(h.value.index()) {
                slot.push(h);
            }
        }
        Hints { by_value }
    }
    /// `a`, the facts proved of `value`, raised to what its hints promise.
    fn apply(&self, value: ValueId, a: AxisInfo) -> AxisInfo {
        match self.by_value.get(value.index()) {
            Some(hints) => hints.iter().fold(a, |a, h| promised(h, a)),
            None => a,
        }
    }
}

/// `a` raised to what hint `h` promises (each fact the larger of the two).
fn promised(h: &AxisHint, mut a: AxisInfo) -> AxisInfo {
    for (d, &n) in h.per_dim.iter().enumerate() {
        match h.kind {
            HintKind::MultipleOf => a.divisibility[d] = a.divisibility[d].max(pow2_divisor(n as i64)),
            HintKind::MaxContiguous => a.contiguity[d] = a.contiguity[d].max(n),
            HintKind::MaxConstancy => a.constancy[d] = a.constancy[d].max(n),
        }
    }
    a
}

fn region(k: &Kernel, r: &Region, info: &mut Vec<AxisInfo>, hints: &Hints) {
    for &id in &r.insts {
        let inst = &k.insts[id];
        if let Op::For { init, .. } = &inst.op {
            for_loop(k, inst, init, info, hints);
            continue;
        }
        // Branch and `while` bodies: their arguments are unknown.
        for reg in &inst.regions {
            region(k, reg, info, hints);
        }
        for (i, &res) in inst.results.iter().enumerate() {
            let a = value(k, &inst.op, res, i, info);
            info[res.index()] = hints.apply(res, a);
        }
    }
}

/// What holds of both `a` and `b` (all entries are powers of two: the smaller).
fn meet(a: AxisInfo, b: AxisInfo) -> AxisInfo {
    let mut r = AxisInfo::unknown();
    for d in 0..MAX_RANK {
        r.contiguity[d] = a.contiguity[d].min(b.contiguity[d]);
        r.divisibility[d] = a.divisibility[d].min(b.divisibility[d]);
        r.constancy[d] = a.constancy[d].min(b.constancy[d]);
    }
    r.constant = if a.constant == b.constant { a.constant } else { None };
    r
}

/// A `for` loop: its carried values start as their initial values and are met with what
/// the body yields until nothing changes (Triton's fixed point), so that pointers
/// advanced by a uniform step each iteration (`a_ptrs += BLOCK_K * stride_ak`) keep their
/// contiguity and alignment. The induction variable takes the values `start + i * step`, so
/// the power of two dividing both divides all of them (Triton's rule too): a row walked in
/// blocks from 0 keeps its blocks aligned, and its loads 16 bytes wide.
fn for_loop(k: &Kernel, inst: &crate::ir::Inst, init: &[ValueId], info: &mut Vec<AxisInfo>, hints: &Hints) {
    const MAX_ROUNDS: usize = 8;
    let body = &inst.regions[0];
    if let (Op::For { start, step, .. }, Some(&iv)) = (&inst.op, body.args.first()) {
        let div = scalar_div(&info[start.index()]).min(scalar_div(&info[step.index()]));
        info[iv.index()] = hints.apply(iv, AxisInfo::uniform(div, &[], None));
    }
    let carried = &body.args[1..];
    for (&arg, &v) in carried.iter().zip(init) {
        info[arg.index()] = hints.apply(arg, info[v.index()]);
    }
    let yields = |info: &[AxisInfo]| -> Vec<AxisInfo> {
        match body.insts.last().map(|&i| &k.insts[i].op) {
            Some(Op::Yield { values }) => values.iter().map(|v| info[v.index()]).collect(),
            _ => vec![AxisInfo::unknown(); carried.len()],
        }
    };
    let mut stable = false;
    for _ in 0..MAX_ROUNDS {
        region(k, body, info, hints);
        let next: Vec<AxisInfo> = carried
            .iter()
            .zip(yields(info))
            .map(|(&arg, y)| hints.apply(arg, meet(info[arg.index()], y)))
            .collect();
        stable = carried.iter().zip(&next).all(|(&arg, n)| info[arg.index()] == *n);
        for (&arg, n) in carried.iter().zip(next) {
            info[arg.index()] = n;
        }
        if stable {
            break;
        }
    }
    if !stable {
        for &arg in carried {
            info[arg.index()] = hints.apply(arg, AxisInfo::unknown());
        }
        region(k, body, info, hints);
    }
    // The results are the carried values after the last iteration (or the initial ones).
    for (&res, &arg) in inst.results.iter().zip(carried) {
        info[res.index()] = hints.apply(res, info[arg.index()]);
    }
}

fn value(k: &Kernel, op: &Op, res: ValueId, _index: usize, info: &[AxisInfo]) -> AxisInfo {
    let ty = k.ty(res);
    let shape = ty.shape.dims();
    let rank = shape.len();
    let get = |v: ValueId| info[v.index()];
    match op {
        Op::Constant { value: Literal::Int(v) } => AxisInfo::uniform(pow2_divisor(*v), shape, Some(*v)),
        Op::Arange { start, end } => {
            let mut a = AxisInfo::unknown();
            a.contiguity[0] = (*end - *start) as u64;
            a.divisibility[0] = pow2_divisor(*start as i64);
            a
        }
        Op::Splat { value } | Op::Broadcast { value } if rank > 0 => {
            let src = get(*value);
            let src_shape = k.ty(*value).shape;
            let mut a = AxisInfo {
                constant: src.constant,
                ..AxisInfo::unknown()
            };
            for d in 0..rank {
                if src_shape.is_scalar() || src_shape.dims()[d] == 1 {
                    a.divisibility[d] = if src_shape.is_scalar() {
                        src.divisibility[0].max(scalar_div(&src))
                    } else {
                        src.divisibility[d]
                    };
                    a.constancy[d] = shape[d] as u64;
                } else {
                    a.contiguity[d] = src.contiguity[d];
                    a.divisibility[d] = src.divisibility[d];
                    a.constancy[d] = src.constancy[d];
                }
            }
            a
        }
        Op::ExpandDims { value, axis } => {
            let src = get(*value);
            let mut a = AxisInfo {
                constant: src.constant,
                ..AxisInfo::unknown()
            };
            let mut s = 0;
            let src_rank = k.ty(*value).shape.rank();
            for d in 0..rank {
                if d == *axis as usize {
                    // The new dimension has size 1: its divisibility must divide every
                    // element.
                    a.divisibility[d] = match src.constant {
                        _ if src_rank == 0 => scalar_div(&src),
                        Some(c) => pow2_divisor(c),
                        None => (0..src_rank).map(|s| div_at(&src, s, 1)).min().unwrap_or(1),
                    };
                } else {
                    a.contiguity[d] = src.contiguity[s];
                    a.divisibility[d] = src.divisibility[s];
                    a.constancy[d] = src.constancy[s];
                    s += 1;
                }
            }
            a
        }
        Op::Binary { op, lhs, rhs } => binary(*op, get(*lhs), get(*rhs), rank),
        Op::AddPtr { ptr, offset } => binary(BinaryOp::Add, get(*ptr), get(*offset), rank),
        Op::Compare { op, lhs, rhs } => {
            // A comparison is constant over runs where both sides are, and where a
            // contiguous side is compared with a constant side whose value is a multiple
            // of the run length (`offsets < n` with n divisible by 16). Only where the
            // result flips as the contiguous side reaches the constant: `x < n` and
            // `x >= n` flip at x == n, but `x <= n` and `x > n` one element later.
            let (a, b) = (get(*lhs), get(*rhs));
            let mut r = AxisInfo::unknown();
            for d in 0..rank {
                let both = gcd_pow2(a.constancy[d], b.constancy[d]);
                let div = gcd_pow2(a.divisibility[d], b.divisibility[d]);
                let ab = if matches!(op, CmpOp::Lt | CmpOp::Ge) {
                    gcd_pow2(a.contiguity[d], gcd_pow2(b.constancy[d], div))
                } else {
                    1
                };
                let ba = if matches!(op, CmpOp::Gt | CmpOp::Le) {
                    gcd_pow2(b.contiguity[d], gcd_pow2(a.constancy[d], div))
                } else {
                    1
                };
                r.constancy[d] = both.max(ab).max(ba);
            }
            r
        }
        Op::Select {
            cond,
            on_true,
            on_false,
        } => {
            let (c, a, b) = (get(*cond), get(*on_true), get(*on_false));
            let mut r = AxisInfo::unknown();
            for d in 0..rank {
                r.constancy[d] = c.constancy[d].min(a.constancy[d]).min(b.constancy[d]);
                r.contiguity[d] = c.constancy[d].min(a.contiguity[d]).min(b.contiguity[d]);
                r.divisibility[d] = div_at(&a, d, r.contiguity[d]).min(div_at(&b, d, r.contiguity[d]));
            }
            r
        }
        Op::Cast { value }
            if k.ty(*value).scalar_type().is_some_and(|s| s.is_int())
                && ty.scalar_type().is_some_and(|s| s.is_int()) =>
        {
            get(*value)
        }
        Op::Reshape { .. } | Op::Permute { .. } | Op::Load { .. } | Op::Reduce { .. } => AxisInfo::unknown(),
        _ if rank == 0 => AxisInfo::unknown(),
        _ => AxisInfo::unknown(),
    }
}

/// The divisibility of `x`'s elements that start runs of `run` elements along `d` (runs of
/// 1: every element). `x`'s divisibility speaks only of the first elements of its own runs;
/// a shorter run may start inside one of them, where only the run's own alignment is known.
fn div_at(x: &AxisInfo, d: usize, run: u64) -> u64 {
    if x.contiguity[d] > run {
        x.divisibility[d].min(run)
    } else {
        x.divisibility[d]
    }
}

/// Divisibility of a scalar (kept in slot 0).
fn scalar_div(a: &AxisInfo) -> u64 {
    a.divisibility[0]
}

fn binary(op: BinaryOp, a: AxisInfo, b: AxisInfo, rank: usize) -> AxisInfo {
    let mut r = AxisInfo::unknown();
    let dims = rank.max(1);
    r.constant = match (a.constant, b.constant, op) {
        (Some(x), Some(y), BinaryOp::Add) => x.checked_add(y),
        (Some(x), Some(y), BinaryOp::Mul) => x.checked_mul(y),
        (Some(x), Some(y), BinaryOp::Sub) => x.checked_sub(y),
        _ => None,
    };
    for d in 0..dims {
        let (ca, cb) = (a.constancy[d], b.constancy[d]);
        r.constancy[d] = if rank == 0 { 1 } else { gcd_pow2(ca, cb) };
        match op {
            BinaryOp::Add | BinaryOp::Sub => {
                // contiguous + constant stays contiguous over the shorter run.
                r.contiguity[d] = gcd_pow2(a.contiguity[d], cb).max(if op == BinaryOp::Add {
                    gcd_pow2(ca, b.contiguity[d])
                } else {
                    1
                });
                r.divisibility[d] = gcd_pow2(div_at(&a, d, r.contiguity[d]), div_at(&b, d, r.contiguity[d]));
            }
            BinaryOp::Mul => {
                // Products multiply divisibility (of every element: the product is not
                // contiguous); a contiguous run times 1 stays contiguous.
                r.divisibility[d] = (div_at(&a, d, 1).saturating_mul(div_at(&b, d, 1))).min(MAX_DIV);
                if b.constant == Some(1) {
                    r.contiguity[d] = a.contiguity[d];
                    r.divisibility[d] = a.divisibility[d];
                } else if a.constant == Some(1) {
                    r.contiguity[d] = b.contiguity[d];
                    r.divisibility[d] = b.divisibility[d];
                }
            }
            BinaryOp::Div | BinaryOp::CeilDiv => {
                if let Some(c) = b.constant.filter(|c| *c > 0 && (*c as u64).is_power_of_two()) {
                    // Not contiguous: the divisibility must divide every element, and a run
                    // longer than `c` gives consecutive quotients.
                    r.divisibility[d] = if a.contiguity[d] > c as u64 {
                        1
                    } else {
                        (a.divisibility[d] / c as u64).max(1)
                    };
                    r.constancy[d] =
                        r.constancy[d].max(gcd_pow2(a.contiguity[d], c as u64).min(a.divisibility[d]).max(1));
                }
            }
            BinaryOp::Rem => {
                if let Some(c) = b.constant.filter(|c| *c > 0 && (*c as u64).is_power_of_two()) {
                    r.contiguity[d] = gcd_pow2(a.contiguity[d], c as u64).min(a.divisibility[d].max(1)).max(1);
                    r.divisibility[d] = gcd_pow2(a.divisibility[d], c as u64);
                } else {
                    // `x % n` keeps runs that do not cross a multiple of n: with n divisible
                    // by d and x's runs aligned to d, runs up to d survive.
                    // (n must be the same over the run.)
                    r.contiguity[d] = gcd_pow2(
                        a.contiguity[d],
                        gcd_pow2(b.divisibility[d], gcd_pow2(a.divisibility[d], b.constancy[d])),
                    );
                    r.divisibility[d] = gcd_pow2(div_at(&a, d, r.contiguity[d]), div_at(&b, d, r.contiguity[d]));
                }
            }
            BinaryOp::Shl => {
                if let Some(c) = b.constant.filter(|c| (0..31).contains(c)) {
                    // Of every element: the result is not contiguous.
                    r.divisibility[d] = (div_at(&a, d, 1) << c).min(MAX_DIV);
                }
            }
            _ => {}
        }
    }
    r
}

impl AxisInfo {
    /// Scalars keep their divisibility in slot 0; used by the lowering's checks.
    pub fn scalar_divisibility(&self) -> u64 {
        self.divisibility[0]
    }
}

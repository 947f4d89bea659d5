//! Runs one program: instruction dispatch, regions and control flow.
//!
//! Every value of the kernel has a slot in an environment indexed by its arena index, holding
//! a shared block; loops rebind their region arguments each iteration. The environment is
//! cleared between programs, so a use before definition is reported rather than reading a
//! stale value.

use super::cluster::{self, Member};
use super::dot::dot;
use super::elementwise as ew;
use super::error::{invalid, Fault, FaultKind, InterpError};
use super::hints::HintChecks;
use super::memory::{self, Memory};
use super::shape_ops as shape;
use super::tensor::{wrap_int, Data, Tensor};
use crate::ir::{Inst, Kernel, Op, Region, ValueId};
use crate::types::{Elem, ScalarType, Type};
use std::rc::Rc;
use std::sync::Arc;

pub(crate) struct Program<'a> {
    kernel: &'a Kernel,
    grid: [u32; 3],
    mem: Memory<'a>,
    /// The parameters' values, bound at the start of every program.
    params: Vec<Rc<Tensor>>,
    env: Vec<Option<Rc<Tensor>>>,
    pid: [u32; 3],
    /// The program's place in its cluster; `None` for clusters of one program.
    cluster: Option<Member<'a>>,
    /// The checks of the kernel's hints (the launch's, shared by its programs); `None`
    /// without hints.
    hints: Option<Arc<HintChecks>>,
}

impl<'a> Program<'a> {
    pub fn new(
        kernel: &'a Kernel,
        grid: [u32; 3],
        mem: Memory<'a>,
        params: Vec<Tensor>,
        hints: Option<Arc<HintChecks>>,
    ) -> Self {
        Program {
            kernel,
            grid,
            hints,
            mem,
            params: params.into_iter().map(Rc::new).collect(),
            env: vec![None; kernel.values.len()],
            pid: [0; 3],
            cluster: None,
        }
    }

    /// The program as `member` of a cluster of several programs, whose `cluster_reduce`s
    /// wait for the others'.
    pub fn in_cluster(self, member: Member<'a>) -> Self {
        Program {
            cluster: Some(member),
            ..self
        }
    }

    /// Runs the program with id `pid`.
    pub fn run(&mut self, pid: [u32; 3]) -> Result<(), InterpError> {
        self.pid = pid;
        self.env.iter_mut().for_each(|v| *v = None);
        let kernel = self.kernel;
        for (param, value) in kernel.params.iter().zip(&self.params) {
            self.check_hints(param.value, value)?;
            self.env[param.value.index()] = Some(value.clone());
        }
        let yielded = self.run_region(&kernel.body)?;
        if !yielded.is_empty() {
            let last = kernel.body.insts.last().expect("values were yielded by an instruction");
            let inst = &kernel.insts[*last];
            return Err(self.at(inst, invalid!("the kernel body cannot yield values")));
        }
        Ok(())
    }

    /// The error for `fault` at `inst` in this program.
    fn at(&self, inst: &Inst, fault: Fault) -> InterpError {
        InterpError::Fault {
            kind: fault.kind,
            op: inst.op.name(),
            loc: inst.loc,
            program: self.pid,
            message: fault.message,
        }
    }

    fn get(&self, v: ValueId) -> Result<Rc<Tensor>, Fault> {
        match self.env.get(v.index()) {
            Some(Some(t)) => Ok(t.clone()),
            Some(None) => Err(invalid!("value %{} is used before it is defined", v.index())),
            None => Err(invalid!("value %{} does not exist", v.index())),
        }
    }

    fn get_opt(&self, v: Option<ValueId>) -> Result<Option<Rc<Tensor>>, Fault> {
        v.map(|v| self.get(v)).transpose()
    }

    /// Binds `values` to the values `names` (region arguments or results), checking types.
    fn bind(&mut self, names: &[ValueId], values: Vec<Rc<Tensor>>, what: &str) -> Result<(), Fault> {
        if names.len() != values.len() {
            return Err(invalid!("{what}: {} values for {} names", values.len(), names.len()));
        }
        for (&name, value) in names.iter().zip(values) {
            let ty = self.kernel.values.try_get(name).map(|v| v.ty);
            if ty != Some(value.ty) {
                return Err(invalid!(
                    "{what}: a value of type {} for %{} of type {ty:?}",
                    value.ty,
                    name.index()
                ));
            }
            if let Some(checks) = &self.hints {
                // Region arguments and results: the fault is reported at the op that binds
                // them, so it says where the hint was made.
                checks.check(name, &value).map_err(|(hint, fault)| Fault {
                    message: format!("{} (the {} at {})", fault.message, hint.kind.name(), hint.loc),
                    ..fault
                })?;
            }
            self.env[name.index()] = Some(value);
        }
        Ok(())
    }

    /// A fault at the hint that `value`'s tensor `t` breaks, if any (see `hints`).
    fn check_hints(&self, value: ValueId, t: &Tensor) -> Result<(), InterpError> {
        let Some(checks) = &self.hints else {
            return Ok(());
        };
        checks.check(value, t).map_err(|(hint, fault)| InterpError::Fault {
            kind: fault.kind,
            op: hint.kind.name(),
            loc: hint.loc,
            program: self.pid,
            message: fault.message,
        })
    }

    /// Runs a region's instructions; returns the values of its final `yield` (none without).
    fn run_region(&mut self, region: &'a Region) -> Result<Vec<Rc<Tensor>>, InterpError> {
        let kernel = self.kernel;
        for (i, &id) in region.insts.iter().enumerate() {
            let Some(inst) = kernel.insts.try_get(id) else {
                return Err(InterpError::Fault {
                    kind: FaultKind::InvalidIr,
                    op: "region",
                    loc: crate::ir::SourceLoc {
                        file: "<unknown>",
                        line: 0,
                        column: 0,
                    },
                    program: self.pid,
                    message: format!("instruction #{} does not exist", id.index()),
                });
            };
            if let Op::Yield { values } = &inst.op {
                if i + 1 != region.insts.len() {
                    return Err(self.at(inst, invalid!("yield must be the last instruction of its region")));
                }
                return values
                    .iter()
                    .map(|&v| self.get(v))
                    .collect::<Result<_, _>>()
                    .map_err(|f| self.at(inst, f));
            }
            self.exec(inst)?;
        }
        Ok(Vec::new())
    }

    fn exec(&mut self, inst: &'a Inst) -> Result<(), InterpError> {
        match &inst.op {
            Op::For { .. } => self.exec_for(inst),
            Op::If { .. } => self.exec_if(inst),
            Op::While { .. } => self.exec_while(inst),
            Op::Scan { .. } | Op::ReduceCombine { .. } => self.exec_combine(inst),
            Op::ClusterReduceCombine { .. } => self.exec_cluster_combine(inst),
            _ => {
                let result = self.exec_simple(inst).map_err(|f| self.at(inst, f))?;
                #[cfg(debug_assertions)]
                if let Some(t) = &result {
                    check_invariants(t).map_err(|f| self.at(inst, f))?;
                }
                match (result, inst.results.as_slice()) {
                    (Some(t), &[r]) => {
                        self.check_hints(r, &t)?;
                        self.env[r.index()] = Some(Rc::new(t));
                    }
                    (None, &[]) => {}
                    (r, results) => {
                        let made = if r.is_some() { 1 } else { 0 };
                        return Err(self.at(
                            inst,
                            invalid!("the op makes {made} values, but has {} results", results.len()),
                        ));
                    }
                }
                Ok(())
            }
        }
    }

    /// The type of the single result.
    fn result_ty(&self, inst: &Inst) -> Result<Type, Fault> {
        match inst.results.as_slice() {
            &[r] => self
                .kernel
                .values
                .try_get(r)
                .map(|v| v.ty)
                .ok_or_else(|| invalid!("result %{} does not exist", r.index())),
            r => Err(invalid!("the op has one result, not {}", r.len())),
        }
    }

    /// Ops without regions: returns the result (`None` for stores).
    fn exec_simple(&mut self, inst: &Inst) -> Result<Option<Tensor>, Fault> {
        let op = &inst.op;
        if let Op::Store { ptr, value, mask } = op {
            let (ptr, value, mask) = (self.get(*ptr)?, self.get(*value)?, self.get_opt(*mask)?);
            let s = pointee(&ptr)?;
            if value.ty != ptr.ty.with_elem(Elem::Scalar(s)) {
                return Err(invalid!("store of {} through {}", value.ty, ptr.ty));
            }
            let mask = check_mask(mask.as_deref(), ptr.ty)?;
            memory::store(&mut self.mem, s, ptr.ptrs()?, mask, &value.data)?;
            return Ok(None);
        }
        match op {
            Op::Assert { cond, message } => {
                super::debug_ops::check(&*self.get(*cond)?, message)?;
                return Ok(None);
            }
            Op::Print { prefix, values } => {
                let values = values.iter().map(|&v| self.get(v)).collect::<Result<Vec<_>, _>>()?;
                let refs: Vec<&Tensor> = values.iter().map(|t| &**t).collect();
                super::debug_ops::print(self.pid, prefix, &refs);
                return Ok(None);
            }
            _ => {}
        }
        let ty = self.result_ty(inst)?;
        let t = match op {
            Op::ProgramId { axis } | Op::NumPrograms { axis } => {
                if ty != Type::scalar(ScalarType::I32) || *axis > 2 {
                    return Err(invalid!("{} of axis {axis} as {ty}", op.name()));
                }
                let v = if matches!(op, Op::ProgramId { .. }) {
                    self.pid
                } else {
                    self.grid
                };
                Tensor {
                    ty,
                    data: Data::Int(vec![v[*axis as usize] as i32 as i64]),
                }
            }
            Op::Constant { value } => shape::constant(*value, ty)?,
            Op::Arange { start, end } => shape::arange(*start, *end, ty)?,
            Op::Splat { value } => shape::splat(&*self.get(*value)?, ty)?,
            Op::Broadcast { value } => shape::broadcast(&*self.get(*value)?, ty)?,
            Op::ExpandDims { value, axis } => shape::expand_dims(&*self.get(*value)?, *axis, ty)?,
            Op::Reshape { value } => shape::reshape(&*self.get(*value)?, ty)?,
            Op::Permute { value, perm } => shape::permute(&*self.get(*value)?, perm, ty)?,
            Op::Unary { op, value } => ew::unary(*op, &*self.get(*value)?, ty)?,
            Op::Binary { op, lhs, rhs } => ew::binary(*op, &*self.get(*lhs)?, &*self.get(*rhs)?, ty)?,
            Op::Compare { op, lhs, rhs } => ew::compare(*op, &*self.get(*lhs)?, &*self.get(*rhs)?, ty)?,
            Op::Select {
                cond,
                on_true,
                on_false,
            } => ew::select(&*self.get(*cond)?, &*self.get(*on_true)?, &*self.get(*on_false)?, ty)?,
            Op::Fma { a, b, c } => ew::fma(&*self.get(*a)?, &*self.get(*b)?, &*self.get(*c)?, ty)?,
            Op::BytePerm { x, y, selector } => {
                ew::byte_perm(&*self.get(*x)?, &*self.get(*y)?, &*self.get(*selector)?, ty)?
            }
            Op::Rounded { op, rounding, args } => {
                let args = args.iter().map(|a| self.get(*a)).collect::<Result<Vec<_>, _>>()?;
                let refs: Vec<&Tensor> = args.iter().map(|a| &**a).collect();
                ew::rounded(*op, *rounding, &refs, ty)?
            }
            Op::Cast { value } => ew::cast(&*self.get(*value)?, ty)?,
            Op::Bitcast { value } => ew::bitcast(&*self.get(*value)?, ty)?,
            Op::AddPtr { ptr, offset } => {
                let (ptr, offset) = (self.get(*ptr)?, self.get(*offset)?);
                let offsets = offset.ints()?;
                if ty != ptr.ty || !ptr.ty.elem.is_ptr() || offset.ty.shape != ptr.ty.shape {
                    return Err(invalid!("addptr of {} and {} as {ty}", ptr.ty, offset.ty));
                }
                let out = ptr
                    .ptrs()?
                    .iter()
                    .zip(offsets)
                    .map(|(p, &o)| super::tensor::Pointer {
                        param: p.param,
                        offset: p.offset.wrapping_add(o),
                    })
                    .collect();
                Tensor {
                    ty,
                    data: Data::Ptr(out),
                }
            }
            Op::Load { ptr, mask, other, .. } => {
                let (ptr, mask, other) = (self.get(*ptr)?, self.get_opt(*mask)?, self.get_opt(*other)?);
                let s = pointee(&ptr)?;
                if ty != ptr.ty.with_elem(Elem::Scalar(s)) {
                    return Err(invalid!("load through {} as {ty}", ptr.ty));
                }
                if let Some(o) = &other {
                    if o.ty != ty {
                        return Err(invalid!("load's `other` has type {}, expected {ty}", o.ty));
                    }
                }
                let mask = check_mask(mask.as_deref(), ptr.ty)?;
                let data = memory::load(&self.mem, s, ptr.ptrs()?, mask, other.as_deref().map(|o| &o.data))?;
                Tensor { ty, data }
            }
            Op::Atomic {
                op, ptr, value, mask, ..
            } => {
                let (ptr, value, mask) = (self.get(*ptr)?, self.get(*value)?, self.get_opt(*mask)?);
                let s = pointee(&ptr)?;
                if ty != ptr.ty.with_elem(Elem::Scalar(s)) || value.ty != ty {
                    return Err(invalid!("{} of {} through {} as {ty}", op.name(), value.ty, ptr.ty));
                }
                let mask = check_mask(mask.as_deref(), ptr.ty)?;
                let data = memory::atomic(&mut self.mem, *op, s, ptr.ptrs()?, mask, &value.data)?;
                Tensor { ty, data }
            }
            Op::AtomicCas {
                ptr, cmp, value, mask, ..
            } => {
                let (ptr, cmp, value) = (self.get(*ptr)?, self.get(*cmp)?, self.get(*value)?);
                let mask = self.get_opt(*mask)?;
                let s = pointee(&ptr)?;
                if ty != ptr.ty.with_elem(Elem::Scalar(s)) || value.ty != ty || cmp.ty != ty {
                    return Err(invalid!(
                        "atomic_cas of {} and {} through {} as {ty}",
                        cmp.ty,
                        value.ty,
                        ptr.ty
                    ));
                }
                let mask = check_mask(mask.as_deref(), ptr.ty)?;
                let data = memory::atomic_cas(&mut self.mem, s, ptr.ptrs()?, mask, &cmp.data, &value.data)?;
                Tensor { ty, data }
            }
            Op::Reduce { op, value, axis } => shape::reduce(*op, &*self.get(*value)?, *axis, ty)?,
            Op::Dot {
                a, b, acc, precision, ..
            } => dot(&*self.get(*a)?, &*self.get(*b)?, &*self.get(*acc)?, *precision, ty)?,
            // ---- gather, sort, histogram (`scan.rs`) ----
            Op::Gather { src, index, axis } => super::scan::gather(&*self.get(*src)?, &*self.get(*index)?, *axis, ty)?,
            Op::Sort {
                value,
                axis,
                descending,
            } => super::scan::sort(&*self.get(*value)?, *axis, *descending, ty)?,
            Op::Histogram { value, num_bins } => super::scan::histogram(&*self.get(*value)?, *num_bins, ty)?,
            Op::ClusterReduce { op, value } => {
                let value = self.get(*value)?;
                match &self.cluster {
                    None => cluster::combine(*op, &[&*value], ty)?,
                    Some(member) => {
                        if value.ty != ty {
                            return Err(invalid!("cluster_reduce of {} as {ty}", value.ty));
                        }
                        member.reduce(*op, &value, self.pid, inst.loc)?
                    }
                }
            }
            // ---- end of gather, sort, histogram ----
            Op::Store { .. }
            | Op::For { .. }
            | Op::If { .. }
            | Op::While { .. }
            | Op::Yield { .. }
            | Op::Scan { .. }
            | Op::ReduceCombine { .. }
            | Op::ClusterReduceCombine { .. }
            | Op::Assert { .. }
            | Op::Print { .. } => {
                unreachable!("handled by the caller")
            }
        };
        Ok(Some(t))
    }

    /// `cluster_reduce_n`: the tuples of the cluster's programs (this one's alone without a
    /// cluster) combined by the region, from rank 0 up.
    fn exec_cluster_combine(&mut self, inst: &'a Inst) -> Result<(), InterpError> {
        let Op::ClusterReduceCombine { values } = &inst.op else {
            return Err(self.at(inst, invalid!("not a cluster reduction")));
        };
        let (region, mine) = self.combine_inputs(inst, values)?;
        let Some(member) = &self.cluster else {
            return self.bind_results(inst, mine);
        };
        let owned = mine.iter().map(|t| (**t).clone()).collect();
        let tuples = member.gather(owned, self.pid, inst.loc).map_err(|f| self.at(inst, f))?;
        let mut tuples = tuples
            .into_iter()
            .map(|t| t.into_iter().map(Rc::new).collect::<Vec<_>>());
        let mut acc = tuples
            .next()
            .ok_or_else(|| self.at(inst, invalid!("a cluster without programs")))?;
        for next in tuples {
            let mut args = acc;
            args.extend(next);
            self.bind_args(&region.args, args).map_err(|f| self.at(inst, f))?;
            acc = self.run_body(region)?;
        }
        self.bind_results(inst, acc)
    }

    // ---- for the ops with combine regions (`scan.rs`) ----
    pub(super) fn fault_at(&self, inst: &Inst, fault: Fault) -> InterpError {
        self.at(inst, fault)
    }
    pub(super) fn value(&self, v: ValueId) -> Result<Rc<Tensor>, Fault> {
        self.get(v)
    }
    pub(super) fn bind_args(&mut self, names: &[ValueId], values: Vec<Rc<Tensor>>) -> Result<(), Fault> {
        self.bind(names, values, "the combine's arguments")
    }
    pub(super) fn run_body(&mut self, region: &'a Region) -> Result<Vec<Rc<Tensor>>, InterpError> {
        self.run_region(region)
    }
    pub(super) fn bind_results(&mut self, inst: &Inst, values: Vec<Rc<Tensor>>) -> Result<(), InterpError> {
        self.bind(&inst.results, values, "the results")
            .map_err(|f| self.at(inst, f))
    }
    // ---- end of the helpers for combine regions ----

    fn exec_for(&mut self, inst: &'a Inst) -> Result<(), InterpError> {
        let Op::For {
            start, end, step, init, ..
        } = &inst.op
        else {
            unreachable!()
        };
        let header = || -> Result<_, Fault> {
            let (start, end, step) = (self.get(*start)?, self.get(*end)?, self.get(*step)?);
            let ty = start.ty;
            let s = ty.scalar_type().filter(|s| s.is_int() && ty.is_scalar());
            let Some(s) = s.filter(|_| end.ty == ty && step.ty == ty) else {
                return Err(invalid!(
                    "for bounds must be integer scalars of one type, got {}, {}, {}",
                    start.ty,
                    end.ty,
                    step.ty
                ));
            };
            // Count in i128, so that no induction variable can overflow.
            let wide = |t: &Tensor| -> i128 {
                let v = t.ints().expect("integer scalar")[0];
                if s.is_unsigned_int() {
                    v as u64 as i128
                } else {
                    v as i128
                }
            };
            let (lo, hi, st) = (wide(&start), wide(&end), wide(&step));
            if st == 0 {
                return Err(Fault {
                    kind: FaultKind::ZeroStep,
                    message: "for loop step is zero".into(),
                });
            }
            let region = inst.regions.first().filter(|r| r.args.len() == init.len() + 1);
            let Some(region) = region else {
                return Err(invalid!("for needs one region with {} arguments", init.len() + 1));
            };
            let carried = init.iter().map(|&v| self.get(v)).collect::<Result<Vec<_>, _>>()?;
            Ok((s, ty, lo, hi, st, region, carried))
        };
        let (s, ty, mut i, end, step, region, mut carried) = header().map_err(|f| self.at(inst, f))?;
        while (step > 0 && i < end) || (step < 0 && i > end) {
            let iv = Rc::new(Tensor {
                ty,
                data: Data::Int(vec![wrap_int(s, i as i64)]),
            });
            let mut args = Vec::with_capacity(carried.len() + 1);
            args.push(iv);
            args.extend(carried);
            self.bind(&region.args, args, "for's loop variables")
                .map_err(|f| self.at(inst, f))?;
            carried = self.run_region(region)?;
            i += step;
        }
        self.bind(&inst.results, carried, "for's results")
            .map_err(|f| self.at(inst, f))
    }

    fn exec_if(&mut self, inst: &'a Inst) -> Result<(), InterpError> {
        let Op::If { cond } = &inst.op else { unreachable!() };
        let cond = self
            .get(*cond)
            .and_then(|c| c.scalar_bool("if's condition"))
            .map_err(|f| self.at(inst, f))?;
        let region = inst.regions.get(if cond { 0 } else { 1 });
        let values = match region {
            Some(region) => self.run_region(region)?,
            // An `if` without an else region has no results.
            None if !cond && inst.regions.len() == 1 => Vec::new(),
            None => return Err(self.at(inst, invalid!("if needs a then and an optional else region"))),
        };
        self.bind(&inst.results, values, "if's results")
            .map_err(|f| self.at(inst, f))
    }

    fn exec_while(&mut self, inst: &'a Inst) -> Result<(), InterpError> {
        let Op::While { init } = &inst.op else { unreachable!() };
        let (Some(before), Some(body)) = (inst.regions.first(), inst.regions.get(1)) else {
            return Err(self.at(inst, invalid!("while needs a condition and a body region")));
        };
        let mut carried = init
            .iter()
            .map(|&v| self.get(v))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|f| self.at(inst, f))?;
        loop {
            self.bind(&before.args, carried.clone(), "while's condition arguments")
                .map_err(|f| self.at(inst, f))?;
            let cond = self.run_region(before)?;
            let go = match cond.as_slice() {
                [c] => c.scalar_bool("while's condition"),
                _ => Err(invalid!("while's condition yields {} values, not one i1", cond.len())),
            };
            if !go.map_err(|f| self.at(inst, f))? {
                break;
            }
            // The body's arguments, when it declares its own, take the same values; otherwise
            // it uses the condition region's arguments, which are bound already.
            if !body.args.is_empty() {
                self.bind(&body.args, carried, "while's body arguments")
                    .map_err(|f| self.at(inst, f))?;
            }
            carried = self.run_region(body)?;
        }
        self.bind(&inst.results, carried, "while's results")
            .map_err(|f| self.at(inst, f))
    }
}

/// The pointee of a pointer block.
fn pointee(ptr: &Tensor) -> Result<ScalarType, Fault> {
    match ptr.ty.elem {
        Elem::Ptr(s) => Ok(s),
        Elem::Scalar(_) => Err(invalid!("expected pointers, got {}", ptr.ty)),
    }
}

/// A mask's booleans, which must have the pointers' shape.
fn check_mask(mask: Option<&Tensor>, ptr_ty: Type) -> Result<Option<&[bool]>, Fault> {
    match mask {
        None => Ok(None),
        Some(m) if m.ty == ptr_ty.with_elem(Elem::Scalar(ScalarType::Bool)) => Ok(Some(m.bools()?)),
        Some(m) => Err(invalid!(
            "the mask has type {}, expected i1 of shape {}",
            m.ty,
            ptr_ty.shape
        )),
    }
}

/// Checks (in debug builds) that an op's result is well formed: the representation fits the
/// type, and integers and floats are normalized to their element type.
#[cfg(debug_assertions)]
fn check_invariants(t: &Tensor) -> Result<(), Fault> {
    use super::tensor::round_float;
    t.check()?;
    let s = t.ty.scalar_type();
    match (&t.data, s) {
        (Data::Int(v), Some(s)) => {
            if let Some(x) = v.iter().find(|&&x| wrap_int(s, x) != x) {
                return Err(invalid!("interpreter bug: {x} is not a normalized {s}"));
            }
        }
        (Data::Float(v), Some(s)) => {
            if let Some(x) = v.iter().find(|&&x| !x.is_nan() && round_float(s, x) != x) {
                return Err(invalid!("interpreter bug: {x} is not a {s}"));
            }
        }
        _ => {}
    }
    Ok(())
}

//! Which of a loop's pipelined loads are 2-D boxes of a tensor, so that the tensor memory
//! accelerator can fetch them (`tma.rs`).
//!
//! A load qualifies when its pointers and mask, as functions of the element's index `(i, j)`
//! in the tile, are exactly a box of a row-major view of one pointer parameter:
//!
//! ```text
//! ptr(i, j)  = param + (y0 + i) * stride + (x0 + j)      (or with the roles of i and j swapped)
//! mask(i, j) = x0 + j < X  and  y0 + i < Y      (each bound optional, and `0 <= x0 + j`,
//!                                               `0 <= y0 + i` allowed beside them)
//! ```
//!
//! where `x0` and `y0` are the same for every element (the box's origin, computed once per
//! iteration from scalars and the loop's trip count) and `stride`, `X` and `Y` are integer
//! parameters (or constants), which the runtime reads at launch to describe the view. The
//! hardware's zero fill outside `X x Y` then equals the masked load with `other = 0`.
//!
//! To see this, values are written as polynomials ([`Poly`]) whose unknowns are scalars the
//! loop does not change (opaque, each its own symbol: parameters, program ids, and what is
//! computed from them by anything but `+ - *`), the loop's trip count (the carried pointer
//! `p` with `p += delta` each iteration is `p0 + trip * delta`), and the element's index
//! along each dimension of the block.
//!
//! One more form is accepted along a dimension, the matmul tutorial's wrap of out-of-range
//! rows: `offs_am = (pid_m * BM + arange(BM)) % M` reads row `(y0 + i) % M`, a real row, where
//! the box would read zeros past `M`. The two differ only in rows `i` with `y0 + i >= M`, and
//! they are the same in the result wherever it is used if those rows reach nothing but
//! elements a store masks off: the load feeds only the `dot` (the pipeline's condition), row
//! `i` of `a` reaches only row `i` of `a @ b` (and column `j` of `b` only its column `j`), and
//! from there the row is followed through the accumulator's loop, element-wise operations
//! and casts to stores whose mask includes `y0 + i < M` along that dimension
//! ([`Lowerer::wrap_reaches_masked_stores_only`]); anything else (a reduction, a reshape, a
//! second `dot`) and the load is not a box.

use super::Lowerer;
use crate::ir::{BinaryOp, CmpOp, Inst, InstId, Op, Region, ValueDef, ValueId};
use crate::thread::LaunchValue;
use crate::types::{Elem, ScalarType};
use std::collections::{HashMap, HashSet};

/// An unknown that one iteration of the loop fixes for the whole block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Sym {
    /// An integer scalar the loop does not change (its register is set before the loop).
    Value(ValueId),
    /// The number of iterations before this one: `(i - start) / step` for loop variable `i`.
    Trip,
}

/// An unknown that varies over the block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Atom {
    /// The element's index along a dimension.
    Lane(u8),
    /// `wraps[id]` along dimension `dim`: `(inner + index) % modulus`.
    Wrap { id: u32, dim: u8 },
}

/// A polynomial in those unknowns (`analysis::poly`).
pub(crate) type Poly = crate::analysis::poly::Poly<Sym, Atom>;
type Term = crate::analysis::poly::Term<Sym, Atom>;

/// What the box proof asks of a polynomial beyond the shared arithmetic.
impl Poly {
    fn has_trip(&self) -> bool {
        self.terms.iter().any(|t| t.symbols.contains(&Sym::Trip))
    }
    /// The single unknown `v` (factor 1), if that is all it is.
    fn as_value(&self) -> Option<ValueId> {
        match self.terms.as_slice() {
            [Term {
                factor: 1,
                symbols,
                atom: None,
            }] => match symbols.as_slice() {
                [Sym::Value(v)] => Some(*v),
                _ => None,
            },
            _ => None,
        }
    }
    /// Renumbers dimensions (after `expand_dims`).
    fn map_dims(&self, f: impl Fn(u8) -> u8) -> Poly {
        self.map_atoms(|a| {
            Some(match a {
                Atom::Lane(d) => Atom::Lane(f(d)),
                Atom::Wrap { id, dim } => Atom::Wrap { id, dim: f(dim) },
            })
        })
    }
}

/// A pointer or an integer as a polynomial, with the pointer parameter it is relative to.
#[derive(Clone, Debug, PartialEq)]
struct Form {
    base: Option<u32>,
    poly: Poly,
}

/// A wrapped index: `(inner + index) % modulus`, `inner` and `modulus` free of atoms.
#[derive(Clone, Debug, PartialEq)]
struct Wrap {
    inner: Poly,
    modulus: Poly,
}

/// What a pipelined load reads, when it is a box (module comment).
#[derive(Clone, Debug)]
pub(crate) struct TmaBox {
    /// The pointer parameter.
    pub param: u32,
    /// The view's extents along `x` and `y` where a mask bounds them (`None`: unmasked, see
    /// `TensorMap::extents`), and its row stride, in elements.
    pub dims: [Option<LaunchValue>; 2],
    pub stride: LaunchValue,
    /// The outer dimensions, innermost first: each one's stride and the box's index along it
    /// (free of atoms).
    pub outer: Vec<(LaunchValue, Poly)>,
    /// The box's origin `(x0, y0)`: free of atoms.
    pub origin: [Poly; 2],
    /// The loop's start and step, for the trip count.
    pub start: Poly,
    pub step: Poly,
}

/// A box of a view, before the loop's part: what [`TmaBox`] holds but the trip count, and
/// the wrapped dimensions still to check.
struct BoxView {
    param: u32,
    dims: [Option<LaunchValue>; 2],
    stride: LaunchValue,
    outer: Vec<(LaunchValue, Poly)>,
    origin: [Poly; 2],
    wrapped: Vec<(u8, Wrap)>,
}

impl BoxView {
    /// The box of a loop whose trip count starts at `start` and goes by `step`.
    fn with_trips(self, start: Poly, step: Poly) -> TmaBox {
        TmaBox {
            param: self.param,
            dims: self.dims,
            stride: self.stride,
            outer: self.outer,
            origin: self.origin,
            start,
            step,
        }
    }
}

/// Polynomial forms of the values a loop's loads use (or, with no loop, a store after
/// every loop: its scalars are all symbols).
pub(crate) struct Affine<'a, 'k> {
    l: &'a Lowerer<'k>,
    loop_inst: Option<InstId>,
    region: Option<&'a Region>,
    wraps: Vec<Wrap>,
    memo: HashMap<ValueId, Option<Form>>,
}

impl<'a, 'k> Affine<'a, 'k> {
    pub fn new(l: &'a Lowerer<'k>, loop_inst: Option<InstId>) -> Affine<'a, 'k> {
        Affine {
            l,
            loop_inst,
            region: loop_inst.map(|i| &l.k.insts[i].regions[0]),
            wraps: Vec::new(),
            memo: HashMap::new(),
        }
    }

    fn inside(&self, v: ValueId) -> bool {
        match self.l.k.values[v].def {
            ValueDef::Param(_) => false,
            ValueDef::Result { inst, .. } | ValueDef::RegionArg { inst, .. } => match self.region {
                Some(region) => Some(inst) == self.loop_inst || self.l.defined_inside(inst, region),
                None => false,
            },
        }
    }

    fn integer(&self, v: ValueId) -> bool {
        matches!(self.l.k.ty(v).elem, Elem::Scalar(s) if s.is_int() && s != ScalarType::Bool)
    }

    fn form(&mut self, v: ValueId) -> Option<Form> {
        if let Some(f) = self.memo.get(&v) {
            return f.clone();
        }
        self.memo.insert(v, None);
        let f = self.compute(v);
        self.memo.insert(v, f.clone());
        f
    }

    fn poly(&mut self, v: ValueId) -> Option<Poly> {
        match self.form(v)? {
            Form { base: None, poly } => Some(poly),
            _ => None,
        }
    }

    fn compute(&mut self, v: ValueId) -> Option<Form> {
        let k = self.l.k;
        let ty = k.ty(v);
        let int = |poly| Some(Form { base: None, poly });
        if self.integer(v) {
            if let Some(c) = self.l.axis[v.index()].constant {
                return int(Poly::constant(c.into()));
            }
        }
        // A scalar the loop does not change and that is not a sum or product: a symbol.
        let opaque = |s: &Self| {
            (ty.shape.rank() == 0 && s.integer(v) && !s.inside(v)).then(|| Form {
                base: None,
                poly: Poly::symbol(Sym::Value(v)),
            })
        };
        match k.values[v].def {
            ValueDef::Param(i) => match ty.elem {
                Elem::Ptr(_) => Some(Form {
                    base: Some(i),
                    poly: Poly::default(),
                }),
                Elem::Scalar(_) => opaque(self),
            },
            ValueDef::RegionArg { inst, region: 0, index } if Some(inst) == self.loop_inst => {
                self.loop_arg(index as usize)
            }
            ValueDef::RegionArg { .. } => None,
            ValueDef::Result { inst, .. } => {
                let op = &k.insts[inst].op;
                match *op {
                    Op::Arange { start, .. } => int(Poly::atom(Atom::Lane(0)).add(&Poly::constant(start as i128))?),
                    Op::Splat { value } | Op::Broadcast { value } => self.form(value),
                    Op::ExpandDims { value, axis } => {
                        let f = self.form(value)?;
                        Some(Form {
                            base: f.base,
                            poly: f.poly.map_dims(|d| if d >= axis { d + 1 } else { d }),
                        })
                    }
                    Op::AddPtr { ptr, offset } => {
                        let p = self.form(ptr)?;
                        let o = self.poly(offset)?;
                        Some(Form {
                            base: p.base,
                            poly: p.poly.add(&o)?,
                        })
                    }
                    Op::Cast { value } if self.integer(v) && self.integer(value) => {
                        // Widening (or same-width) only: the value is unchanged.
                        let (from, to) = (k.elem_scalar(value), k.elem_scalar(v));
                        if from.size_bytes() <= to.size_bytes() {
                            self.form(value).or_else(|| opaque(self))
                        } else {
                            opaque(self)
                        }
                    }
                    Op::Binary { op, lhs, rhs } if self.integer(v) => self
                        .binary(op, lhs, rhs)
                        .map(|poly| Form { base: None, poly })
                        .or_else(|| opaque(self)),
                    _ => opaque(self),
                }
            }
        }
    }

    fn binary(&mut self, op: BinaryOp, lhs: ValueId, rhs: ValueId) -> Option<Poly> {
        match op {
            BinaryOp::Add => self.poly(lhs)?.add(&self.poly(rhs)?),
            BinaryOp::Sub => self.poly(lhs)?.sub(&self.poly(rhs)?),
            BinaryOp::Mul => self.poly(lhs)?.mul(&self.poly(rhs)?),
            BinaryOp::Shl => {
                let s = self.poly(rhs)?.as_constant()?;
                (0..31).contains(&s).then_some(())?;
                self.poly(lhs)?.scale(1 << s)
            }
            BinaryOp::Rem => {
                // `(inner + index) % modulus` along one dimension, the rest uniform.
                let (l, m) = (self.poly(lhs)?, self.poly(rhs)?);
                if m.has_atoms() {
                    return None;
                }
                let mut lane = None;
                let mut inner = Vec::new();
                for t in &l.terms {
                    match t.atom {
                        None => inner.push(t.clone()),
                        Some(Atom::Lane(d)) if t.factor == 1 && t.symbols.is_empty() && lane.is_none() => {
                            lane = Some(d)
                        }
                        Some(_) => return None,
                    }
                }
                let wrap = Wrap {
                    inner: Poly::from_terms(inner)?,
                    modulus: m,
                };
                let id = match self.wraps.iter().position(|w| *w == wrap) {
                    Some(i) => i,
                    None => {
                        self.wraps.push(wrap);
                        self.wraps.len() - 1
                    }
                };
                Some(Poly::atom(Atom::Wrap {
                    id: id as u32,
                    dim: lane?,
                }))
            }
            _ => None,
        }
    }

    /// The loop variable `start + trip * step`, or a carried value `init + trip * delta`
    /// when each iteration yields it plus a `delta` the loop does not change.
    fn loop_arg(&mut self, index: usize) -> Option<Form> {
        let k = self.l.k;
        let (Some(loop_inst), Some(region)) = (self.loop_inst, self.region) else {
            return None;
        };
        let Op::For {
            start, step, ref init, ..
        } = k.insts[loop_inst].op
        else {
            return None;
        };
        let trip = Poly::symbol(Sym::Trip);
        if index == 0 {
            let (s, d) = (self.poly(start)?, self.poly(step)?);
            if s.has_atoms() || d.has_atoms() {
                return None;
            }
            return Some(Form {
                base: None,
                poly: s.add(&trip.mul(&d)?)?,
            });
        }
        let arg = region.args[index];
        let yielded = match region.insts.last().map(|&i| &k.insts[i].op) {
            Some(Op::Yield { values }) => *values.get(index - 1)?,
            _ => return None,
        };
        let ValueDef::Result { inst, .. } = k.values[yielded].def else {
            return None;
        };
        let delta = match k.insts[inst].op {
            Op::AddPtr { ptr, offset } if ptr == arg => offset,
            Op::Binary {
                op: BinaryOp::Add,
                lhs,
                rhs,
            } if lhs == arg || rhs == arg => {
                if lhs == arg {
                    rhs
                } else {
                    lhs
                }
            }
            _ => return None,
        };
        let d = self.poly(delta)?;
        if d.has_trip() {
            return None;
        }
        let f0 = self.form(init[index - 1])?;
        Some(Form {
            base: f0.base,
            poly: f0.poly.add(&trip.mul(&d)?)?,
        })
    }

    /// The conditions `D < 0` whose conjunction `mask` is, as the polynomials `D`.
    fn conjuncts(&mut self, mask: ValueId) -> Option<Vec<Poly>> {
        let k = self.l.k;
        let ValueDef::Result { inst, .. } = k.values[mask].def else {
            return None;
        };
        match k.insts[inst].op {
            Op::Binary {
                op: BinaryOp::And,
                lhs,
                rhs,
            } => {
                let mut c = self.conjuncts(lhs)?;
                c.extend(self.conjuncts(rhs)?);
                Some(c)
            }
            Op::Broadcast { value } | Op::Splat { value } => self.conjuncts(value),
            Op::ExpandDims { value, axis } => Some(
                self.conjuncts(value)?
                    .iter()
                    .map(|p| p.map_dims(|d| if d >= axis { d + 1 } else { d }))
                    .collect(),
            ),
            Op::Compare { op, lhs, rhs } if self.integer(lhs) => {
                let (l, r) = (self.poly(lhs)?, self.poly(rhs)?);
                let one = Poly::constant(1);
                Some(vec![match op {
                    CmpOp::Lt => l.sub(&r)?,
                    CmpOp::Gt => r.sub(&l)?,
                    CmpOp::Le => l.sub(&r)?.sub(&one)?,
                    CmpOp::Ge => r.sub(&l)?.sub(&one)?,
                    _ => return None,
                }])
            }
            _ => None,
        }
    }
}

/// `v` as a value a launch fixes: a constant or an integer parameter.
fn launch_value(l: &Lowerer<'_>, p: &Poly) -> Option<LaunchValue> {
    if let Some(c) = p.as_constant() {
        return i64::try_from(c).ok().filter(|&c| c > 0).map(LaunchValue::Const);
    }
    let v = p.as_value()?;
    match l.k.values[v].def {
        ValueDef::Param(i) => Some(LaunchValue::Param(i)),
        _ => None,
    }
}

impl Lowerer<'_> {
    /// The box load `load` (in the body of `for` loop `loop_inst`) reads, if it is one
    /// (module comment); `contiguous` is the tile dimension its elements run along.
    pub(crate) fn tma_box(&self, loop_inst: InstId, load: &Inst, contiguous: usize) -> Option<TmaBox> {
        let Op::Load { ptr, mask, .. } = load.op else {
            return None;
        };
        let mut cx = Affine::new(self, Some(loop_inst));
        let view = self.box_view(&mut cx, ptr, mask, contiguous)?;
        // A wrap must reach only elements that stores mask off past its modulus.
        for (dim, w) in &view.wrapped {
            if !self.wrap_reaches_masked_stores_only(load.results[0], *dim, &w.inner, &w.modulus, &mut cx) {
                return None;
            }
        }
        let Op::For { start, step, .. } = self.k.insts[loop_inst].op else {
            return None;
        };
        let (start, step) = (cx.poly(start)?, cx.poly(step)?);
        if start.has_atoms() || step.has_atoms() || step.as_constant().is_none_or(|s| s <= 0) {
            return None;
        }
        Some(view.with_trips(start, step))
    }

    /// The box load `load`, outside every loop the copies run in, reads, if it is one
    /// (module comment, with no trip count and no wrapped dimension); `contiguous` is the
    /// tile dimension its elements run along. Its origin's scalars are read where the load
    /// is (`staged`: a warp-specialized loop's producer copies it before the loop).
    pub(crate) fn tma_box_before_loop(&self, load: &Inst, contiguous: usize) -> Option<TmaBox> {
        let Op::Load { ptr, mask, .. } = load.op else {
            return None;
        };
        let view = self.box_outside_loops(ptr, mask, contiguous)?;
        Some(view.with_trips(Poly::constant(0), Poly::constant(1)))
    }

    /// The view and box of an access at `ptr` under `mask` read where it is, outside every
    /// loop the copies run in, if it is one with no wrapped dimension.
    fn box_outside_loops(&self, ptr: ValueId, mask: Option<ValueId>, contiguous: usize) -> Option<BoxView> {
        let mut cx = Affine::new(self, None);
        self.box_view(&mut cx, ptr, mask, contiguous)
            .filter(|view| view.wrapped.is_empty())
    }

    /// The box store `store` writes, if it is one (module comment, with the tile's index
    /// in place of the loop's trip count, and no wrapped dimension); `contiguous` is the
    /// tile dimension its elements run along. For a store outside every loop: the origin's
    /// scalars are read where the store is. Where the target lets a store's box span outer
    /// dimensions (`Target::tma_store_outer`), it may, and a dimension its mask does not
    /// bound takes its extent from the launch, as a load's: the box then writes what the
    /// unmasked store writes.
    pub(crate) fn tma_store_box(&self, store: &Inst, contiguous: usize) -> Option<TmaBox> {
        let Op::Store { ptr, mask, .. } = store.op else {
            return None;
        };
        let view = self.box_outside_loops(ptr, mask, contiguous)?;
        let spans = !view.outer.is_empty() || view.dims.iter().any(Option::is_none);
        if spans && !self.target.tma_store_outer {
            return None;
        }
        Some(view.with_trips(Poly::constant(0), Poly::constant(1)))
    }

    /// The view and box of a load or store at `ptr` under `mask`, without the loop.
    fn box_view(
        &self,
        cx: &mut Affine<'_, '_>,
        ptr: ValueId,
        mask: Option<ValueId>,
        contiguous: usize,
    ) -> Option<BoxView> {
        let f = cx.form(ptr)?;
        let param = f.base?;
        // The view's base must be 16-byte aligned (the specialization says so).
        let elem = self.k.elem_scalar(ptr);
        let divisible = self.axis[self.k.params[param as usize].value.index()].divisibility[0];
        if divisible * (elem.size_bytes() as u64) < 16 {
            return None;
        }
        // One atom term per dimension; the contiguous one with coefficient 1.
        let (mut along, mut uniform) = ([None, None], Vec::new());
        for t in &f.poly.terms {
            let d = match t.atom {
                None => {
                    uniform.push(t.clone());
                    continue;
                }
                Some(Atom::Lane(d)) | Some(Atom::Wrap { dim: d, .. }) => d as usize,
            };
            if d > 1 || along[d].is_some() || t.symbols.contains(&Sym::Trip) {
                return None;
            }
            along[d] = Some(t.clone());
        }
        let (inner, outer) = (along[contiguous].clone()?, along[1 - contiguous].clone()?);
        if inner.factor != 1 || !inner.symbols.is_empty() {
            return None;
        }
        // The row stride: one integer parameter (16-byte multiples: divisible by 16).
        let stride_value = match (outer.factor, outer.symbols.as_slice()) {
            (1, [Sym::Value(s)]) => *s,
            _ => return None,
        };
        let ValueDef::Param(stride_param) = self.k.values[stride_value].def else {
            return None;
        };
        if self.axis[stride_value.index()].divisibility[0] * (elem.size_bytes() as u64) % 16 != 0 {
            return None;
        }
        // The uniform part: the terms with the stride are rows (`y`); where the target lets
        // boxes span outer dimensions, a term `c * s` with `s` another integer parameter
        // (16-byte multiples) and `c` a product of other scalars is index `c` of an outer
        // dimension of stride `s`; the rest are columns.
        let (mut y, mut x) = (Vec::new(), Vec::new());
        let mut outer_terms: Vec<(ValueId, Vec<Term>)> = Vec::new();
        for mut t in uniform {
            if let Some(at) = t.symbols.iter().position(|&s| s == Sym::Value(stride_value)) {
                t.symbols.remove(at);
                y.push(t);
            } else if let Some(s) = self.target.tma_outer.then(|| self.outer_stride(&t, elem)).flatten() {
                let at = t
                    .symbols
                    .iter()
                    .position(|&x| x == Sym::Value(s))
                    .expect("found in the term");
                t.symbols.remove(at);
                match outer_terms.iter_mut().find(|(v, _)| *v == s) {
                    Some((_, terms)) => terms.push(t),
                    None => outer_terms.push((s, vec![t])),
                }
            } else {
                x.push(t);
            }
        }
        // Innermost first: a kernel written as Triton's passes strides outermost first.
        outer_terms.sort_by_key(|&(v, _)| std::cmp::Reverse(v));
        if outer_terms.len() > 3 {
            return None;
        }
        let mut outer_dims = Vec::new();
        for (v, terms) in outer_terms {
            let ValueDef::Param(p) = self.k.values[v].def else {
                return None;
            };
            outer_dims.push((LaunchValue::Param(p), Poly::from_terms(terms)?));
        }
        let mut origin = [Poly::from_terms(x)?, Poly::from_terms(y)?];
        let mut dims: [Option<LaunchValue>; 2] = [None, None];
        // Along a wrapped dimension, the origin is the wrap's and the extent its modulus.
        let mut wrapped = Vec::new();
        for (axis, t) in [(0, &inner), (1, &outer)] {
            if let Some(Atom::Wrap { id, dim }) = t.atom {
                let w = &cx.wraps[id as usize];
                if !origin[axis].terms.is_empty() {
                    return None;
                }
                origin[axis] = w.inner.clone();
                dims[axis] = Some(launch_value(self, &w.modulus)?);
                wrapped.push((dim, w.clone()));
            }
        }
        // Every other dimension is bounded by the mask, and the mask is nothing else.
        let coord = |axis: usize, dim: u8| origin[axis].add(&Poly::atom(Atom::Lane(dim)));
        let inner_dim = contiguous as u8;
        let conjuncts = match mask {
            Some(m) => cx.conjuncts(m)?,
            None => Vec::new(),
        };
        for c in conjuncts {
            // `coord >= 0` (`D = -coord - 1`): the hardware fills what lies before the view's
            // start with zeros too (a box's coordinates are signed), as the rotated
            // attention walk's first block of values, one block before its start, needs.
            let at_least_zero = [(0, inner_dim), (1, 1 - inner_dim)]
                .into_iter()
                .any(|(axis, dim)| coord(axis, dim).and_then(|p| p.add(&c)).and_then(|p| p.as_constant()) == Some(-1));
            if at_least_zero {
                continue;
            }
            let mut matched = false;
            for (axis, dim) in [(0, inner_dim), (1, 1 - inner_dim)] {
                if dims[axis].is_some() {
                    continue;
                }
                // D = coord - E, so E = coord - D.
                let e = coord(axis, dim)?.sub(&c)?;
                if e.has_atoms() {
                    continue;
                }
                dims[axis] = Some(launch_value(self, &e)?);
                matched = true;
                break;
            }
            if !matched {
                return None;
            }
        }
        // An unmasked dimension: where the target allows, its extent is the launch's
        // (`TensorMap::extents`); along `x` only for a box at column 0 (which the launch then
        // checks lies within a row).
        if !self.target.tma_outer && dims.iter().any(Option::is_none) {
            return None;
        }
        if dims[0].is_none() && !origin[0].terms.is_empty() {
            return None;
        }
        // The hardware starts a box's rows on 16-byte boundaries: `x0` must be a multiple
        // of 16 bytes whatever the scalars are.
        if self.divisibility(&origin[0]) * (elem.size_bytes() as u64) % 16 != 0 {
            return None;
        }
        Some(BoxView {
            param,
            dims,
            stride: LaunchValue::Param(stride_param),
            outer: outer_dims,
            origin,
            wrapped,
        })
    }

    /// The integer parameter that is the stride of an outer dimension in uniform term `t`
    /// (a box's offset `c * s`): its only parameter symbol, whose bytes are a multiple of 16,
    /// beside at least one other symbol and no loop trip count.
    fn outer_stride(&self, t: &Term, elem: ScalarType) -> Option<ValueId> {
        if t.atom.is_some() || t.symbols.contains(&Sym::Trip) || t.symbols.len() < 2 {
            return None;
        }
        let params: Vec<ValueId> = t
            .symbols
            .iter()
            .filter_map(|s| match *s {
                Sym::Value(v) if matches!(self.k.values[v].def, ValueDef::Param(_)) => Some(v),
                _ => None,
            })
            .collect();
        let [s] = params[..] else {
            return None;
        };
        (self.axis[s.index()].divisibility[0] * (elem.size_bytes() as u64) % 16 == 0).then_some(s)
    }

    /// The largest power of two that surely divides `p` (free of atoms).
    fn divisibility(&self, p: &Poly) -> u64 {
        let pow2 = |v: i128| {
            if v == 0 {
                1 << 30
            } else {
                1u64 << v.unsigned_abs().trailing_zeros().min(30)
            }
        };
        p.terms
            .iter()
            .map(|t| {
                t.symbols.iter().fold(pow2(t.factor), |d, s| match s {
                    Sym::Value(v) => d.saturating_mul(self.axis[v.index()].divisibility[0]),
                    Sym::Trip => d,
                })
            })
            .min()
            .unwrap_or(1 << 30)
    }

    /// Whether the elements of loaded tile `value` along `dim` whose index `inner + i` is
    /// `modulus` or more reach only stores that mask them off (module comment).
    fn wrap_reaches_masked_stores_only(
        &self,
        value: ValueId,
        dim: u8,
        inner: &Poly,
        modulus: &Poly,
        cx: &mut Affine<'_, '_>,
    ) -> bool {
        // The load feeds one `dot` (the pipeline checked): as `a`, its rows are the result's
        // rows; as `b`, its columns the result's columns. Its other dimension is K.
        let Some((dot, _)) = self.uses(value).into_iter().next() else {
            return false;
        };
        let Op::Dot { a, b, acc, .. } = self.k.insts[dot].op else {
            return false;
        };
        let out_dim = match (value == a, value == b, dim) {
            (true, false, 0) => 0,
            (false, true, 1) => 1,
            _ => return false,
        };
        if acc == value {
            return false;
        }
        let bound = Poly::atom(Atom::Lane(out_dim)).add(inner).and_then(|p| p.sub(modulus));
        let Some(bound) = bound else {
            return false;
        };
        let mut seen = HashSet::new();
        let mut work = vec![self.k.insts[dot].results[0]];
        while let Some(v) = work.pop() {
            if !seen.insert(v) {
                continue;
            }
            for (user, _) in self.uses(v) {
                let inst = &self.k.insts[user];
                match inst.op {
                    Op::Dot { acc, a, b, .. } if acc == v && a != v && b != v => work.push(inst.results[0]),
                    Op::Unary { .. }
                    | Op::Binary { .. }
                    | Op::Select { .. }
                    | Op::Fma { .. }
                    | Op::BytePerm { .. }
                    | Op::Rounded { .. }
                    | Op::Cast { .. }
                    | Op::Bitcast { .. }
                    | Op::Compare { .. } => {
                        if self.k.ty(inst.results[0]).shape != self.k.ty(v).shape {
                            return false;
                        }
                        work.push(inst.results[0]);
                    }
                    Op::Yield { ref values } => {
                        let Some(i) = values.iter().position(|&x| x == v) else {
                            return false;
                        };
                        let Some(owner) = self.yield_owner(user) else {
                            return false;
                        };
                        let owner = &self.k.insts[owner];
                        if !matches!(owner.op, Op::For { .. }) {
                            return false;
                        }
                        work.push(owner.results[i]);
                        work.push(owner.regions[0].args[i + 1]);
                    }
                    Op::Store { value, ptr, mask } if value == v && ptr != v && mask != Some(v) => {
                        let Some(m) = mask else {
                            return false;
                        };
                        match cx.conjuncts(m) {
                            Some(c) if c.contains(&bound) => {}
                            _ => return false,
                        }
                    }
                    _ => return false,
                }
            }
        }
        true
    }

    /// The instructions that use `v`, with the operand position.
    fn uses(&self, v: ValueId) -> Vec<(InstId, usize)> {
        self.k
            .insts
            .iter()
            .flat_map(|(id, i)| {
                i.op.operands()
                    .into_iter()
                    .enumerate()
                    .filter(move |&(_, o)| o == v)
                    .map(move |(at, _)| (id, at))
            })
            .collect()
    }

    /// The instruction whose region ends with yield `y`.
    fn yield_owner(&self, y: InstId) -> Option<InstId> {
        self.k
            .insts
            .iter()
            .find(|(_, i)| i.regions.iter().any(|r| r.insts.last() == Some(&y)))
            .map(|(id, _)| id)
    }
}

//! Extent analysis: the largest element each unmasked load, store or atomic of a kernel
//! touches, as a function of a launch (its grid and integer arguments), so that a launch
//! with a buffer too small for it is an error before anything runs.
//!
//! [`ExtentPlan::new`] runs once per kernel. For each access it can describe, it keeps the
//! element offset as a polynomial `Σ factor · Π symbols · atom`, where the symbols are the
//! grid's size and the kernel's integer scalar arguments (one value per launch) and the atom
//! is a program id or the index along one dimension of the block (ranging within a launch).
//! [`ExtentPlan::check`] evaluates it for a launch: a product and a comparison per term.
//!
//! Only exact facts are kept, so an error is never false:
//! - accesses in the kernel's top-level region without a mask; those in loops and branches
//!   may not run, and masked ones touch only what their mask allows;
//! - offsets built from program ids, `num_programs`, aranges, integer constants and integer
//!   scalar arguments, through splats, broadcasts, expand_dims and permutes, by add, sub,
//!   mul and shift left by a constant; anything else (a loaded value, a reduction, a
//!   division, a select, a loop's result) leaves the access out.
//!
//! The atoms range over whole intervals independently of each other (every program runs
//! every element of its block), so the largest value of such a polynomial is attained, not
//! merely a bound. Integer arithmetic wraps on the device, but add, sub, mul and shift left
//! wrap consistently (they are exact modulo 2^bits), so the device computes the exact value
//! whenever that value fits the offset's type. The plan checks this for each offset and
//! before each widening cast (where a wrapped value would be extended), and says nothing
//! about an access where it does not hold.

use crate::ir::{BinaryOp, Kernel, Literal, Op, SourceLoc, ValueId};
use crate::types::{Elem, ScalarType};

/// A value that one launch fixes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Symbol {
    /// The integer scalar argument of this parameter index.
    Arg(u32),
    /// The grid's size along an axis.
    NumPrograms(u8),
}

/// A value that ranges within one launch, from 0 to its count minus one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Atom {
    /// The program id along an axis (count: the grid's size along it).
    ProgramId(u8),
    /// The index along a dimension of the block (count: that dimension's size).
    Lane(u8),
}

type Term = super::poly::Term<Symbol, Atom>;
type Poly = super::poly::Poly<Symbol, Atom>;

impl Poly {
    /// The same polynomial with block dimension `d` renamed `f(d)` (`None`: the dimension
    /// is gone, which only happens for dimensions of size 1, whose index is 0).
    fn map_lanes(&self, f: impl Fn(u8) -> Option<u8>) -> Poly {
        self.map_atoms(|a| match a {
            Atom::Lane(d) => f(d).map(Atom::Lane),
            other => Some(other),
        })
    }

    fn has_lanes(&self) -> bool {
        self.terms.iter().any(|t| matches!(t.atom, Some(Atom::Lane(_))))
    }
}

/// A value whose exact range must fit `ty` for the device to compute the exact value.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Check {
    poly: Poly,
    /// The shape of the checked value (the counts of its lanes).
    dims: Vec<u32>,
    ty: ScalarType,
}

/// What the analysis knows of a value.
#[derive(Clone, Debug)]
enum Form {
    /// An integer (scalar or block).
    Int { poly: Poly, checks: Vec<Check> },
    /// An element offset from a pointer parameter.
    Ptr {
        param: u32,
        offset: Poly,
        checks: Vec<Check>,
    },
}

impl Form {
    fn int(poly: Poly) -> Form {
        Form::Int { poly, checks: vec![] }
    }
    fn map_lanes(&self, f: impl Fn(u8) -> Option<u8>) -> Form {
        match self {
            Form::Int { poly, checks } => Form::Int {
                poly: poly.map_lanes(f),
                checks: checks.clone(),
            },
            Form::Ptr { param, offset, checks } => Form::Ptr {
                param: *param,
                offset: offset.map_lanes(f),
                checks: checks.clone(),
            },
        }
    }
}

fn merge_checks(a: &[Check], b: &[Check]) -> Vec<Check> {
    let mut all = a.to_vec();
    for c in b {
        if !all.contains(c) {
            all.push(c.clone());
        }
    }
    all
}

/// One unmasked global access whose offset the plan describes.
#[derive(Clone, Debug)]
struct Access {
    op: &'static str,
    loc: SourceLoc,
    param: u32,
    offset: Poly,
    dims: Vec<u32>,
    checks: Vec<Check>,
}

/// The accesses of a kernel whose extent a launch determines; see the module's
/// documentation. Build it once per kernel; [`ExtentPlan::check`] is cheap.
#[derive(Clone, Debug, Default)]
pub struct ExtentPlan {
    accesses: Vec<Access>,
}

/// A launch's values, as [`ExtentPlan::check`] needs them.
#[derive(Clone, Copy, Debug)]
pub struct LaunchExtent<'a> {
    /// Programs along x, y and z.
    pub grid: [u32; 3],
    /// Per parameter: the integer value of a scalar argument (`None` for other arguments).
    pub ints: &'a [Option<i128>],
    /// Per parameter: the length in elements of the buffer a pointer argument points to
    /// the start of (`None` for other arguments).
    pub buffer_lens: &'a [Option<u64>],
}

/// An access that goes outside its buffer in a launch: past the end, or before the start
/// (a negative element offset).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overrun {
    /// The op, as [`Op::name`].
    pub op: &'static str,
    /// Where the kernel's author wrote it.
    pub loc: SourceLoc,
    /// The index of its pointer parameter.
    pub param: u32,
    /// The smallest element index it touches (negative: before the buffer's start).
    pub first: i128,
    /// The largest element index it touches.
    pub last: i128,
    /// The buffer's length in elements.
    pub len: u64,
}

impl Overrun {
    /// Elements the buffer needs: the largest index touched plus one.
    pub fn needed(&self) -> u128 {
        self.last.max(-1).saturating_add(1) as u128
    }
    /// Whether the access reaches before the buffer's start.
    pub fn before_start(&self) -> bool {
        self.first < 0
    }
}

impl ExtentPlan {
    /// Finds the kernel's unmasked top-level accesses and the polynomials of their offsets.
    /// The kernel must be well formed ([`crate::verify::verify`]).
    pub fn new(kernel: &Kernel) -> ExtentPlan {
        let mut forms: Vec<Option<Form>> = vec![None; kernel.values.len()];
        for (i, p) in kernel.params.iter().enumerate() {
            forms[p.value.index()] = match p.ty.elem {
                Elem::Ptr(_) => Some(Form::Ptr {
                    param: i as u32,
                    offset: Poly::default(),
                    checks: vec![],
                }),
                Elem::Scalar(s) if s.is_int() => Some(Form::int(Poly::symbol(Symbol::Arg(i as u32)))),
                Elem::Scalar(_) => None,
            };
        }
        let mut accesses = Vec::new();
        // Only the top level: every program runs each of its instructions exactly once.
        // Values defined in nested regions stay unknown, and so do the results of `for`,
        // `if` and `while`.
        for &id in &kernel.body.insts {
            let inst = &kernel.insts[id];
            if let Some(ptr) = unmasked_pointer(&inst.op) {
                if let Some(Form::Ptr { param, offset, checks }) = &forms[ptr.index()] {
                    accesses.push(Access {
                        op: inst.op.name(),
                        loc: inst.loc,
                        param: *param,
                        offset: offset.clone(),
                        dims: kernel.ty(ptr).shape.dims().to_vec(),
                        checks: checks.clone(),
                    });
                }
            }
            if let [result] = inst.results[..] {
                if inst.regions.is_empty() {
                    forms[result.index()] = form_of(kernel, &inst.op, result, &forms);
                }
            }
        }
        ExtentPlan { accesses }
    }

    /// Whether the plan describes no access (a launch then has nothing to check).
    pub fn is_empty(&self) -> bool {
        self.accesses.is_empty()
    }

    /// The first described access that touches an element at or past the end of its
    /// buffer, or before its start, in this launch; `None` when every one stays inside (or cannot be evaluated:
    /// an argument missing, a value that would wrap on the device).
    pub fn check(&self, launch: &LaunchExtent<'_>) -> Option<Overrun> {
        self.accesses.iter().find_map(|a| {
            let len = (*launch.buffer_lens.get(a.param as usize)?)?;
            for c in &a.checks {
                let (lo, hi) = range(&c.poly, &c.dims, launch)?;
                let (min, max) = int_range(c.ty);
                if lo < min || hi > max {
                    return None;
                }
            }
            let (lo, hi) = range(&a.offset, &a.dims, launch)?;
            (lo < 0 || hi >= len as i128).then_some(Overrun {
                op: a.op,
                loc: a.loc,
                param: a.param,
                first: lo,
                last: hi,
                len,
            })
        })
    }
}

/// The pointer operand of a load, store or atomic without a mask.
fn unmasked_pointer(op: &Op) -> Option<ValueId> {
    match op {
        Op::Load { ptr, mask: None, .. }
        | Op::Store { ptr, mask: None, .. }
        | Op::Atomic { ptr, mask: None, .. }
        | Op::AtomicCas { ptr, mask: None, .. } => Some(*ptr),
        _ => None,
    }
}

/// The form of an instruction's single result, from its operands' forms.
fn form_of(k: &Kernel, op: &Op, result: ValueId, forms: &[Option<Form>]) -> Option<Form> {
    let ty = k.ty(result);
    let get = |v: ValueId| forms[v.index()].as_ref();
    let int_result = ty.scalar_type().is_some_and(|s| s.is_int());
    match op {
        Op::ProgramId { axis } => Some(Form::int(Poly::atom(Atom::ProgramId(*axis)))),
        Op::NumPrograms { axis } => Some(Form::int(Poly::symbol(Symbol::NumPrograms(*axis)))),
        Op::Constant { value: Literal::Int(c) } if int_result => {
            // The literal holds the type's bits; an unsigned one may arrive sign-extended
            // (a u64 above i64::MAX always does): its value is the bits read unsigned.
            let s = ty.scalar_type()?;
            let value = if s.is_unsigned_int() {
                *c as i128 & ((1i128 << s.bits()) - 1)
            } else {
                *c as i128
            };
            Some(Form::int(Poly::constant(value)))
        }
        Op::Arange { start, end } => {
            let lanes = if end - start > 1 {
                Poly::atom(Atom::Lane(0))
            } else {
                Poly::default()
            };
            Some(Form::int(lanes.add(&Poly::constant(*start as i128))?))
        }
        // A scalar has no lanes; a size-1 dimension has none either (its index is 0).
        Op::Splat { value } | Op::Broadcast { value } => get(*value).cloned(),
        Op::ExpandDims { value, axis } => Some(get(*value)?.map_lanes(|d| Some(if d < *axis { d } else { d + 1 }))),
        Op::Permute { value, perm } => {
            Some(get(*value)?.map_lanes(|d| perm.iter().position(|&p| p == d).map(|i| i as u8)))
        }
        Op::Reshape { value } => match get(*value)? {
            // Reshaping moves elements between dimensions; only uniform values are kept.
            Form::Int { poly, .. } | Form::Ptr { offset: poly, .. } if poly.has_lanes() => None,
            f => Some(f.clone()),
        },
        Op::Binary { op, lhs, rhs } if int_result => {
            let (Some(Form::Int { poly: a, checks: ca }), Some(Form::Int { poly: b, checks: cb })) =
                (get(*lhs), get(*rhs))
            else {
                return None;
            };
            let poly = match op {
                BinaryOp::Add => a.add(b)?,
                BinaryOp::Sub => a.sub(b)?,
                BinaryOp::Mul => a.mul(b)?,
                BinaryOp::Shl => {
                    // Only by a constant amount below the width: a larger one gives 0 or
                    // the sign, which is not a product.
                    let [Term {
                        factor,
                        symbols,
                        atom: None,
                    }] = &b.terms[..]
                    else {
                        return None;
                    };
                    let bits = ty.scalar_type()?.bits() as i128;
                    if !symbols.is_empty() || !(0..bits).contains(factor) {
                        return None;
                    }
                    a.scale(1i128 << *factor)?
                }
                _ => return None,
            };
            Some(Form::Int {
                poly,
                checks: merge_checks(ca, cb),
            })
        }
        Op::Cast { value } if int_result => {
            let from = k.ty(*value).scalar_type().filter(|s| s.is_int())?;
            let to = ty.scalar_type()?;
            let Some(Form::Int { poly, checks }) = get(*value) else {
                return None;
            };
            let mut checks = checks.clone();
            // A narrowing or same-width cast keeps the value modulo 2^bits; a widening one
            // extends the wrapped value, which is the exact one only if that fits `from`.
            if to.bits() > from.bits() {
                let check = Check {
                    poly: poly.clone(),
                    dims: k.ty(*value).shape.dims().to_vec(),
                    ty: from,
                };
                checks = merge_checks(&checks, &[check]);
            }
            Some(Form::Int {
                poly: poly.clone(),
                checks,
            })
        }
        Op::AddPtr { ptr, offset } => {
            let (
                Some(Form::Ptr {
                    param,
                    offset: base,
                    checks: cp,
                }),
                Some(Form::Int { poly, checks: co }),
            ) = (get(*ptr), get(*offset))
            else {
                return None;
            };
            let check = Check {
                poly: poly.clone(),
                dims: k.ty(*offset).shape.dims().to_vec(),
                ty: k.ty(*offset).scalar_type()?,
            };
            let checks = merge_checks(&merge_checks(cp, co), &[check]);
            Some(Form::Ptr {
                param: *param,
                offset: base.add(poly)?,
                checks,
            })
        }
        _ => None,
    }
}

/// The smallest and largest values of `poly` over a launch, for a value of shape `dims`;
/// `None` when a symbol has no value or the arithmetic overflows.
fn range(poly: &Poly, dims: &[u32], launch: &LaunchExtent<'_>) -> Option<(i128, i128)> {
    let (mut lo, mut hi) = (0i128, 0i128);
    for t in &poly.terms {
        let mut c = t.factor;
        for s in &t.symbols {
            let v = match *s {
                Symbol::Arg(i) => (*launch.ints.get(i as usize)?)?,
                Symbol::NumPrograms(a) => launch.grid[a as usize] as i128,
            };
            c = c.checked_mul(v)?;
        }
        let count = match t.atom {
            None => 1,
            Some(Atom::ProgramId(a)) => launch.grid[a as usize],
            Some(Atom::Lane(d)) => *dims.get(d as usize)?,
        };
        // An atom ranges over 0..count; with no program or element, nothing is accessed.
        let top = (count as i128).checked_sub(1).filter(|&t| t >= 0)?;
        let (a, b) = match t.atom {
            None => (c, c),
            Some(_) => (0, c.checked_mul(top)?),
        };
        lo = lo.checked_add(a.min(b))?;
        hi = hi.checked_add(a.max(b))?;
    }
    Some((lo, hi))
}

/// The values of an integer type.
fn int_range(s: ScalarType) -> (i128, i128) {
    let bits = s.bits();
    if s.is_signed_int() {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    }
}

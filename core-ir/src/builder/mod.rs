//! The kernel language: Rust code that builds block IR, reading close to `triton.language`.
//!
//! ```
//! use rutile_ir::{Kernel, ScalarType::F32};
//! let block = 1024; // a meta-parameter: an ordinary Rust value
//! let kernel = Kernel::build("add", |k| {
//!     let (x, y, z, n) = (k.arg_ptr("x", F32), k.arg_ptr("y", F32), k.arg_ptr("z", F32), k.arg_i32("n"));
//!     let offsets = k.program_id(0) * block + k.arange(0, block);
//!     let mask = offsets.lt(n);
//!     let sum = k.load_masked(x + offsets, mask, 0.0) + k.load_masked(y + offsets, mask, 0.0);
//!     k.store_masked(z + offsets, sum, mask);
//! })
//! .unwrap();
//! assert_eq!(kernel.params.len(), 4);
//! ```
//!
//! Every method checks its op as it builds it. A wrong op never panics: the builder records
//! a [`Diagnostic`] naming the op, the caller's line and the reason,
//! returns a placeholder value so that building can go on, and [`Kernel::build`] returns all
//! the errors. Ops whose operands came from a failed op fail silently, so one mistake gives
//! one message.

mod bessel;
mod bessel_jy;
mod bessel_n;
mod block_ptr;
mod byte_perm;
mod control;
mod debug;
mod dot_scaled;
mod erfc;
mod erfinv;
mod exp_log;
mod exponents;
mod f64_bessel_i;
mod f64_bessel_jy;
mod f64_bessel_n;
mod f64_erf;
mod f64_exp_log;
mod f64_gamma;
mod f64_inverse_trig;
mod f64_math;
mod f64_normal;
mod f64_pow;
mod f64_roots;
mod f64_trig;
mod float_class;
mod gamma;
mod hints;
mod in_f32;
mod integer_math;
mod inverse_trig;
mod join;
mod math;
mod normal;
mod operand;
mod ops;
mod overload;
mod random;
mod reduce_pi;
mod roots;
mod rounded;
mod scan;
mod sincos;
mod sinpi;
mod standard;
mod tan;

pub use block_ptr::{BlockPtr, Indices, Padding, TensorDescriptor};
pub use dot_scaled::{DotScaledOptions, Microscaled, MxFormat, MX_BLOCK};
pub use hints::HintNumbers;
pub use operand::Operand;
pub use random::{PHILOX_KEY_A, PHILOX_KEY_B, PHILOX_ROUNDS, PHILOX_ROUND_A, PHILOX_ROUND_B};

use crate::arena::Arena;
use crate::error::{BuildError, Diagnostic};
use crate::ir::{Inst, InstId, Kernel, Op, Param, Region, SourceLoc, ValueData, ValueDef, ValueId};
use crate::types::Type;
use std::cell::RefCell;
use std::collections::HashSet;

/// Builds one kernel. Values made by it ([`Value`]) borrow it, so that operators work on them.
pub struct KernelBuilder {
    state: RefCell<State>,
}

/// A value of the kernel being built: a scalar or block of numbers or pointers.
///
/// Cheap to copy. Arithmetic operators, comparisons (`lt`, `eq`, ...) and math (`exp`,
/// `sqrt`, ...) build new values; see [`KernelBuilder`] for loads, stores and control flow.
#[derive(Clone, Copy)]
pub struct Value<'b> {
    pub(crate) builder: &'b KernelBuilder,
    pub(crate) id: ValueId,
}

impl std::fmt::Debug for Value<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "%{} : {}", self.id.index(), self.ty())
    }
}

struct State {
    name: String,
    params: Vec<Param>,
    values: Arena<ValueData>,
    insts: Arena<Inst>,
    /// The regions being built, innermost last; the first is the kernel body, which stays
    /// open until `finish` (every other region is closed by the method that opened it), so
    /// `open.last()` always exists.
    open: Vec<OpenRegion>,
    /// For each value, the region (by `RegionKey`) it was defined in.
    value_scope: Vec<u32>,
    /// Region keys that are still open (a value is visible if its scope is among them).
    next_key: u32,
    poisoned: HashSet<ValueId>,
    diagnostics: Vec<Diagnostic>,
    /// The promises made so far (see `hints`).
    hints: Vec<crate::ir::AxisHint>,
}

struct OpenRegion {
    key: u32,
    region: Region,
}

impl Kernel {
    /// Builds a kernel: `body` declares the parameters and ops through the builder.
    /// Meta-parameters are whatever the closure captures.
    pub fn build(name: &str, body: impl FnOnce(&KernelBuilder)) -> Result<Kernel, BuildError> {
        let builder = KernelBuilder::new(name);
        body(&builder);
        builder.finish()
    }
}

impl KernelBuilder {
    /// A builder for an empty kernel; prefer [`Kernel::build`].
    pub fn new(name: &str) -> KernelBuilder {
        KernelBuilder {
            state: RefCell::new(State {
                name: name.to_string(),
                params: Vec::new(),
                values: Arena::new(),
                insts: Arena::new(),
                open: vec![OpenRegion {
                    key: 0,
                    region: Region::default(),
                }],
                value_scope: Vec::new(),
                next_key: 1,
                poisoned: HashSet::new(),
                diagnostics: Vec::new(),
                hints: Vec::new(),
            }),
        }
    }

    /// The built kernel, checked once more by the verifier, or every error met.
    pub fn finish(self) -> Result<Kernel, BuildError> {
        let state = self.state.into_inner();
        if !state.diagnostics.is_empty() {
            return Err(BuildError {
                kernel: state.name,
                diagnostics: state.diagnostics,
            });
        }
        let mut open = state.open;
        assert_eq!(open.len(), 1, "regions are closed by the closures that opened them");
        let kernel = Kernel {
            name: state.name,
            params: state.params,
            values: state.values,
            insts: state.insts,
            body: open.pop().unwrap().region,
            hints: state.hints,
        };
        crate::verify::verify(&kernel)?;
        Ok(kernel)
    }

    /// Declares a parameter of the kernel (a pointer or a scalar), in order.
    #[track_caller]
    pub fn arg(&self, name: &str, ty: Type) -> Value<'_> {
        let loc = SourceLoc::caller();
        let mut s = self.state.borrow_mut();
        let index = s.params.len() as u32;
        let value = s.new_value(ty, ValueDef::Param(index), 0);
        let problem = if !ty.is_scalar() {
            Some(format!("parameters are scalars or pointers, got {ty}"))
        } else if name.is_empty() || s.params.iter().any(|p| p.name == name) {
            Some(format!("parameter name `{name}` is empty or already used"))
        } else {
            None
        };
        s.params.push(Param {
            name: name.to_string(),
            ty,
            value,
        });
        if let Some(message) = problem {
            s.diagnostics.push(Diagnostic {
                op: "arg".into(),
                loc,
                message,
            });
            s.poisoned.insert(value);
        }
        Value {
            builder: self,
            id: value,
        }
    }

    fn value(&self, id: ValueId) -> Value<'_> {
        Value { builder: self, id }
    }

    pub(crate) fn ty_of(&self, id: ValueId) -> Type {
        self.state.borrow().values[id].ty
    }

    pub(crate) fn is_poisoned(&self, id: ValueId) -> bool {
        self.state.borrow().poisoned.contains(&id)
    }

    /// Records an error and returns a placeholder of type `ty` (when known).
    pub(crate) fn fail(&self, op: &str, loc: SourceLoc, message: String, ty: Type) -> Value<'_> {
        let mut s = self.state.borrow_mut();
        s.diagnostics.push(Diagnostic {
            op: op.to_string(),
            loc,
            message,
        });
        let v = s.poison(ty);
        self.value(v)
    }

    /// `v` as a value of this builder. A value made by another builder (captured from an
    /// enclosing `Kernel::build`, say) indexes that builder's arenas, not this one's: it is
    /// an error, and becomes a placeholder of its type.
    pub(crate) fn adopt(&self, op: &str, v: Value<'_>, loc: SourceLoc) -> Value<'_> {
        if std::ptr::eq(v.builder, self) {
            return self.value(v.id);
        }
        let other = v.builder.state.try_borrow().map(|s| s.name.clone()).unwrap_or_default();
        let message = format!(
            "operand %{} belongs to kernel `{other}`, not to the kernel being built; a value \
             cannot be used in another kernel",
            v.id.index()
        );
        self.fail(op, loc, message, v.ty())
    }

    /// [`adopt`](Self::adopt) for an operand that may be a literal.
    pub(crate) fn adopt_operand(&self, op: &str, a: Operand<'_>, loc: SourceLoc) -> Operand<'_> {
        match a {
            Operand::Value(v) => Operand::Value(self.adopt(op, v, loc)),
            Operand::Int(i) => Operand::Int(i),
            Operand::Float(x) => Operand::Float(x),
            Operand::Bool(b) => Operand::Bool(b),
        }
    }

    /// A placeholder for an op whose operand already failed (no new message).
    pub(crate) fn poison(&self, ty: Type) -> Value<'_> {
        let v = self.state.borrow_mut().poison(ty);
        self.value(v)
    }

    /// Checks that each operand is visible here and not from a failed op. `Err(())` means
    /// the op must fail: an error has been recorded if an operand is out of scope; a
    /// poisoned operand fails without one.
    pub(crate) fn check_operands(&self, op: &str, loc: SourceLoc, operands: &[ValueId]) -> Result<(), ()> {
        let mut s = self.state.borrow_mut();
        if operands.iter().any(|v| s.poisoned.contains(v)) {
            return Err(());
        }
        for &v in operands {
            let scope = s.value_scope[v.index()];
            if !s.open.iter().any(|r| r.key == scope) {
                let message = format!(
                    "operand %{} was defined inside a loop or branch body that has ended; \
                     pass it out through the body's results",
                    v.index()
                );
                s.diagnostics.push(Diagnostic {
                    op: op.to_string(),
                    loc,
                    message,
                });
                return Err(());
            }
        }
        Ok(())
    }

    /// Checks `op` with the typing rules and appends it to the current region.
    /// Returns its results, or placeholders after recording the error.
    pub(crate) fn emit(&self, op: Op, hint: Option<Type>, loc: SourceLoc) -> Vec<Value<'_>> {
        let name = op.name();
        let fallback = hint.unwrap_or(Type::scalar(crate::ScalarType::I32));
        if self.check_operands(name, loc, &op.operands()).is_err() {
            return vec![self.poison(fallback)];
        }
        let types = {
            let s = self.state.borrow();
            crate::typing::infer(&op, &|v| s.values[v].ty, hint)
        };
        match types {
            Ok(types) => self.append(op, &types, Vec::new(), loc),
            Err(message) => vec![self.fail(name, loc, message, fallback)],
        }
    }

    /// Like [`emit`](Self::emit) for ops with exactly one result.
    pub(crate) fn emit1(&self, op: Op, hint: Option<Type>, loc: SourceLoc) -> Value<'_> {
        self.emit(op, hint, loc).into_iter().next().expect("op with one result")
    }

    /// Appends an instruction whose results are not known yet (control flow, whose regions
    /// need the instruction's handle); [`set_results`](Self::set_results) completes it.
    pub(crate) fn append_shell(&self, op: Op, loc: SourceLoc) -> InstId {
        let mut s = self.state.borrow_mut();
        let inst = s.insts.append(Inst {
            op,
            results: Vec::new(),
            regions: Vec::new(),
            loc,
        });
        s.open.last_mut().unwrap().region.insts.push(inst);
        inst
    }

    /// Gives a shell instruction its results, in the current region's scope.
    pub(crate) fn set_results(&self, inst: InstId, types: &[Type]) -> Vec<Value<'_>> {
        let mut s = self.state.borrow_mut();
        let scope = s.open.last().unwrap().key;
        let ids: Vec<ValueId> = types
            .iter()
            .enumerate()
            .map(|(i, &ty)| s.new_value(ty, ValueDef::Result { inst, index: i as u32 }, scope))
            .collect();
        s.insts[inst].results = ids.clone();
        drop(s);
        ids.into_iter().map(|id| self.value(id)).collect()
    }

    /// Records an error without making a value.
    pub(crate) fn report(&self, op: &str, loc: SourceLoc, message: String) {
        self.state.borrow_mut().diagnostics.push(Diagnostic {
            op: op.to_string(),
            loc,
            message,
        });
    }

    /// Appends an already-checked instruction to the current region.
    fn append(&self, op: Op, results: &[Type], regions: Vec<Region>, loc: SourceLoc) -> Vec<Value<'_>> {
        let mut s = self.state.borrow_mut();
        let inst = s.insts.append(Inst {
            op,
            results: Vec::new(),
            regions,
            loc,
        });
        let scope = s.open.last().unwrap().key;
        let ids: Vec<ValueId> = results
            .iter()
            .enumerate()
            .map(|(i, &ty)| s.new_value(ty, ValueDef::Result { inst, index: i as u32 }, scope))
            .collect();
        s.insts[inst].results = ids.clone();
        s.open.last_mut().unwrap().region.insts.push(inst);
        drop(s);
        ids.into_iter().map(|id| self.value(id)).collect()
    }
}

impl State {
    fn new_value(&mut self, ty: Type, def: ValueDef, scope: u32) -> ValueId {
        self.value_scope.push(scope);
        self.values.append(ValueData { ty, def })
    }

    fn poison(&mut self, ty: Type) -> ValueId {
        let scope = self.open.last().unwrap().key;
        let id = self.new_value(ty, ValueDef::Param(u32::MAX), scope);
        self.poisoned.insert(id);
        id
    }
}

impl<'b> Value<'b> {
    /// The value's type.
    pub fn ty(&self) -> Type {
        self.builder.ty_of(self.id)
    }
    /// The element scalar type (`None` for pointers).
    pub fn dtype(&self) -> Option<crate::ScalarType> {
        self.ty().scalar_type()
    }
    /// The block shape (empty for scalars).
    pub fn shape(&self) -> Vec<u32> {
        self.ty().shape.dims().to_vec()
    }
    /// The IR value this handle names.
    pub fn id(&self) -> ValueId {
        self.id
    }
    /// The builder this value belongs to.
    pub fn builder(&self) -> &'b KernelBuilder {
        self.builder
    }
}

impl KernelBuilder {
    /// Opens a region for `inst` (already appended), with arguments of the given types.
    pub(crate) fn open_region(&self, inst: InstId, region_index: u32, arg_types: &[Type]) -> Vec<Value<'_>> {
        let mut s = self.state.borrow_mut();
        let key = s.next_key;
        s.next_key += 1;
        let args: Vec<ValueId> = arg_types
            .iter()
            .enumerate()
            .map(|(i, &ty)| {
                s.new_value(
                    ty,
                    ValueDef::RegionArg {
                        inst,
                        region: region_index,
                        index: i as u32,
                    },
                    key,
                )
            })
            .collect();
        s.open.push(OpenRegion {
            key,
            region: Region {
                args: args.clone(),
                insts: Vec::new(),
            },
        });
        drop(s);
        args.into_iter().map(|id| self.value(id)).collect()
    }

    /// Closes the innermost region and attaches it to `inst`.
    pub(crate) fn close_region(&self, inst: InstId) {
        let mut s = self.state.borrow_mut();
        let open = s.open.pop().expect("a region is open");
        s.insts[inst].regions.push(open.region);
    }
}

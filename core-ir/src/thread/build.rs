//! Builds per-thread kernels statement by statement, for backend tests and experiments.
//!
//! The compiler itself never uses this: its per-thread kernels come from the lowering. The
//! builder is for writing a [`ThreadKernel`] by hand, to feed a backend or the SIMT simulator
//! a precise sequence of statements. [`ThreadKernelBuilder::finish`] verifies the result and
//! panics when it is malformed, which is what a test wants;
//! [`ThreadKernelBuilder::try_finish`] returns the verifier's message instead.

use super::{verify, Expr, Memory, Reg, RegData, SharedAlloc, Special, Stmt, ThreadKernel, ThreadParam};
use crate::arena::Arena;
use crate::ir::CacheModifier;
use crate::ir::{BinaryOp, CmpOp, Literal};
use crate::types::ScalarType;

/// Builds per-thread kernels statement by statement, for backend tests and experiments.
///
/// Statements go to the innermost open block: the kernel's body, or the body that
/// [`block`](Self::block), [`if_`](Self::if_) or [`while_`](Self::while_) is building.
/// Registers, parameters and shared buffers are numbered in the order they are added.
///
/// ```
/// use rutile_ir::ir::BinaryOp;
/// use rutile_ir::thread::{Memory, ThreadKernelBuilder};
/// use rutile_ir::ScalarType::I32;
///
/// // out[tid] = tid + 1, on one warp of 32 threads.
/// let mut k = ThreadKernelBuilder::new("plus_one", 1, 32);
/// let out = k.ptr("out", I32);
/// let tid = k.thread_id();
/// let one = k.int(I32, 1);
/// let v = k.bin(BinaryOp::Add, tid, one);
/// k.store(vec![v], Memory::Global { param: out }, tid, None);
/// let kernel = k.finish();
/// assert_eq!(kernel.threads(), 32);
/// ```
#[derive(Clone, Debug)]
pub struct ThreadKernelBuilder {
    /// The kernel so far; `kernel.body` is the innermost open block.
    kernel: ThreadKernel,
}

impl ThreadKernelBuilder {
    /// An empty kernel of `num_warps` warps of `warp_size` threads.
    pub fn new(name: impl Into<String>, num_warps: u32, warp_size: u32) -> ThreadKernelBuilder {
        ThreadKernelBuilder {
            kernel: ThreadKernel {
                name: name.into(),
                params: vec![],
                regs: Arena::new(),
                shared: vec![],
                coop: vec![],
                tensor_maps: vec![],
                num_warps,
                warp_size,
                reuse_shared: crate::target::SharedReuse::Never,
                narrow_shared_in_words: false,
                persistent: None,
                producer_warps: 0,
                block_programs: None,
                cluster: 1,
                dots: None,
                body: vec![],
            },
        }
    }

    /// The kernel as built so far (its body is the innermost open block's).
    pub fn kernel(&self) -> &ThreadKernel {
        &self.kernel
    }

    /// Adds a pointer parameter to elements of `elem`; returns its index.
    pub fn ptr(&mut self, name: &str, elem: ScalarType) -> u32 {
        self.kernel.params.push(ThreadParam::Ptr {
            name: name.into(),
            elem,
        });
        self.kernel.params.len() as u32 - 1
    }

    /// Adds a scalar parameter; returns its index.
    pub fn scalar(&mut self, name: &str, ty: ScalarType) -> u32 {
        self.kernel.params.push(ThreadParam::Scalar { name: name.into(), ty });
        self.kernel.params.len() as u32 - 1
    }

    /// Adds a shared buffer of `len` elements; returns its index.
    pub fn shared(&mut self, elem: ScalarType, len: u32) -> u32 {
        self.kernel.shared.push(SharedAlloc::new(elem, len));
        self.kernel.shared.len() as u32 - 1
    }

    /// A new register, not yet set.
    pub fn reg(&mut self, ty: ScalarType) -> Reg {
        self.kernel.regs.append(RegData { ty })
    }

    /// Adds a statement to the innermost open block.
    pub fn push(&mut self, s: Stmt) {
        self.kernel.body.push(s);
    }

    /// A new register of type `ty` set to `expr`.
    pub fn set(&mut self, ty: ScalarType, expr: Expr) -> Reg {
        let dst = self.reg(ty);
        self.push(Stmt::Set { dst, expr });
        dst
    }

    /// `dst = expr`, for an existing register.
    pub fn assign(&mut self, dst: Reg, expr: Expr) {
        self.push(Stmt::Set { dst, expr });
    }

    /// A new register of integer type `ty` set to `v`.
    pub fn int(&mut self, ty: ScalarType, v: i64) -> Reg {
        self.set(ty, Expr::Const(Literal::Int(v)))
    }

    /// A new register of float type `ty` set to `v`.
    pub fn float(&mut self, ty: ScalarType, v: f64) -> Reg {
        self.set(ty, Expr::Const(Literal::Float(v)))
    }

    /// A new boolean register set to `v`.
    pub fn boolean(&mut self, v: bool) -> Reg {
        self.set(ScalarType::Bool, Expr::Const(Literal::Bool(v)))
    }

    /// A new `i32` register set to the special value `s`.
    pub fn special(&mut self, s: Special) -> Reg {
        self.set(ScalarType::I32, Expr::Special(s))
    }

    /// A new `i32` register set to the thread's index in its program.
    pub fn thread_id(&mut self) -> Reg {
        self.special(Special::ThreadId)
    }

    /// A new register of type `ty` set to scalar parameter `index`.
    pub fn param(&mut self, index: u32, ty: ScalarType) -> Reg {
        self.set(ty, Expr::Param(index))
    }

    /// A new register set to `a op b`, of `a`'s type.
    pub fn bin(&mut self, op: BinaryOp, a: Reg, b: Reg) -> Reg {
        let ty = self.kernel.reg_type(a);
        self.set(ty, Expr::Binary(op, a, b))
    }

    /// A new boolean register set to `a op b`.
    pub fn cmp(&mut self, op: CmpOp, a: Reg, b: Reg) -> Reg {
        self.set(ScalarType::Bool, Expr::Compare(op, a, b))
    }

    /// Loads `n` consecutive elements of `mem` at `index` into new registers of type `ty`,
    /// where `pred` holds.
    pub fn load(&mut self, ty: ScalarType, n: usize, mem: Memory, index: Reg, pred: Option<Reg>) -> Vec<Reg> {
        let dsts: Vec<Reg> = (0..n).map(|_| self.reg(ty)).collect();
        self.push(Stmt::Load {
            dsts: dsts.clone(),
            mem,
            index,
            pred,
            cache: CacheModifier::Default,
        });
        dsts
    }

    /// Stores `values` to consecutive elements of `mem` at `index`, where `pred` holds.
    pub fn store(&mut self, values: Vec<Reg>, mem: Memory, index: Reg, pred: Option<Reg>) {
        self.push(Stmt::Store {
            values,
            mem,
            index,
            pred,
        });
    }

    /// The statements `f` adds, as a block of their own (for the bodies of `if` and `while`
    /// statements pushed by hand).
    pub fn block(&mut self, f: impl FnOnce(&mut Self)) -> Vec<Stmt> {
        let outer = std::mem::take(&mut self.kernel.body);
        f(self);
        std::mem::replace(&mut self.kernel.body, outer)
    }

    /// `if cond { then } else { els }`.
    pub fn if_(&mut self, cond: Reg, then: impl FnOnce(&mut Self), els: impl FnOnce(&mut Self)) {
        let then_body = self.block(then);
        let else_body = self.block(els);
        self.push(Stmt::If {
            cond,
            then_body,
            else_body,
        });
    }

    /// `while cond() { body }`: `cond` adds the statements that compute the condition and
    /// returns its register, which they set on every iteration.
    pub fn while_(&mut self, cond: impl FnOnce(&mut Self) -> Reg, body: impl FnOnce(&mut Self)) {
        let mut c = None;
        let cond_body = self.block(|k| c = Some(cond(k)));
        let body = self.block(body);
        self.push(Stmt::While {
            cond_body,
            cond: c.expect("the condition's register"),
            body,
        });
    }

    /// The kernel, checked with [`verify`](super::verify).
    ///
    /// # Panics
    ///
    /// When the kernel does not verify, with the verifier's message and the kernel's text. This
    /// is a tool for tests and experiments, where a malformed kernel is a bug in the test; use
    /// [`try_finish`](Self::try_finish) to get the message instead.
    pub fn finish(self) -> ThreadKernel {
        self.try_finish().unwrap_or_else(|e| panic!("{e}"))
    }

    /// The kernel, checked with [`verify`](super::verify); the error is the verifier's message
    /// followed by the kernel's text.
    pub fn try_finish(self) -> Result<ThreadKernel, String> {
        match verify(&self.kernel) {
            Ok(()) => Ok(self.kernel),
            Err(e) => Err(format!("the hand-built kernel does not verify: {e}\n{}", self.kernel)),
        }
    }

    /// The kernel as built, not verified: for tests of how consumers reject malformed kernels.
    pub fn finish_unverified(self) -> ThreadKernel {
        self.kernel
    }
}

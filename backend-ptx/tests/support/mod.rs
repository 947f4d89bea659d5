//! Shared test helpers: a small builder for per-thread kernels and the `ptxas` check.
#![allow(dead_code)]

use rutile_ir::thread::{Expr, Memory, Reg, RegData, SharedAlloc, Stmt, ThreadKernel, ThreadParam};
use rutile_ir::{Arena, ScalarType};
use rutile_ptx::PtxTarget;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Builds a [`ThreadKernel`] statement by statement.
pub struct K {
    pub k: ThreadKernel,
}

impl K {
    /// An empty kernel of 4 warps of 32 threads.
    pub fn new(name: &str) -> K {
        K {
            k: ThreadKernel {
                name: name.into(),
                params: vec![],
                regs: Arena::new(),
                shared: vec![],
                num_warps: 4,
                warp_size: 32,
                body: vec![],
            },
        }
    }
    /// Adds a pointer parameter; returns its index.
    pub fn ptr(&mut self, name: &str, elem: ScalarType) -> u32 {
        self.k.params.push(ThreadParam::Ptr { name: name.into(), elem });
        self.k.params.len() as u32 - 1
    }
    /// Adds a scalar parameter; returns its index.
    pub fn scalar(&mut self, name: &str, ty: ScalarType) -> u32 {
        self.k.params.push(ThreadParam::Scalar { name: name.into(), ty });
        self.k.params.len() as u32 - 1
    }
    /// Adds a shared buffer; returns its index.
    pub fn shared(&mut self, elem: ScalarType, len: u32) -> u32 {
        self.k.shared.push(SharedAlloc { elem, len });
        self.k.shared.len() as u32 - 1
    }
    pub fn reg(&mut self, ty: ScalarType) -> Reg {
        self.k.regs.append(RegData { ty })
    }
    pub fn push(&mut self, s: Stmt) {
        self.k.body.push(s);
    }
    /// A new register of type `ty` set to `expr`.
    pub fn set(&mut self, ty: ScalarType, expr: Expr) -> Reg {
        let dst = self.reg(ty);
        self.push(Stmt::Set { dst, expr });
        dst
    }
    /// `dst = expr` for an existing register.
    pub fn assign(&mut self, dst: Reg, expr: Expr) {
        self.push(Stmt::Set { dst, expr });
    }
    pub fn int(&mut self, ty: ScalarType, v: i64) -> Reg {
        self.set(ty, Expr::Const(rutile_ir::ir::Literal::Int(v)))
    }
    pub fn float(&mut self, ty: ScalarType, v: f64) -> Reg {
        self.set(ty, Expr::Const(rutile_ir::ir::Literal::Float(v)))
    }
    /// The statements `f` pushes, taken out of the body (for nested bodies).
    pub fn block(&mut self, f: impl FnOnce(&mut K)) -> Vec<Stmt> {
        let outer = std::mem::take(&mut self.k.body);
        f(self);
        std::mem::replace(&mut self.k.body, outer)
    }
    /// Loads `n` elements of global pointer `param` at `index` into new registers.
    pub fn load(&mut self, param: u32, ty: ScalarType, n: usize, index: Reg, pred: Option<Reg>) -> Vec<Reg> {
        let dsts: Vec<Reg> = (0..n).map(|_| self.reg(ty)).collect();
        self.push(Stmt::Load { dsts: dsts.clone(), mem: Memory::Global { param }, index, pred });
        dsts
    }
    pub fn store(&mut self, param: u32, values: Vec<Reg>, index: Reg, pred: Option<Reg>) {
        self.push(Stmt::Store { values, mem: Memory::Global { param }, index, pred });
    }
    pub fn thread_id(&mut self) -> Reg {
        self.set(ScalarType::I32, Expr::Special(rutile_ir::thread::Special::ThreadId))
    }
    pub fn finish(self) -> ThreadKernel {
        rutile_ir::thread::verify(&self.k).unwrap_or_else(|e| panic!("test kernel does not verify: {e}\n{}", self.k));
        self.k
    }
}

/// `ptxas`, from `RUTILE_PTXAS`; `None` (with a note) when unset, unless
/// `RUTILE_REQUIRE_TOOLS=1`, which makes a missing tool a failure.
pub fn ptxas() -> Option<PathBuf> {
    match std::env::var_os("RUTILE_PTXAS") {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => {
            if std::env::var("RUTILE_REQUIRE_TOOLS").as_deref() == Ok("1") {
                panic!("RUTILE_REQUIRE_TOOLS=1 but RUTILE_PTXAS is not set");
            }
            eprintln!("note: RUTILE_PTXAS is not set; skipping the ptxas check");
            None
        }
    }
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// Assembles `ptx` with `ptxas` for `sm_{sm}` and fails with ptxas's messages (and the
/// numbered PTX) when it does not assemble. Skips when ptxas is not available.
pub fn ptxas_check(ptx: &str, sm: u32) {
    let Some(ptxas) = ptxas() else { return };
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("rutile-ptx-test-{}-{n}.ptx", std::process::id()));
    std::fs::write(&path, ptx).expect("write the PTX file");
    let out = Command::new(&ptxas)
        .arg(format!("-arch=sm_{sm}"))
        .arg(&path)
        .arg("-o")
        .arg("/dev/null")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", ptxas.display()));
    let _ = std::fs::remove_file(&path);
    if !out.status.success() {
        let numbered: String = ptx.lines().enumerate().map(|(i, l)| format!("{:4} {l}\n", i + 1)).collect();
        panic!(
            "ptxas -arch=sm_{sm} failed:\n{}{}\n--- PTX ---\n{numbered}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The PTX of `k` for `sm`, checked with ptxas.
pub fn emit_checked(k: &ThreadKernel, sm: u32) -> String {
    let target = PtxTarget::from_compute_capability(sm / 10, sm % 10);
    let ptx = rutile_ptx::emit(k, &target).unwrap_or_else(|e| panic!("emit for sm_{sm} failed: {e}"));
    ptxas_check(&ptx, sm);
    ptx
}

/// The PTX of `k` for sm_80 and sm_90 (both checked with ptxas); returns the sm_80 text.
pub fn emit_80_90(k: &ThreadKernel) -> String {
    emit_checked(k, 90);
    emit_checked(k, 80)
}

/// Asserts that `ptx` contains each of `needles`.
pub fn assert_contains(ptx: &str, needles: &[&str]) {
    for n in needles {
        assert!(ptx.contains(n), "expected `{n}` in the PTX:\n{ptx}");
    }
}

//! Hand-built per-thread kernels and the checks every test runs on their translation.
#![allow(dead_code)]

use rutile_ir::ir::{BinaryOp, CmpOp, Literal};
use rutile_ir::thread::{Expr, Memory, Reg, RegData, SharedAlloc, Special, Stmt, ThreadKernel, ThreadParam};
use rutile_ir::{Arena, ScalarType};
use rutile_spirv::{SpirvError, SpirvKernel, SpirvTarget};

/// Builds a [`ThreadKernel`]: statements go to the innermost open block.
pub struct Kb {
    pub k: ThreadKernel,
    blocks: Vec<Vec<Stmt>>,
}

impl Kb {
    pub fn new(name: &str, num_warps: u32, warp_size: u32) -> Kb {
        Kb {
            k: ThreadKernel {
                name: name.into(),
                params: vec![],
                regs: Arena::new(),
                shared: vec![],
                num_warps,
                warp_size,
                body: vec![],
            },
            blocks: vec![vec![]],
        }
    }
    pub fn ptr(&mut self, name: &str, elem: ScalarType) -> u32 {
        self.k.params.push(ThreadParam::Ptr { name: name.into(), elem });
        self.k.params.len() as u32 - 1
    }
    pub fn scalar(&mut self, name: &str, ty: ScalarType) -> u32 {
        self.k.params.push(ThreadParam::Scalar { name: name.into(), ty });
        self.k.params.len() as u32 - 1
    }
    pub fn shared(&mut self, elem: ScalarType, len: u32) -> u32 {
        self.k.shared.push(SharedAlloc { elem, len });
        self.k.shared.len() as u32 - 1
    }
    pub fn reg(&mut self, ty: ScalarType) -> Reg {
        self.k.regs.append(RegData { ty })
    }
    pub fn push(&mut self, s: Stmt) {
        self.blocks.last_mut().unwrap().push(s);
    }
    /// A new register set to `expr`.
    pub fn set(&mut self, ty: ScalarType, expr: Expr) -> Reg {
        let dst = self.reg(ty);
        self.push(Stmt::Set { dst, expr });
        dst
    }
    pub fn assign(&mut self, dst: Reg, expr: Expr) {
        self.push(Stmt::Set { dst, expr });
    }
    pub fn int(&mut self, ty: ScalarType, v: i64) -> Reg {
        self.set(ty, Expr::Const(Literal::Int(v)))
    }
    pub fn float(&mut self, ty: ScalarType, v: f64) -> Reg {
        self.set(ty, Expr::Const(Literal::Float(v)))
    }
    pub fn boolean(&mut self, v: bool) -> Reg {
        self.set(ScalarType::Bool, Expr::Const(Literal::Bool(v)))
    }
    pub fn special(&mut self, s: Special) -> Reg {
        self.set(ScalarType::I32, Expr::Special(s))
    }
    pub fn param(&mut self, index: u32, ty: ScalarType) -> Reg {
        self.set(ty, Expr::Param(index))
    }
    pub fn bin(&mut self, op: BinaryOp, a: Reg, b: Reg) -> Reg {
        let ty = self.k.reg_type(a);
        self.set(ty, Expr::Binary(op, a, b))
    }
    pub fn cmp(&mut self, op: CmpOp, a: Reg, b: Reg) -> Reg {
        self.set(ScalarType::Bool, Expr::Compare(op, a, b))
    }
    pub fn load(&mut self, ty: ScalarType, n: usize, mem: Memory, index: Reg, pred: Option<Reg>) -> Vec<Reg> {
        let dsts: Vec<Reg> = (0..n).map(|_| self.reg(ty)).collect();
        self.push(Stmt::Load { dsts: dsts.clone(), mem, index, pred });
        dsts
    }
    pub fn store(&mut self, values: Vec<Reg>, mem: Memory, index: Reg, pred: Option<Reg>) {
        self.push(Stmt::Store { values, mem, index, pred });
    }
    /// The statements `f` adds, as a block.
    pub fn block(&mut self, f: impl FnOnce(&mut Kb)) -> Vec<Stmt> {
        self.blocks.push(vec![]);
        f(self);
        self.blocks.pop().unwrap()
    }
    pub fn if_(&mut self, cond: Reg, then: impl FnOnce(&mut Kb), els: impl FnOnce(&mut Kb)) {
        let then_body = self.block(then);
        let else_body = self.block(els);
        self.push(Stmt::If { cond, then_body, else_body });
    }
    /// `while cond() { body }`, with `cond` adding the statements that compute the condition.
    pub fn while_(&mut self, cond: impl FnOnce(&mut Kb) -> Reg, body: impl FnOnce(&mut Kb)) {
        let mut c = None;
        let cond_body = self.block(|kb| c = Some(cond(kb)));
        let body = self.block(body);
        self.push(Stmt::While { cond_body, cond: c.unwrap(), body });
    }
    pub fn finish(mut self) -> ThreadKernel {
        assert_eq!(self.blocks.len(), 1, "unclosed block");
        self.k.body = self.blocks.pop().unwrap();
        rutile_ir::thread::verify(&self.k).unwrap_or_else(|e| panic!("test kernel is malformed: {e}\n{}", self.k));
        self.k
    }
}

/// Emits `k` for `target`, writes WGSL and SPIR-V, checks the WGSL parses back into a valid
/// module, and runs spirv-val on the SPIR-V when `RUTILE_SPIRV_VAL` names it.
pub fn check(k: &ThreadKernel, target: &SpirvTarget) -> (SpirvKernel, String) {
    let sk = match rutile_spirv::emit(k, target) {
        Ok(sk) => sk,
        Err(e) => panic!("emit failed: {e}\nkernel:\n{k}"),
    };
    let wgsl = sk.wgsl().unwrap_or_else(|e| panic!("{e}"));
    let words = sk.spirv_words().unwrap_or_else(|e| panic!("{e}\n{wgsl}"));
    assert_eq!(words[0], 0x0723_0203, "SPIR-V magic number");
    reparse_wgsl(&wgsl, target);
    spirv_val(&k.name, &words, &wgsl);
    (sk, wgsl)
}

fn reparse_wgsl(wgsl: &str, target: &SpirvTarget) {
    let module = match naga::front::wgsl::parse_str(wgsl) {
        Ok(m) => m,
        Err(e) => panic!("the WGSL does not parse: {}\n{wgsl}", e.emit_to_string(wgsl)),
    };
    let mut caps = naga::valid::Capabilities::empty();
    caps.set(naga::valid::Capabilities::SHADER_FLOAT16, target.shader_f16);
    caps.set(naga::valid::Capabilities::SHADER_INT64, target.shader_i64);
    caps.set(naga::valid::Capabilities::FLOAT64, target.shader_f64);
    caps.set(naga::valid::Capabilities::SUBGROUP, target.subgroups);
    let flags = naga::valid::ValidationFlags::all() - naga::valid::ValidationFlags::CONTROL_FLOW_UNIFORMITY;
    if let Err(e) = naga::valid::Validator::new(flags, caps).validate(&module) {
        panic!("the WGSL does not validate: {}\n{wgsl}", e.emit_to_string(wgsl));
    }
}

fn spirv_val(name: &str, words: &[u32], wgsl: &str) {
    let Some(tool) = std::env::var_os("RUTILE_SPIRV_VAL") else {
        if std::env::var("RUTILE_REQUIRE_TOOLS").as_deref() == Ok("1") {
            panic!("RUTILE_REQUIRE_TOOLS=1 but RUTILE_SPIRV_VAL is not set");
        }
        eprintln!("note: RUTILE_SPIRV_VAL is not set: SPIR-V of `{name}` not checked with spirv-val");
        return;
    };
    static COUNT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("rutile-spirv-{}-{n}-{name}.spv", std::process::id()));
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    std::fs::write(&path, bytes).unwrap();
    let out = std::process::Command::new(&tool)
        .args(["--target-env", "vulkan1.1"])
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {tool:?}: {e}"));
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "spirv-val rejects `{name}`:\n{}{}\nWGSL:\n{wgsl}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A target with everything, subgroups of `warp`.
pub fn full(warp: u32) -> SpirvTarget {
    SpirvTarget::full(warp)
}

/// A target with nothing optional.
pub fn basic() -> SpirvTarget {
    SpirvTarget::default()
}

/// The `Unsupported` error's `what`, or a panic.
pub fn unsupported_what(r: Result<SpirvKernel, SpirvError>) -> (&'static str, String) {
    match r {
        Err(e @ SpirvError::Unsupported { what, .. }) => (what, e.to_string()),
        Err(e) => panic!("expected Unsupported, got {e}"),
        Ok(_) => panic!("expected Unsupported, got a kernel"),
    }
}

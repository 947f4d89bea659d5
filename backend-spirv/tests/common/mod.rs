//! Hand-built per-thread kernels and the checks every test runs on their translation.
#![allow(dead_code)]

pub mod vk;

use rutile_ir::ir::{BinaryOp, CmpOp};
use rutile_ir::thread::{Expr, Memory, Special, ThreadKernel, ThreadKernelBuilder};
use rutile_ir::ScalarType;
use rutile_ir::ScalarType::{F32, I32};
use rutile_spirv::{SpirvError, SpirvKernel, SpirvTarget};

/// `program_id(0) * threads + thread_id` (an `i32`): the element of a kernel whose programs
/// of `threads` threads take one each.
pub fn global_index(kb: &mut ThreadKernelBuilder, threads: u32) -> rutile_ir::thread::Reg {
    let pid = kb.special(Special::ProgramId(0));
    let tid = kb.special(Special::ThreadId);
    let c = kb.int(I32, threads as i64);
    let base = kb.bin(BinaryOp::Mul, pid, c);
    kb.bin(BinaryOp::Add, base, tid)
}

/// Emits `k` for `target`, writes WGSL and SPIR-V, checks the WGSL parses back into a valid
/// module, and runs spirv-val on the SPIR-V when `RUTILE_SPIRV_VAL` names it (on the words
/// with memory hints too, when the kernel has some, or f64 arithmetic to mark).
pub fn check(k: &ThreadKernel, target: &SpirvTarget) -> (SpirvKernel, String) {
    let sk = match rutile_spirv::emit(k, target) {
        Ok(sk) => sk,
        Err(e) => panic!("emit failed: {e}\nkernel:\n{k}"),
    };
    let wgsl = sk.wgsl().unwrap_or_else(|e| panic!("{e}"));
    let words = sk.spirv_words().unwrap_or_else(|e| panic!("{e}\n{wgsl}"));
    assert_eq!(words[0], 0x0723_0203, "SPIR-V magic number");
    // naga's WGSL reader knows square cooperative matrices only (`coop_mat8x8`,
    // `coop_mat16x16`); the WGSL is a dump, the module goes to the driver as SPIR-V.
    if k.coop.iter().all(|m| m.rows == m.cols) {
        reparse_wgsl(&wgsl, target);
    }
    // Cooperative matrices need Vulkan 1.3's environment (their SPIR-V uses the Vulkan
    // memory model); the rest is checked against Vulkan 1.1.
    let env = if k.coop.is_empty() { "vulkan1.1" } else { "vulkan1.3" };
    spirv_val(&k.name, &words, &wgsl, env);
    if sk.has_memory_hints() || sk.exact_f64 {
        let hinted = sk.spirv_words_hinted().unwrap_or_else(|e| panic!("{e}\n{wgsl}"));
        spirv_val(
            &k.name,
            &hinted,
            &wgsl,
            if k.coop.is_empty() { "vulkan1.2" } else { "vulkan1.3" },
        );
    }
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
    caps.set(naga::valid::Capabilities::SHADER_INT16, target.shader_i16);
    caps.set(naga::valid::Capabilities::FLOAT64, target.shader_f64);
    caps.set(naga::valid::Capabilities::SUBGROUP, target.subgroups);
    caps.set(naga::valid::Capabilities::IMMEDIATES, target.immediate_size > 0);
    caps.set(naga::valid::Capabilities::COOPERATIVE_MATRIX, target.cooperative_matrix);
    caps.set(
        naga::valid::Capabilities::SUBGROUP_BARRIER,
        target.cooperative_matrix && target.subgroups && target.coop_load_fences,
    );
    caps.set(naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32, target.packed_f16);
    if let Err(e) = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps).validate(&module) {
        panic!("the WGSL does not validate: {}\n{wgsl}", e.emit_to_string(wgsl));
    }
}

fn spirv_val(name: &str, words: &[u32], wgsl: &str, target_env: &str) {
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
        .args(["--target-env", target_env])
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

/// `out[i..i+4] = x[i..i+4] + y[i..i+4]` where `i + 4 <= n`, four elements per thread.
pub fn vector_add(elem: ScalarType) -> ThreadKernel {
    vector_add_width(elem, 4)
}

/// [`vector_add`] with `width` elements a thread (a block of `128 * width`).
pub fn vector_add_width(elem: ScalarType, width: usize) -> ThreadKernel {
    let mut kb = ThreadKernelBuilder::new("vector_add", 4, 32);
    let x = kb.ptr("x", elem);
    let y = kb.ptr("y", elem);
    let out = kb.ptr("out", elem);
    let n = kb.scalar("n", I32);
    let pid = kb.special(Special::ProgramId(0));
    let tid = kb.special(Special::ThreadId);
    let block = kb.int(I32, 128 * width as i64);
    let w = kb.int(I32, width as i64);
    let base = kb.bin(BinaryOp::Mul, pid, block);
    let tw = kb.bin(BinaryOp::Mul, tid, w);
    let offs = kb.bin(BinaryOp::Add, base, tw);
    let end = kb.bin(BinaryOp::Add, offs, w);
    let n = kb.param(n, I32);
    let mask = kb.cmp(CmpOp::Le, end, n);
    let a = kb.load(elem, width, Memory::Global { param: x }, offs, Some(mask));
    let b = kb.load(elem, width, Memory::Global { param: y }, offs, Some(mask));
    let sums: Vec<_> = a.iter().zip(&b).map(|(&a, &b)| kb.bin(BinaryOp::Add, a, b)).collect();
    kb.store(sums, Memory::Global { param: out }, offs, Some(mask));
    kb.finish()
}

/// A sum of 256 values per program: shuffles within each warp, one partial per warp in
/// shared memory, a barrier, then thread 0 adds the partials in a loop.
pub fn reduction(warp: u32) -> ThreadKernel {
    let warps = 256 / warp;
    let mut kb = ThreadKernelBuilder::new("block_sum", warps, warp);
    let x = kb.ptr("x", F32);
    let out = kb.ptr("out", F32);
    let partials = kb.shared(F32, warps);
    let pid = kb.special(Special::ProgramId(0));
    let tid = kb.special(Special::ThreadId);
    let c256 = kb.int(I32, 256);
    let base = kb.bin(BinaryOp::Mul, pid, c256);
    let i = kb.bin(BinaryOp::Add, base, tid);
    let v = kb.load(F32, 1, Memory::Global { param: x }, i, None)[0];
    let acc = kb.reg(F32);
    kb.assign(acc, Expr::Copy(v));
    let mut m = warp / 2;
    while m > 0 {
        let other = kb.set(F32, Expr::ShuffleXor { value: acc, mask: m });
        kb.assign(acc, Expr::Binary(BinaryOp::Add, acc, other));
        m /= 2;
    }
    // Broadcast lane 0's total (a ShuffleIdx) to check that form too.
    let zero = kb.int(I32, 0);
    let total = kb.set(F32, Expr::ShuffleIdx { value: acc, lane: zero });
    let ws = kb.int(I32, warp as i64);
    let lane = kb.bin(BinaryOp::Rem, tid, ws);
    let w = kb.bin(BinaryOp::Div, tid, ws);
    let first = kb.cmp(CmpOp::Eq, lane, zero);
    kb.store(vec![total], Memory::Shared { alloc: partials }, w, Some(first));
    kb.push(rutile_ir::thread::Stmt::Barrier);
    let t0 = kb.cmp(CmpOp::Eq, tid, zero);
    kb.if_(
        t0,
        |kb| {
            let sum = kb.float(F32, 0.0);
            let j = kb.int(I32, 0);
            let one = kb.int(I32, 1);
            let nw = kb.int(I32, warps as i64);
            kb.while_(
                |kb| kb.cmp(CmpOp::Lt, j, nw),
                |kb| {
                    let p = kb.load(F32, 1, Memory::Shared { alloc: partials }, j, None)[0];
                    kb.assign(sum, Expr::Binary(BinaryOp::Add, sum, p));
                    kb.assign(j, Expr::Binary(BinaryOp::Add, j, one));
                },
            );
            kb.store(vec![sum], Memory::Global { param: out }, pid, None);
        },
        |_| {},
    );
    kb.finish()
}

/// In `words`: the cooperative-matrix loads that a subgroup barrier (execution scope
/// `Subgroup`) precedes with no barrier or cooperative-matrix operation between, and those
/// it does not.
pub fn fenced_coop_loads(words: &[u32]) -> (usize, usize) {
    use rspirv::dr::Operand;
    use rspirv::spirv::{Op, Scope};
    let module = rspirv::dr::load_words(words).unwrap();
    let constant = |id: u32| constant_value(&module, id);
    let subgroup_barrier = |i: &rspirv::dr::Instruction| {
        i.class.opcode == Op::ControlBarrier
            && matches!(i.operands.first(), Some(Operand::IdScope(s)) if constant(*s) == Some(Scope::Subgroup as u32))
    };
    let (mut fenced, mut unfenced) = (0, 0);
    for block in module.functions.iter().flat_map(|f| f.blocks.iter()) {
        for (at, i) in block.instructions.iter().enumerate() {
            if i.class.opcode == Op::CooperativeMatrixLoadKHR {
                // (naga writes the pointer's arithmetic between the two.)
                let before = block.instructions[..at].iter().rev().find(|p| {
                    matches!(
                        p.class.opcode,
                        Op::ControlBarrier
                            | Op::CooperativeMatrixLoadKHR
                            | Op::CooperativeMatrixStoreKHR
                            | Op::CooperativeMatrixMulAddKHR
                    )
                });
                if before.is_some_and(subgroup_barrier) {
                    fenced += 1;
                } else {
                    unfenced += 1;
                }
            }
        }
    }
    (fenced, unfenced)
}

/// The value of 32-bit constant `id` of `module`, if it is one.
pub fn constant_value(module: &rspirv::dr::Module, id: u32) -> Option<u32> {
    module
        .types_global_values
        .iter()
        .find_map(|i| match (i.result_id, i.operands.as_slice()) {
            (Some(r), [rspirv::dr::Operand::LiteralBit32(v)]) if r == id => Some(*v),
            _ => None,
        })
}

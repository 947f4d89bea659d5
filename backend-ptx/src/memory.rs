//! Loads and stores of global and shared memory.
//!
//! Addresses are `base + index * size`: global bases are 64-bit (`cvta.to.global` once per
//! pointer parameter), indices widen with `mul.wide.s32`/`mul.wide.u32` (or `mad.lo.s64` for
//! 64-bit indices); shared memory uses 32-bit addresses into `.shared` buffers.
//!
//! Vectors: `n` consecutive elements go in the widest accesses PTX has, up to 16 bytes: f32
//! ×4 is one `ld.global.v4.f32`, f64 ×2 one `v2.f64`, f16/bf16 ×2 and ×4 `v2.b16`/`v4.b16`
//! and ×8 one `v4.b32` of packed pairs; 8-bit elements use `v2`/`v4` of bytes. Wider vectors
//! are split into several such accesses. A vector access needs its alignment (`n * size`
//! bytes, up to 16), which the lowering guarantees by aligned indices and the runtime by
//! buffers aligned to at least 16 bytes.
//!
//! Cache modifiers: a streaming load (`CacheModifier::Streaming`, Triton's
//! `cache_modifier=".cs"`) is `ld.global.cs`, cached with evict-first priority.
//!
//! Booleans are bytes in memory (`ld.u8` then `setp.ne`; stores write 0 or 1). Predicated
//! accesses guard every instruction that touches memory or the destination registers, so
//! the destinations keep their values where the predicate is false.

use crate::emit::{Emitter, Res};
use crate::names::{mem_ty, Class};
use rutile_ir::thread::{Memory, Reg, ThreadParam};
use rutile_ir::CacheModifier;
use rutile_ir::ScalarType::{self, *};

/// The 64-bit global address of element `index` of pointer parameter `param`.
pub(crate) fn global_addr(e: &mut Emitter, param: u32, index: Reg, size: usize) -> String {
    let base = e.ptr_base[param as usize].clone().expect("verified pointer parameter");
    let i = e.r(index);
    let a = e.tmp(Class::Rd);
    match e.ty(index) {
        I32 | U32 => {
            let off = e.tmp(Class::Rd);
            let s = if e.ty(index) == I32 { "s32" } else { "u32" };
            e.ins(format!("mul.wide.{s} {off}, {i}, {size}"));
            e.ins(format!("add.s64 {a}, {base}, {off}"));
        }
        _ => e.ins(format!("mad.lo.s64 {a}, {i}, {size}, {base}")),
    }
    a
}

/// The 32-bit shared address of element `index` of shared buffer `alloc`.
pub(crate) fn shared_addr(e: &mut Emitter, alloc: u32, index: Reg, size: usize) -> String {
    let base = e.smem_base[alloc as usize].clone();
    let mut i = e.r(index);
    if e.ty(index).bits() == 64 {
        let n = e.tmp(Class::R);
        e.ins(format!("cvt.u32.u64 {n}, {i}"));
        i = n;
    }
    let a = e.tmp(Class::R);
    e.ins(format!("mad.lo.s32 {a}, {i}, {size}, {base}"));
    a
}

/// Element type, state space and address of an access.
fn locate(e: &mut Emitter, mem: Memory, index: Reg) -> (ScalarType, &'static str, String) {
    match mem {
        Memory::Global { param } => {
            let ThreadParam::Ptr { elem, .. } = e.k.params[param as usize] else {
                unreachable!("verified")
            };
            let a = global_addr(e, param, index, elem.size_bytes());
            (elem, "global", a)
        }
        Memory::Shared { alloc } => {
            let elem = e.k.shared[alloc as usize].elem;
            let a = shared_addr(e, alloc, index, elem.size_bytes());
            (elem, "shared", a)
        }
    }
}

/// Elements per access for `n` elements of `elem`.
fn per_access(elem: ScalarType, n: usize) -> usize {
    n.min(4).min(16 / elem.size_bytes())
}

/// `[addr+off]`.
fn at(addr: &str, off: usize) -> String {
    if off == 0 {
        format!("[{addr}]")
    } else {
        format!("[{addr}+{off}]")
    }
}

/// `{a, b}` or `a`.
fn operand(regs: &[String]) -> String {
    if regs.len() == 1 {
        regs[0].clone()
    } else {
        format!("{{{}}}", regs.join(", "))
    }
}

fn vec_suffix(n: usize) -> String {
    if n == 1 {
        String::new()
    } else {
        format!(".v{n}")
    }
}

pub(crate) fn load(
    e: &mut Emitter,
    dsts: &[Reg],
    mem: Memory,
    index: Reg,
    pred: Option<Reg>,
    cache: CacheModifier,
) -> Res {
    let (elem, space, addr) = locate(e, mem, index);
    // The cache operator goes after the state space: `ld.global.cs.v4.f32`.
    let space = match (space, cache) {
        ("global", CacheModifier::Streaming) => "global.cs",
        _ => space,
    };
    let guard = pred.map(|p| e.r(p));
    let dst: Vec<String> = dsts.iter().map(|&r| e.r(r)).collect();
    let size = elem.size_bytes();
    // A guarded load into scratch registers writes them only where its predicate holds. In
    // a loop `ptxas` then keeps their value from the iteration before alive across the
    // whole loop (a persistent kernel's masked loads of each tile: spilled). Zeroing them
    // first ends that; the destinations themselves already hold the masked-off value.
    let scratch = |e: &mut Emitter, n: usize| -> Vec<String> {
        let regs: Vec<String> = (0..n).map(|_| e.tmp(Class::R)).collect();
        if guard.is_some() {
            for r in &regs {
                e.ins(format!("mov.b32 {r}, 0"));
            }
        }
        regs
    };
    let packed = (matches!(elem, F16 | BF16) && dst.len() == 8).then(|| scratch(e, 4));
    let per = per_access(elem, dst.len());
    let bytes: Vec<Vec<String>> = if elem == Bool {
        dst.chunks(per).map(|chunk| scratch(e, chunk.len())).collect()
    } else {
        Vec::new()
    };
    e.guarded(guard.clone(), |e| {
        if let Some(words) = packed {
            // One 16-byte access of packed pairs.
            e.ins(format!("ld.{space}.v4.b32 {}, [{addr}]", operand(&words)));
            for (w, pair) in words.iter().zip(dst.chunks(2)) {
                e.ins(format!("mov.b32 {{{}, {}}}, {w}", pair[0], pair[1]));
            }
            return;
        }
        for (c, chunk) in dst.chunks(per).enumerate() {
            let off = c * per * size;
            let v = vec_suffix(chunk.len());
            if elem == Bool {
                let bytes = &bytes[c];
                e.ins(format!("ld.{space}{v}.u8 {}, {}", operand(bytes), at(&addr, off)));
                for (d, b) in chunk.iter().zip(bytes) {
                    e.ins(format!("setp.ne.u32 {d}, {b}, 0"));
                }
            } else {
                e.ins(format!(
                    "ld.{space}{v}.{} {}, {}",
                    mem_ty(elem),
                    operand(chunk),
                    at(&addr, off)
                ));
            }
        }
    });
    Ok(())
}

pub(crate) fn store(e: &mut Emitter, values: &[Reg], mem: Memory, index: Reg, pred: Option<Reg>) -> Res {
    let (elem, space, addr) = locate(e, mem, index);
    let guard = pred.map(|p| e.r(p));
    let mut vals: Vec<String> = values.iter().map(|&r| e.r(r)).collect();
    if elem == Bool {
        vals = vals
            .iter()
            .map(|p| {
                let b = e.tmp(Class::R);
                e.ins(format!("selp.u32 {b}, 1, 0, {p}"));
                b
            })
            .collect();
    }
    let size = elem.size_bytes();
    if matches!(elem, F16 | BF16) && vals.len() == 8 {
        let words: Vec<String> = vals
            .chunks(2)
            .map(|pair| {
                let w = e.tmp(Class::R);
                e.ins(format!("mov.b32 {w}, {{{}, {}}}", pair[0], pair[1]));
                w
            })
            .collect();
        e.guarded(guard, |e| {
            e.ins(format!("st.{space}.v4.b32 [{addr}], {}", operand(&words)))
        });
        return Ok(());
    }
    let per = per_access(elem, vals.len());
    e.guarded(guard, |e| {
        for (c, chunk) in vals.chunks(per).enumerate() {
            let off = c * per * size;
            let v = vec_suffix(chunk.len());
            e.ins(format!(
                "st.{space}{v}.{} {}, {}",
                mem_ty(elem),
                at(&addr, off),
                operand(chunk)
            ));
        }
    });
    Ok(())
}

/// `ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16` (sm_75 and later; the lowering
/// emits it on sm_80+ only): the 32-bit results hold the pairs of 16-bit elements, unpacked
/// into `dsts` in order.
pub(crate) fn ldmatrix(e: &mut Emitter, dsts: &[Reg], alloc: u32, index: Reg, trans: bool) -> Res {
    if e.target.sm < 75 {
        return Err(format!(
            "ldmatrix needs sm_75 or later, the target is sm_{}",
            e.target.sm
        ));
    }
    // A 32-bit word per matrix and lane: two 16-bit elements, or one 32-bit element (the
    // same bytes, so `.b16` serves both; `Stmt::LdMatrix`).
    let size = e.k.shared[alloc as usize].elem.size_bytes();
    let per_word = 4 / size;
    let addr = shared_addr(e, alloc, index, size);
    let words: Vec<String> = (0..dsts.len() / per_word).map(|_| e.tmp(Class::R)).collect();
    let trans = if trans { ".trans" } else { "" };
    e.ins(format!(
        "ldmatrix.sync.aligned.m8n8.x{}{trans}.shared.b16 {{{}}}, [{addr}]",
        words.len(),
        words.join(", ")
    ));
    for (w, part) in words.iter().zip(dsts.chunks(per_word)) {
        let parts: Vec<String> = part.iter().map(|&r| e.r(r)).collect();
        match parts.len() {
            1 => e.ins(format!("mov.b32 {}, {w}", parts[0])),
            _ => e.ins(format!("mov.b32 {{{}}}, {w}", parts.join(", "))),
        }
    }
    Ok(())
}

/// `cp.async` (sm_80 and later): `.cg` (through L2 only, the operand tiles are read once per
/// program) for 16 bytes, `.ca` for 4 and 8, which `.cg` does not allow. A predicate becomes
/// the source size: 0 bytes read, the destination zero-filled.
pub(crate) fn async_copy(
    e: &mut Emitter,
    alloc: u32,
    dst: Reg,
    param: u32,
    src: Reg,
    len: u32,
    pred: Option<Reg>,
) -> Res {
    if e.target.sm < 80 {
        return Err(format!(
            "cp.async needs sm_80 or later, the target is sm_{}",
            e.target.sm
        ));
    }
    let elem = e.k.shared[alloc as usize].elem;
    let bytes = len as usize * elem.size_bytes();
    let to = shared_addr(e, alloc, dst, elem.size_bytes());
    let from = global_addr(e, param, src, elem.size_bytes());
    let level = if bytes == 16 { "cg" } else { "ca" };
    let size = match pred {
        None => String::new(),
        Some(p) => {
            let n = e.tmp(Class::R);
            let p = e.r(p);
            e.ins(format!("selp.b32 {n}, {bytes}, 0, {p}"));
            format!(", {n}")
        }
    };
    e.ins(format!(
        "cp.async.{level}.shared.global [{to}], [{from}], {bytes}{size}"
    ));
    Ok(())
}

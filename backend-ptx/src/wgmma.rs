//! Hopper's warpgroup MMA (`Stmt::Wgmma`) and the fences around it: sm_90a only, the
//! architecture-specific target the module then declares.
//!
//! Each operand becomes a 64-bit shared-memory matrix descriptor (PTX ISA, "Matrix
//! Descriptor Format"): bits 0-13 the start address >> 4, 16-29 the leading byte offset >> 4,
//! 32-45 the stride byte offset >> 4, 49-51 the base offset (0: the lowering puts operand
//! buffers on 1024-byte boundaries), 62-63 the swizzle mode (1: 128 bytes, 2: 64, 3: 32).
//! Only the start address varies at run time; the rest is one 64-bit constant or'ed in.
//! Consecutive MMAs that read one operand buffer from one base register at constant offsets
//! (the K steps of a group) share the base's descriptor: each adds its offset >> 4 to the
//! start address field, which cannot carry out of its 14 bits, since a block's shared
//! memory ends below 256 KiB. One addition an MMA operand, where the address, its field
//! and the 64-bit or took four (and `ptxas` turned them into about six instructions on the
//! uniform datapath).

use crate::emit::{Emitter, Res};
use crate::memory::shared_addr;
use crate::names::Class;
use rutile_ir::thread::{MatrixMajor, Reg, SmemMatrix, Stmt, WgmmaA};
use rutile_ir::ScalarType;
use std::collections::HashSet;

/// `wgmma.mma_async.sync.aligned.m64n{n}k16.f32` (`k32` on fp8) on the accumulators
/// `acc`, in place (added to where `accumulate`, else overwritten).
pub(crate) fn wgmma(e: &mut Emitter, acc: &[Reg], a: &WgmmaA, b: &SmemMatrix, n: u32, accumulate: bool) -> Res {
    require_sm90(e, "wgmma")?;
    let elem = e.k.shared[b.alloc as usize].elem;
    let name = |t: ScalarType| match t {
        ScalarType::F16 => Ok("f16"),
        ScalarType::BF16 => Ok("bf16"),
        ScalarType::F8E4M3 => Ok("e4m3"),
        ScalarType::F8E5M2 => Ok("e5m2"),
        other => Err(format!("wgmma multiplies f16, bf16, E4M3 or E5M2, not {other}")),
    };
    // A's type: its buffer's, or B's for registers (16-bit only); the fp8 formats mix.
    let a_elem = match a {
        WgmmaA::Shared(m) => e.k.shared[m.alloc as usize].elem,
        WgmmaA::Registers(_) => elem,
    };
    let (ta, tb) = (name(a_elem)?, name(elem)?);
    let k = 32 / elem.size_bytes();
    if elem.is_fp8() {
        // fp8 operands are read K-major from shared memory, with no transpose immediates.
        let shared_k = |m: &SmemMatrix| m.major == MatrixMajor::K;
        if !matches!(a, WgmmaA::Shared(m) if shared_k(m)) || !shared_k(b) {
            return Err("wgmma reads fp8 operands K-major from shared memory only".into());
        }
    }
    // A: a descriptor, or its 8 halves packed in pairs into four 32-bit registers.
    let (da, trans_a) = match a {
        WgmmaA::Shared(a) => (descriptor(e, a)?, Some(u32::from(a.major == MatrixMajor::MN))),
        WgmmaA::Registers(r) => {
            // Pairs kept packed are read as they are (`pairs`).
            let kept: Option<Vec<String>> = r
                .chunks(2)
                .map(|pair| e.pairs.pair(pair[0]).map(|i| e.pair_regs[i].clone()))
                .collect();
            let packed: Vec<String> = kept.unwrap_or_else(|| {
                r.chunks(2)
                    .map(|pair| match e.prepacked.get(&(pair[0], pair[1])) {
                        Some(p) => p.clone(),
                        None => pack(e, pair[0], pair[1]),
                    })
                    .collect()
            });
            (format!("{{{}}}", packed.join(", ")), None)
        }
    };
    let db = descriptor(e, b)?;
    // The scale-d predicate: true to add to the accumulators, false to overwrite them.
    let p = e.tmp(Class::Pred);
    let z = zero(e);
    let cmp = if accumulate { "eq" } else { "ne" };
    e.ins(format!("setp.{cmp}.u32 {p}, {z}, 0"));
    let d: Vec<String> = acc.iter().map(|&r| e.r(r)).collect();
    let trans_b = u32::from(b.major == MatrixMajor::MN);
    // (A in registers takes no transpose immediate, fp8 operands none at all.)
    let trans = match trans_a {
        _ if elem.is_fp8() => String::new(),
        Some(t) => format!(", {t}, {trans_b}"),
        None => format!(", {trans_b}"),
    };
    e.ins(format!(
        "wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{ta}.{tb} {{{}}}, {da}, {db}, {p}, 1, 1{trans}",
        d.join(", ")
    ));
    Ok(())
}

/// `lo` and `hi` packed into a fresh 32-bit register.
fn pack(e: &mut Emitter, lo: Reg, hi: Reg) -> String {
    let p = e.tmp(Class::R);
    let (l, h) = (e.r(lo), e.r(hi));
    e.ins(format!("mov.b32 {p}, {{{l}, {h}}}"));
    p
}

/// Before a group's `wgmma.fence` ([`rutile_ir::thread::Stmt::WgmmaFence`]), with `group` the
/// statements after it: packs the register A operands of its MMAs (up to the group's
/// commit) that are not kept packed and that nothing in the group writes before their MMA,
/// so that no register is written between the fence and the MMAs
/// ([`crate::PtxTarget::pack_before_fence`]).
pub(crate) fn prepack(e: &mut Emitter, group: &[Stmt]) {
    let mut written: HashSet<Reg> = HashSet::new();
    for s in group {
        match s {
            Stmt::WgmmaCommit => break,
            Stmt::Wgmma {
                a: WgmmaA::Registers(r),
                ..
            } => {
                for pair in r.chunks(2) {
                    let (lo, hi) = (pair[0], pair[1]);
                    let kept = e.pairs.pair(lo).is_some();
                    if kept || written.contains(&lo) || written.contains(&hi) || e.prepacked.contains_key(&(lo, hi)) {
                        continue;
                    }
                    let p = pack(e, lo, hi);
                    e.prepacked.insert((lo, hi), p);
                }
            }
            Stmt::Wgmma { acc, .. } => written.extend(acc),
            Stmt::Set { dst, .. } => {
                written.insert(*dst);
            }
            Stmt::Load { dsts, .. } => written.extend(dsts),
            Stmt::Comment(_) => {}
            // Anything else in a group (none is, as the lowering emits them): the MMAs
            // after it pack their operands where they are.
            _ => break,
        }
    }
}

/// A zero in a 32-bit register, for the predicate of [`wgmma`].
fn zero(e: &mut Emitter) -> String {
    let z = e.tmp(Class::R);
    e.ins(format!("mov.u32 {z}, 0"));
    z
}

/// What makes two operands' descriptors differ only by their start addresses: the buffer,
/// the base register, the constant fields and the guard the instructions ran under.
pub(crate) type DescriptorKey = (u32, Reg, u64, Option<String>);

/// The 64-bit descriptor of `m` in a fresh register.
fn descriptor(e: &mut Emitter, m: &SmemMatrix) -> Result<String, String> {
    let mode: u64 = match m.swizzle {
        128 => 1,
        64 => 2,
        32 => 3,
        other => return Err(format!("no wgmma swizzle mode for {other}-byte rows")),
    };
    let field = |bytes: u32, what: &str| -> Result<u64, String> {
        let v = u64::from(bytes >> 4);
        if bytes % 16 != 0 || v >= 1 << 14 {
            return Err(format!("a wgmma {what} of {bytes} bytes does not fit its descriptor"));
        }
        Ok(v)
    };
    let constant = field(m.lbo, "leading byte offset")? << 16 | field(m.sbo, "stride byte offset")? << 32 | mode << 62;
    let size = e.k.shared[m.alloc as usize].elem.size_bytes();
    let key = (m.alloc, m.index, constant, e.guard().map(str::to_string));
    let (lo, hi) = match e.descriptors.get(&key) {
        Some(halves) => halves.clone(),
        None => {
            let addr = shared_addr(e, m.alloc, m.index, size);
            let start = e.tmp(Class::R);
            e.ins(format!("bfe.u32 {start}, {addr}, 4, 14"));
            let lo = e.tmp(Class::R);
            e.ins(format!("or.b32 {lo}, {start}, {}", constant & 0xffff_ffff));
            let hi = e.tmp(Class::R);
            e.ins(format!("mov.u32 {hi}, {}", constant >> 32));
            e.descriptors.insert(key, (lo.clone(), hi.clone()));
            (lo, hi)
        }
    };
    // (The verifier holds the offset to whole 16-byte chunks.)
    let chunks = u64::from(m.offset) * size as u64 / 16;
    let lo = if chunks == 0 {
        lo
    } else {
        let moved = e.tmp(Class::R);
        e.ins(format!("add.s32 {moved}, {lo}, {chunks}"));
        moved
    };
    let desc = e.tmp(Class::Rd);
    e.ins(format!("mov.b64 {desc}, {{{lo}, {hi}}}"));
    Ok(desc)
}

/// `fence.proxy.async.shared::cta`, `wgmma.fence`, `wgmma.commit_group` and
/// `wgmma.wait_group`: `what` is the instruction.
/// `setmaxnreg`: the warpgroup's register budget moves to `count` a thread (sm_90a).
pub(crate) fn set_max_registers(e: &mut Emitter, count: u32, increase: bool) -> Res {
    require_sm90(e, "setmaxnreg")?;
    let how = if increase { "inc" } else { "dec" };
    e.ins(format!("setmaxnreg.{how}.sync.aligned.u32 {count}"));
    Ok(())
}

pub(crate) fn ordering(e: &mut Emitter, what: &str) -> Res {
    require_sm90(e, what)?;
    e.ins(what);
    Ok(())
}

fn require_sm90(e: &Emitter, what: &str) -> Res {
    if e.target.sm != 90 {
        return Err(format!(
            "{what} needs sm_90a (Hopper), the target is sm_{}",
            e.target.sm
        ));
    }
    Ok(())
}

//! The tensor memory accelerator (sm_90 and later, PTX ISA 8.0): tensor-map parameters,
//! mbarriers (`Stmt::Mbarrier*`) and tensor copies (`Stmt::TmaLoad`, `Stmt::TmaStore`).
//!
//! Tensor map `j` is kernel parameter `params.len() + j`, the 128 bytes of a `CUtensorMap`
//! passed by value (CUDA's `__grid_constant__ const CUtensorMap`). `cp.async.bulk.tensor`
//! wants the map's generic address, so the prologue takes the parameter's address (`mov`
//! gives it in the `.param` space, which the copy cannot use: an H100 faults with a
//! misaligned address) and converts it with `cvta.param`, as nvcc does for `&map`; thread 0
//! then prefetches each map into the tensor-map cache.
//!
//! An mbarrier is 8 bytes of shared memory, named by its 32-bit `.shared::cta` address. A
//! copy's destination is a `.shared::cta` address too, which `.shared::cluster` accepts (the
//! CTA's own window lies inside the cluster's).
//!
//! The hardware also wants each box row to start on a 16-byte boundary: `coords[0]` times
//! the element size must be a multiple of 16 (negative or past the edge included), or the
//! copy is an illegal instruction that loses the context (measured on an H100). A register
//! cannot be checked here: whoever makes the statement must ensure it.

use crate::emit::{Emitter, Res};
use crate::memory::shared_addr;
use crate::names::Class;
use rutile_ir::thread::{MBarrier, Reg};

/// Declares the kernel's tensor-map parameters (appended to `params`) and emits their
/// prologue: each map's generic address, and its prefetch by thread 0.
pub(crate) fn params(e: &mut Emitter, params: &mut Vec<String>) -> Res {
    if e.k.tensor_maps.is_empty() {
        return Ok(());
    }
    require(e, "tensor maps (TMA)")?;
    let first = e.k.params.len();
    for j in 0..e.k.tensor_maps.len() {
        let pname = format!("{}_param_{}", e.k.name, first + j);
        params.push(format!("\t.param .align 64 .b8 {pname}[128]"));
        let m = e.k.tensor_maps[j];
        e.comment(&format!(
            "tensor map {j}: param {}, box {}x{}, {}-byte swizzle",
            m.param, m.box_dims[0], m.box_dims[1], m.swizzle
        ));
        let raw = e.tmp(Class::Rd);
        let generic = e.tmp(Class::Rd);
        e.ins(format!("mov.b64 {raw}, {pname}"));
        e.ins(format!("cvta.param.u64 {generic}, {raw}"));
        e.tmap_base.push(generic);
    }
    // A hint: one thread suffices, the maps are the same for the whole grid.
    let tid = e.tmp(Class::R);
    let first_thread = e.tmp(Class::Pred);
    e.ins(format!("mov.u32 {tid}, %tid.x"));
    e.ins(format!("setp.eq.u32 {first_thread}, {tid}, 0"));
    let maps = e.tmap_base.clone();
    e.guarded(Some(first_thread), |e| {
        for m in &maps {
            e.ins(format!("prefetch.tensormap [{m}]"));
        }
    });
    Ok(())
}

/// `mbarrier.init` of `bar` to `count` arrivals, then `fence.mbarrier_init` so that the
/// copies' `complete_tx` (the async proxy) see the initialized barrier.
pub(crate) fn mbarrier_init(e: &mut Emitter, bar: &MBarrier, count: u32, pred: Option<Reg>) -> Res {
    require(e, "mbarrier.init")?;
    let addr = barrier_addr(e, bar);
    let guard = pred.map(|p| e.r(p));
    e.guarded(guard, |e| {
        e.ins(format!("mbarrier.init.shared::cta.b64 [{addr}], {count}"));
        e.ins("fence.mbarrier_init.release.cluster");
    });
    Ok(())
}

/// One arrival on `bar` that also expects `bytes` more transaction bytes this phase.
pub(crate) fn arrive_expect_tx(e: &mut Emitter, bar: &MBarrier, bytes: u32, pred: Option<Reg>) -> Res {
    require(e, "mbarrier.arrive.expect_tx")?;
    let addr = barrier_addr(e, bar);
    let guard = pred.map(|p| e.r(p));
    e.guarded(guard, |e| {
        e.ins(format!(
            "mbarrier.arrive.expect_tx.shared::cta.b64 _, [{addr}], {bytes}"
        ))
    });
    Ok(())
}

/// Loops on `mbarrier.try_wait.parity` until the phase of parity `parity` of `bar` has
/// completed (`try_wait` may also give up after a time limit of the hardware's).
pub(crate) fn wait(e: &mut Emitter, bar: &MBarrier, parity: Reg) -> Res {
    require(e, "mbarrier.try_wait.parity")?;
    let addr = barrier_addr(e, bar);
    let parity = e.r(parity);
    let done = e.tmp(Class::Pred);
    let top = e.new_label();
    e.place_label(&top);
    e.ins(format!(
        "mbarrier.try_wait.parity.shared::cta.b64 {done}, [{addr}], {parity}"
    ));
    e.ins(format!("@!{done} bra {top}"));
    Ok(())
}

/// One arrival on `bar`, no transaction bytes.
pub(crate) fn arrive(e: &mut Emitter, bar: &MBarrier, pred: Option<Reg>) -> Res {
    require(e, "mbarrier.arrive")?;
    let addr = barrier_addr(e, bar);
    let guard = pred.map(|p| e.r(p));
    e.guarded(guard, |e| e.ins(format!("mbarrier.arrive.shared::cta.b64 _, [{addr}]")));
    Ok(())
}

pub(crate) fn inval(e: &mut Emitter, bar: &MBarrier, pred: Option<Reg>) -> Res {
    require(e, "mbarrier.inval")?;
    let addr = barrier_addr(e, bar);
    let guard = pred.map(|p| e.r(p));
    e.guarded(guard, |e| e.ins(format!("mbarrier.inval.shared::cta.b64 [{addr}]")));
    Ok(())
}

/// `cp.async.bulk.tensor.{2-5}d` of the box of tensor map `map` at `coords` (one a
/// dimension of the map) into element `dst` of shared buffer `alloc`, its bytes completing
/// on `bar`.
pub(crate) fn load(
    e: &mut Emitter,
    map: u32,
    alloc: u32,
    dst: Reg,
    coords: &[Reg],
    bar: &MBarrier,
    pred: Option<Reg>,
) -> Res {
    require(e, "cp.async.bulk.tensor")?;
    if !(2..=5).contains(&coords.len()) {
        return Err(format!("a tensor copy of {} dimensions (2 to 5)", coords.len()));
    }
    let tmap = e.tmap_base[map as usize].clone();
    let size = e.k.shared[alloc as usize].elem.size_bytes();
    let to = shared_addr(e, alloc, dst, size);
    let bar = barrier_addr(e, bar);
    let rank = coords.len();
    let at = coords.iter().map(|&c| e.r(c)).collect::<Vec<_>>().join(", ");
    let guard = pred.map(|p| e.r(p));
    e.guarded(guard, |e| {
        e.ins(format!(
            "cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes \
             [{to}], [{tmap}, {{{at}}}], [{bar}]"
        ))
    });
    Ok(())
}

/// `cp.async.bulk.tensor.Nd` of element `src` of shared buffer `alloc` to the box of
/// tensor map `map` at `coords` (2 to 5 of them), completing in the thread's bulk groups.
pub(crate) fn store(e: &mut Emitter, map: u32, alloc: u32, src: Reg, coords: &[Reg], pred: Option<Reg>) -> Res {
    require(e, "cp.async.bulk.tensor")?;
    if !(2..=5).contains(&coords.len()) {
        return Err(format!("a tensor store of {} dimensions (2 to 5)", coords.len()));
    }
    let tmap = e.tmap_base[map as usize].clone();
    let size = e.k.shared[alloc as usize].elem.size_bytes();
    let from = shared_addr(e, alloc, src, size);
    let rank = coords.len();
    let at = coords.iter().map(|&c| e.r(c)).collect::<Vec<_>>().join(", ");
    let guard = pred.map(|p| e.r(p));
    e.guarded(guard, |e| {
        e.ins(format!(
            "cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group [{tmap}, {{{at}}}], [{from}]"
        ))
    });
    Ok(())
}

/// A bulk-group instruction of the issuing thread (commit, or wait for the reads).
pub(crate) fn bulk(e: &mut Emitter, instruction: &str, pred: Option<Reg>) -> Res {
    require(e, instruction)?;
    let guard = pred.map(|p| e.r(p));
    e.guarded(guard, |e| e.ins(instruction));
    Ok(())
}

fn barrier_addr(e: &mut Emitter, bar: &MBarrier) -> String {
    shared_addr(e, bar.alloc, bar.index, 8)
}

/// TMA and the transaction-counting mbarriers are Hopper's (sm_90) and PTX ISA 8.0's.
fn require(e: &Emitter, what: &str) -> Res {
    let t = e.target;
    if t.sm < 90 {
        return Err(format!("{what} needs sm_90 or later, the target is sm_{}", t.sm));
    }
    if t.ptx_version < (8, 0) {
        return Err(format!(
            "{what} needs PTX ISA 8.0 or later, the target's is {}.{}",
            t.ptx_version.0, t.ptx_version.1
        ));
    }
    Ok(())
}

//! Thread-block clusters (sm_90 and later): stores into another program's shared memory
//! and the cluster-wide barrier that publishes them (`lower::cluster` emits both).

use crate::emit::{Emitter, Res};
use crate::memory::shared_addr;
use crate::names::{mem_ty, Class};
use rutile_ir::thread::Reg;

/// The check of a kernel in clusters (the emitter makes it once, before any statement: the
/// verifier allows cluster statements only in such kernels).
pub(crate) fn require_clusters(sm: u32, what: &str) -> Result<(), String> {
    if sm < 90 {
        return Err(format!(
            "{what} needs thread-block clusters, sm_90 or later; the target is sm_{sm}"
        ));
    }
    Ok(())
}

/// `value` into element `index` of buffer `alloc` of the cluster's program `rank`: the
/// local address mapped into that program's window (`mapa`), then a `st.shared::cluster`.
pub(crate) fn store(e: &mut Emitter, alloc: u32, index: Reg, rank: Reg, value: Reg, pred: Option<Reg>) -> Res {
    let elem = e.k.shared[alloc as usize].elem;
    let local = shared_addr(e, alloc, index, elem.size_bytes());
    let (rank, value) = (e.r(rank), e.r(value));
    let guard = pred.map(|p| e.r(p));
    let remote = e.tmp(Class::R);
    e.guarded(guard, |e| {
        e.ins(format!("mapa.shared::cluster.u32 {remote}, {local}, {rank}"));
        e.ins(format!("st.shared::cluster.{} [{remote}], {value}", mem_ty(elem)));
    });
    Ok(())
}

/// Every thread of the cluster arrives (releasing its shared-memory writes) and waits for
/// all the others (acquiring theirs).
pub(crate) fn barrier(e: &mut Emitter) -> Res {
    arrive(e)?;
    wait(e)
}

/// The barrier's first half: this thread arrives, releasing its shared-memory writes.
pub(crate) fn arrive(e: &mut Emitter) -> Res {
    e.ins("barrier.cluster.arrive.release.aligned");
    Ok(())
}

/// The barrier's second half: waits for every thread of the cluster to have arrived,
/// acquiring what they released.
pub(crate) fn wait(e: &mut Emitter) -> Res {
    e.ins("barrier.cluster.wait.acquire.aligned");
    Ok(())
}

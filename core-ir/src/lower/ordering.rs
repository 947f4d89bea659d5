//! Ordering of global-memory accesses between the threads of a program.
//!
//! The block IR runs a program's loads and stores in order. In per-thread code each thread
//! keeps its own order, but different threads may touch the same element: a layout that
//! replicates a block (more threads than elements) loads in every copy and stores from the
//! owner only, and two ops may distribute one block differently. So when a thread could
//! access global memory of a parameter that another thread of the program wrote (or read,
//! for a write) since the last barrier, the lowering puts a barrier first. The tracking is
//! per pointer parameter (pointers into one buffer through two parameters are assumed not
//! to overlap, as in CUDA and Triton) and conservative across branches and loops.

use super::Lowerer;
use crate::thread::Stmt;
use std::collections::BTreeSet;

/// Parameters read and written since the last barrier, and all read and written in the
/// region being lowered.
#[derive(Clone, Debug, Default)]
pub(crate) struct Accesses {
    loaded: BTreeSet<u32>,
    stored: BTreeSet<u32>,
    ever_loaded: BTreeSet<u32>,
    ever_stored: BTreeSet<u32>,
}

impl Accesses {
    fn union(&mut self, other: &Accesses) {
        self.loaded.extend(&other.loaded);
        self.stored.extend(&other.stored);
        self.ever_loaded.extend(&other.ever_loaded);
        self.ever_stored.extend(&other.ever_stored);
    }
}

impl Lowerer<'_> {
    /// Called before a global access of pointer parameter `param`: puts a barrier first when
    /// it could conflict with another thread's access since the last barrier.
    pub(crate) fn order_global_access(&mut self, param: u32, write: bool) {
        let a = &self.accesses;
        let conflict = a.stored.contains(&param) || (write && a.loaded.contains(&param));
        if conflict {
            self.emit(Stmt::Barrier);
        }
        let a = &mut self.accesses;
        if write {
            a.stored.insert(param);
            a.ever_stored.insert(param);
        } else {
            a.loaded.insert(param);
            a.ever_loaded.insert(param);
        }
    }

    /// Called before an atomic on pointer parameter `param`. An atomic that releases
    /// (acquire-release, Triton's default, or release) publishes the stores of every thread
    /// of the program, not only the issuing thread's: a lock's release (`atomic_xchg(lock,
    /// 0)` after the partial sums it guards were stored) must not overtake another thread's
    /// stores, so any store still pending since the last barrier, to any parameter, puts a
    /// barrier first. (Without it the layer norm tutorial's backward pass lost partial sums
    /// through Vulkan on an H100: the lock was released while other threads' stores were
    /// still on their way.) A relaxed or acquire atomic is ordered only against accesses of
    /// its own parameter, as any store.
    pub(crate) fn order_atomic(&mut self, param: u32, releases: bool) {
        if releases && !self.accesses.stored.is_empty() {
            self.emit(Stmt::Barrier);
        }
        self.order_global_access(param, true);
    }

    /// A barrier orders everything before it: nothing is pending after it.
    pub(crate) fn note_barrier(&mut self) {
        self.accesses.loaded.clear();
        self.accesses.stored.clear();
    }

    /// Starts a branch or loop body: it sees what is pending before it; returns the state
    /// to restore for a sibling branch.
    pub(crate) fn enter_region(&mut self) -> Accesses {
        let outer = self.accesses.clone();
        self.accesses.ever_loaded.clear();
        self.accesses.ever_stored.clear();
        outer
    }

    /// Ends a branch or loop body entered with `outer`: returns what the body left pending
    /// and touched, and restores `outer`'s state.
    pub(crate) fn leave_region(&mut self, outer: &Accesses) -> Accesses {
        std::mem::replace(&mut self.accesses, outer.clone())
    }

    /// After a loop whose body left `body`: a barrier at the start of the body is needed when
    /// one iteration writes what another reads or writes (the caller puts it there), and
    /// afterwards anything the body left pending may still conflict.
    pub(crate) fn loop_needs_barrier(body: &Accesses) -> bool {
        body.ever_stored.iter().any(|p| body.ever_loaded.contains(p))
    }

    /// Merges the state after a branch or loop into the current one (conservatively: the
    /// union of everything that may be pending, and of everything touched).
    pub(crate) fn merge_region(&mut self, after: &Accesses) {
        self.accesses.union(after);
    }
}

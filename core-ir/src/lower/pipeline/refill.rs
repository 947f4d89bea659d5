//! The refill of the stage just read, in a loop whose pipelined loads are all own copies
//! (`Target::refill_after_read`): the copies of a later iteration, lowered at the
//! iteration's top, wait to be emitted until the body first computes with what a thread
//! read back.

use crate::ir::{Inst, Op, ValueId};
use crate::lower::Lowerer;
use crate::thread::Stmt;

/// The copies of a later iteration that refill the stage this one read
/// ([`PipelinePlan::refill_after_read`](super::PipelinePlan::refill_after_read)), waiting
/// to be emitted after the first instruction of the loop body (at its top level, `depth`)
/// that computes with a value read back from it (`reads`, and views of them): that
/// instruction cannot run before the thread's reads of its slots have returned, so the
/// refill cannot overtake them.
pub(crate) struct PendingRefill {
    pub(super) stmts: Vec<Stmt>,
    pub(super) reads: Vec<ValueId>,
    pub(super) depth: usize,
}

impl Lowerer<'_> {
    /// Emits the pending refill after `inst`, just lowered, if it is the first to use what
    /// was read back (at the loop body's top level). A view of it (a reshape, a broadcast:
    /// the same registers, possibly no instruction at all) does not count as a use; its
    /// result is then watched as what was read.
    pub(crate) fn refill_after(&mut self, inst: &Inst) {
        let depth = self.body.len();
        let Some(p) = self.pending_refill.as_mut() else {
            return;
        };
        if p.depth != depth || !inst.op.operands().iter().any(|v| p.reads.contains(v)) {
            return;
        }
        let view = matches!(
            inst.op,
            Op::Broadcast { .. } | Op::ExpandDims { .. } | Op::Reshape { .. } | Op::Permute { .. } | Op::Bitcast { .. }
        );
        if view {
            p.reads.extend(inst.results.iter().copied());
            return;
        }
        self.flush_refill();
    }

    /// Emits the pending refill, if any: at the end of the loop body where nothing at its
    /// top level used what was read back.
    pub(crate) fn flush_refill(&mut self) {
        if let Some(p) = self.pending_refill.take() {
            for stmt in p.stmts {
                self.emit(stmt);
            }
        }
    }
}

//! `cluster_reduce` and `cluster_reduce_n`: a scalar (or a tuple of them, with a combine
//! region) combined over the programs of a thread-block cluster, through their shared
//! memory (distributed shared memory, CUDA from sm_90). A tuple's values go through one
//! exchange: their stores, then one barrier for all of them.
//!
//! Each program owns a buffer of one slot per program of the cluster for each value of
//! each reduction (not the exchange buffer of its type, which the next exchange would
//! overwrite while other warps still read the slots). Thread `t < cluster` writes the
//! program's value into slot `rank` of the buffer of program `t` (so the programs' writes
//! go out in parallel, one remote store a thread), then a cluster barrier orders them
//! before every thread of every program reads its own buffer's slots and folds them in
//! rank order (a combine region need not be commutative).
//!
//! Before the writes, two things must hold: the receiving program has started (CUDA
//! requires it: a program's shared memory is not there for others before it runs), and,
//! where the reduction runs again (in a loop), every program has read the round before.
//! Each barrier costs a round trip through the cluster in the program's critical path, so
//! the lowering keeps only those that something needs:
//!
//! - The kernel's first reduction, where it is in the kernel's top-level statements (run
//!   once, by every program): the cluster barrier is split. Its arrive goes at the kernel's
//!   start and its wait just before the writes, so by then every program has long
//!   arrived (all started) and the wait does not stop.
//! - Where the first reduction is inside a loop or an `if`, a whole cluster barrier at the
//!   kernel's start stands for "all started", since a later reduction cannot know whether
//!   that one ran.
//! - Later top-level reductions: no barrier before the writes. Their slots are written
//!   once, and everyone has started.
//! - Reductions inside a loop or an `if`: a barrier before the writes, for the round
//!   before.
//!
//! After the barrier that follows the writes no program writes into another's shared
//! memory again in this round, so a program may then exit. The SIMT simulator checks all
//! of this (`interp/simt_cluster.rs`).
//!
//! A program's rank is its `program_id(0)` modulo the cluster size: the driver groups
//! consecutive programs along x into a cluster, in rank order.
//!
//! Without a cluster (size 1) the op is its operand and nothing is emitted.

use super::{LVal, LowerError, Lowerer};
use crate::ir::{BinaryOp, CacheModifier, Inst, Op, ReduceOp, ValueId};
use crate::thread::{Expr, Memory, Reg, SharedAlloc, Special, Stmt};
use crate::types::ScalarType;

/// The largest cluster a launch may ask for: Hopper's, twice CUDA's portable 8 (the CUDA
/// runtime opts a kernel of more than 8 into it).
pub const MAX_CLUSTER: u32 = 16;

/// The largest cluster every GPU with clusters runs (CUDA's portable size).
pub const PORTABLE_CLUSTER: u32 = 8;

impl Lowerer<'_> {
    pub(crate) fn cluster_reduce(&mut self, inst: &Inst) -> Result<LVal, LowerError> {
        let Op::ClusterReduce { op, value } = inst.op else {
            return Err(self.internal("not a cluster reduction"));
        };
        let combine = match op {
            ReduceOp::Sum => BinaryOp::Add,
            ReduceOp::Max => BinaryOp::Max,
            ReduceOp::Min => BinaryOp::Min,
            _ => return Err(self.unsupported(inst, format!("combines by sum, max or min, not {}", op.name()))),
        };
        let mut out = self.cluster_exchange(inst, &[value], |l, a, b| {
            let ty = l.regs[a[0]].ty;
            Ok(vec![l.set(ty, Expr::Binary(combine, a[0], b[0]))])
        })?;
        out.pop()
            .ok_or_else(|| self.internal("a cluster reduction without a result"))
    }

    /// `cluster_reduce_n`: as [`Self::cluster_reduce`], the tuple's values through one
    /// exchange, combined by the op's region.
    pub(crate) fn cluster_reduce_combine(&mut self, inst: &Inst) -> Result<Vec<LVal>, LowerError> {
        let Op::ClusterReduceCombine { values } = &inst.op else {
            return Err(self.internal("not a cluster reduction"));
        };
        let region = inst
            .regions
            .first()
            .ok_or_else(|| self.internal("a cluster reduction without its combine"))?;
        self.cluster_exchange(inst, values, |l, a, b| l.apply_combine(region, a, b))
    }

    /// The scalars `values` of every program of the cluster, combined from rank 0 up by
    /// `combine` (registers of the tuple so far, registers of the next program's): each
    /// value into its own slot buffer of every program, one barrier after all the stores,
    /// then each program folds its slots (module comment).
    fn cluster_exchange(
        &mut self,
        inst: &Inst,
        values: &[ValueId],
        mut combine: impl FnMut(&mut Self, &[Reg], &[Reg]) -> Result<Vec<Reg>, LowerError>,
    ) -> Result<Vec<LVal>, LowerError> {
        let srcs = values.iter().map(|&v| self.lval(v)).collect::<Result<Vec<_>, _>>()?;
        let cluster = self.target.cluster;
        if cluster <= 1 {
            return Ok(srcs);
        }
        let mut mine = Vec::with_capacity(values.len());
        for (&v, src) in values.iter().zip(&srcs) {
            let elem = self
                .k
                .ty(v)
                .scalar_type()
                .ok_or_else(|| self.unsupported(inst, "cannot combine pointers"))?;
            let [x] = src.regs[..] else {
                return Err(self.internal("a cluster reduction of more than one register"));
            };
            mine.push((elem, x));
        }
        // A buffer of its own for each value, not the exchange buffer of its type
        // (`shared_buffer`): the slots are read after the last barrier here (module comment).
        let slots: Vec<u32> = mine
            .iter()
            .map(|&(elem, _)| {
                self.shared.push(SharedAlloc::new(elem, cluster));
                self.shared.len() as u32 - 1
            })
            .collect();
        let size = self.i32c(cluster as i64);
        let rank = self.cluster_rank(size);
        let (tid, _, _) = self.thread_ids();
        let writes = self.set(ScalarType::Bool, Expr::Compare(crate::ir::CmpOp::Lt, tid, size));
        self.barrier_before_cluster_writes();
        for (&alloc, &(_, x)) in slots.iter().zip(&mine) {
            self.emit(Stmt::ClusterStore {
                alloc,
                index: rank,
                rank: tid,
                value: x,
                pred: Some(writes),
            });
        }
        self.emit(Stmt::ClusterBarrier);
        let mut acc: Option<Vec<Reg>> = None;
        for slot in 0..cluster {
            let at = self.i32c(slot as i64);
            let mut next = Vec::with_capacity(slots.len());
            for (&alloc, &(elem, _)) in slots.iter().zip(&mine) {
                let v = self.new_reg(elem);
                self.emit(Stmt::Load {
                    dsts: vec![v],
                    mem: Memory::Shared { alloc },
                    index: at,
                    pred: None,
                    cache: CacheModifier::Default,
                });
                next.push(v);
            }
            acc = Some(match acc {
                None => next,
                Some(a) => combine(self, &a, &next)?,
            });
        }
        let acc = acc.ok_or_else(|| self.internal("a cluster without programs"))?;
        Ok(srcs
            .into_iter()
            .zip(acc)
            .map(|(src, r)| LVal {
                layout: src.layout,
                regs: vec![r],
                ptr: None,
            })
            .collect())
    }

    /// This program's rank in its cluster of `size` (a constant register) programs, once a
    /// kernel, in the prologue: in a loop a remainder by a cluster size that is no power of
    /// two is `ptxas`'s general division sequence, whose temporaries at the exchange, where
    /// a walk holds its share, made the long-row softmax's clusters of 3, 5 and 7 spill. (A
    /// persistent grid cannot run in clusters, `lower`, so the program id is the program's
    /// for the whole kernel.)
    fn cluster_rank(&mut self, size: Reg) -> Reg {
        if let Some(rank) = self.cache.cluster_rank {
            return rank;
        }
        let i32t = ScalarType::I32;
        let pid = self.pset(i32t, Expr::Special(Special::ProgramId(0)));
        let rank = self.pset(i32t, Expr::Binary(BinaryOp::Rem, pid, size));
        self.cache.cluster_rank = Some(rank);
        rank
    }

    /// What must come before a reduction's writes into the other programs (module comment).
    fn barrier_before_cluster_writes(&mut self) {
        // Only control flow nests statement lists (`nested`).
        let top_level = self.body.len() == 1;
        let first = self.cluster_sites == 0;
        self.cluster_sites += 1;
        match (first, top_level) {
            (true, true) => {
                self.prologue.push(Stmt::ClusterArrive);
                self.emit(Stmt::ClusterWait);
            }
            (true, false) => {
                self.prologue.push(Stmt::ClusterBarrier);
                self.emit(Stmt::ClusterBarrier);
            }
            (false, true) => {}
            (false, false) => self.emit(Stmt::ClusterBarrier),
        }
    }
}

//! The simulator's walk over a statement list: a stack of frames (a list and its next
//! statement, a loop between its condition and its body) rather than recursion, so that a
//! walk can stop at an mbarrier wait that cannot pass yet and go on later, which is how the
//! sides of a warp-specialized statement take turns (`simt_specialized.rs`). In lockstep
//! (the whole program) such a wait is a hang, reported as a fault. A program of a
//! thread-block cluster stops the same way at every cluster barrier, for the other
//! programs of its cluster to take their turns (`simt_cluster.rs`).

use super::Sim;
use crate::interp::error::{FaultKind, InterpError};
use crate::thread::Stmt;

/// Where a walk is: a statement list and the next statement's index, or a loop whose
/// condition statements (`after_cond`) or body just ran.
#[derive(Clone, Copy)]
pub(super) enum Frame<'s> {
    List { stmts: &'s [Stmt], pc: usize },
    Loop { stmt: &'s Stmt, after_cond: bool },
}

/// How a walk ended.
pub(super) enum Turn<'s> {
    Done,
    /// At wait `at`, having run statements first (`progressed`) or not.
    Blocked {
        at: &'s Stmt,
        progressed: bool,
    },
    /// Just past a cluster barrier (a program of a cluster), which the other programs of
    /// the cluster must reach before this one goes on.
    ClusterBarrier,
}

impl<'s> Sim<'s> {
    /// Runs `stmts` to their end.
    pub(super) fn block(&mut self, stmts: &'s [Stmt]) -> Result<(), InterpError> {
        let mut frames = vec![Frame::List { stmts, pc: 0 }];
        match self.run_frames(&mut frames, false)? {
            Turn::Done => Ok(()),
            Turn::Blocked { .. } => unreachable!("a walk that may not stop faults at its waits"),
            Turn::ClusterBarrier => unreachable!("programs of a cluster are walked by `simt_cluster.rs`"),
        }
    }

    /// Runs the walk `frames` until it is done, or, where it may `stop`, until it reaches an
    /// mbarrier wait that cannot pass yet (left to run again), or, in a program of a
    /// cluster, until it passes a cluster barrier (a barrier of the program as well).
    pub(super) fn run_frames(&mut self, frames: &mut Vec<Frame<'s>>, stop: bool) -> Result<Turn<'s>, InterpError> {
        let mut progressed = false;
        while let Some(&frame) = frames.last() {
            let top = frames.len() - 1;
            match frame {
                Frame::List { stmts, pc } if pc == stmts.len() => {
                    frames.pop();
                }
                Frame::List { stmts, pc } => {
                    let s = &stmts[pc];
                    if let (true, Stmt::MbarrierWait { bar, parity }) = (stop, s) {
                        if !self.mbarrier_try_wait(bar, *parity).map_err(|f| self.error(s, f))? {
                            return Ok(Turn::Blocked { at: s, progressed });
                        }
                        frames[top] = Frame::List { stmts, pc: pc + 1 };
                        progressed = true;
                        continue;
                    }
                    frames[top] = Frame::List { stmts, pc: pc + 1 };
                    progressed = true;
                    match s {
                        Stmt::Comment(c) => self.context = c,
                        // (A named barrier is the consumers' own: all of them run in lockstep.)
                        Stmt::Barrier | Stmt::NamedBarrier { .. } => self.epoch += 1,
                        Stmt::ClusterBarrier if self.cluster.is_some() => {
                            self.epoch += 1;
                            return Ok(Turn::ClusterBarrier);
                        }
                        // (A split cluster barrier's arrive moves the program's epoch on,
                        // its wait does not: `simt_cluster.rs`. The verifier has checked
                        // that the halves pair up.)
                        Stmt::ClusterArrive if self.cluster.is_some() => self.epoch += 1,
                        Stmt::ClusterWait if self.cluster.is_some() => return Ok(Turn::ClusterBarrier),
                        Stmt::ClusterStore { .. } if self.cluster.is_some() => {
                            self.cluster_store(s).map_err(|f| self.error(s, f))?
                        }
                        Stmt::If {
                            cond,
                            then_body,
                            else_body,
                        } => {
                            let c = self.uniform(*cond).map_err(|f| self.error(s, f))?;
                            let stmts = if c { then_body } else { else_body };
                            frames.push(Frame::List { stmts, pc: 0 });
                        }
                        Stmt::While { cond_body, .. } => {
                            frames.push(Frame::Loop {
                                stmt: s,
                                after_cond: true,
                            });
                            frames.push(Frame::List {
                                stmts: cond_body,
                                pc: 0,
                            });
                        }
                        Stmt::Specialized { .. } if self.in_side => {
                            let message = "warp specialization is nested".to_string();
                            return Err(self.error(s, super::fault(FaultKind::InvalidIr, 0, message)));
                        }
                        Stmt::Specialized { producer, consumer } => self.specialized(s, producer, consumer)?,
                        // The consumers free a stage: the producer's turn, so that it runs
                        // as far ahead as the stages let it (`simt_specialized.rs`).
                        Stmt::MbarrierArrive { .. } if stop && self.in_side && self.tid_base == 0 => {
                            self.simple(s).map_err(|f| self.error(s, f))?;
                            return Ok(Turn::Blocked { at: s, progressed });
                        }
                        _ => self.simple(s).map_err(|f| self.error(s, f))?,
                    }
                }
                Frame::Loop { stmt, after_cond } => {
                    let Stmt::While { cond_body, cond, body } = stmt else {
                        unreachable!("a loop frame holds a `While`")
                    };
                    if after_cond {
                        if self.uniform(*cond).map_err(|f| self.error(stmt, f))? {
                            frames[top] = Frame::Loop {
                                stmt,
                                after_cond: false,
                            };
                            frames.push(Frame::List { stmts: body, pc: 0 });
                        } else {
                            frames.pop();
                        }
                    } else {
                        frames[top] = Frame::Loop { stmt, after_cond: true };
                        frames.push(Frame::List {
                            stmts: cond_body,
                            pc: 0,
                        });
                    }
                }
            }
        }
        Ok(Turn::Done)
    }
}

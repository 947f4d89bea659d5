//! The simulator's warp specialization (`Stmt::Specialized`).
//!
//! The two sides of the statement (the consumers: the program's `num_warps` warps; the
//! producer: the warpgroup after them) do not run in step: each waits on mbarriers for what
//! the other does. So the simulator runs each side in lockstep over its own threads, as a
//! program of its own whose first thread is `Sim::tid_base` (thread ids, warps and faults
//! keep the program's numbering), and switches between them: a side runs until it reaches a
//! wait whose phase cannot complete yet, then the other side runs, and so on; the consumers
//! also hand over after each of their mbarrier arrivals (a stage freed). The consumers go
//! first. Where neither side can go on, a GPU would hang: a fault naming both waits.
//!
//! This is one interleaving of the many a GPU may take, the one where the producer runs as
//! far ahead as the mbarriers let it, as soon as they let it: a producer that does not wait
//! for a stage to be freed arrives on its "full" mbarrier again before the phase completes
//! (a fault), consumers that never free a stage leave the producer waiting (a hang, a
//! fault), and the copies the producer issues into a freed stage (the next tile's, in a
//! persistent kernel) are in flight while the consumers go on, so that a consumer write to
//! that stage, or a copy of theirs into it, faults when the producer's copy lands (a
//! persistent attention kernel's ragged walk into the ring's buffers did). Consumers that
//! free a stage while their MMAs may still read it are caught where the producer's copy
//! into it is issued (`simt_wgmma.rs`: a wgmma's operands count as read until its wait);
//! the copies themselves land only at the wait that needs them.
//!
//! Shared memory, mbarriers, copies and race tracking are the program's. A wait that a side
//! passes counts as a barrier for race tracking (`Sim::ordered_by_wait`): it orders the side
//! after what the other did before completing the phase. Registers are per thread, so each
//! side takes its threads' columns of every register when the statement starts, and gives
//! them back when it ends.

use super::exec::{Frame, Turn};
use super::{merge, Def, Sim};
use crate::interp::error::{FaultKind, InterpError};
use crate::interp::tensor::Tensor;
use crate::thread::Stmt;
use crate::types::{Elem, Shape, Type};

/// One side: its threads, its registers while the other side runs, and where it is.
struct Side<'s> {
    base: usize,
    threads: usize,
    regs: Vec<Tensor>,
    def: Vec<Def>,
    frames: Vec<Frame<'s>>,
    /// The wait it stopped at, if it did.
    waiting: Option<&'s Stmt>,
}

impl<'s> Sim<'s> {
    /// Runs `Stmt::Specialized` `s` (see the module comment).
    pub(super) fn specialized(
        &mut self,
        s: &'s Stmt,
        producer: &'s [Stmt],
        consumer: &'s [Stmt],
    ) -> Result<(), InterpError> {
        let consumers = (self.k.num_warps * self.k.warp_size) as usize;
        if self.tid_base != 0 || consumers > self.threads {
            let message = "warp specialization is nested, or has no producer threads".to_string();
            return Err(self.error(s, super::fault(FaultKind::InvalidIr, 0, message)));
        }
        let all = self.threads;
        let mut sides = [
            self.side(0, consumers, consumer),
            self.side(consumers, all - consumers, producer),
        ];
        self.in_side = true;
        let r = self.interleave(s, &mut sides);
        self.in_side = false;
        for side in &sides {
            self.take_back(side, all);
        }
        r
    }

    /// The side of threads `base..base + threads` running `stmts`, with their columns of the
    /// registers.
    fn side(&self, base: usize, threads: usize, stmts: &'s [Stmt]) -> Side<'s> {
        let columns: Vec<usize> = (base..base + threads).collect();
        let regs = self
            .regs
            .iter()
            .zip(self.k.regs.iter())
            .map(|(t, (_, r))| Tensor {
                ty: Type::block(Elem::Scalar(r.ty), Shape::new(&[threads as u32]).unwrap()),
                data: t.data.gather(&columns),
            })
            .collect();
        let def = self
            .def
            .iter()
            .map(|d| match d {
                Def::Some(v) => Def::Some(v[base..base + threads].to_vec()),
                d => d.clone(),
            })
            .collect();
        Side {
            base,
            threads,
            regs,
            def,
            frames: vec![Frame::List { stmts, pc: 0 }],
            waiting: None,
        }
    }

    /// Puts `side`'s columns back into the program's registers (of `all` threads).
    fn take_back(&mut self, side: &Side<'s>, all: usize) {
        let inside: Vec<bool> = (0..all)
            .map(|t| (side.base..side.base + side.threads).contains(&t))
            .collect();
        let from: Vec<usize> = (0..all)
            .map(|t| t.saturating_sub(side.base).min(side.threads - 1))
            .collect();
        for (i, (reg, def)) in side.regs.iter().zip(&side.def).enumerate() {
            merge(&mut self.regs[i].data, &reg.data.gather(&from), &inside);
            let defined: Vec<bool> = match def {
                Def::All => vec![true; side.threads],
                Def::None => vec![false; side.threads],
                Def::Some(v) => v.clone(),
            };
            let spread: Vec<bool> = (0..all).map(|t| inside[t] && defined[from[t]]).collect();
            self.define(super::Reg::from_index(i), &spread);
        }
    }

    /// Turns of the sides until both are done, or neither can go on.
    fn interleave(&mut self, s: &'s Stmt, sides: &mut [Side<'s>; 2]) -> Result<(), InterpError> {
        loop {
            let (mut progressed, mut done) = (false, true);
            for side in sides.iter_mut() {
                if side.frames.is_empty() {
                    continue;
                }
                let all = self.threads;
                self.enter(side);
                let turn = self.run_frames(&mut side.frames, true);
                self.leave(side, all);
                side.waiting = None;
                match turn? {
                    Turn::Done => progressed = true,
                    Turn::Blocked { at, progressed: p } => {
                        side.waiting = Some(at);
                        progressed |= p;
                        done = false;
                    }
                    Turn::ClusterBarrier => unreachable!("a warp-specialized kernel runs in no cluster"),
                }
            }
            if done {
                return Ok(());
            }
            if !progressed {
                let at = |side: &Side<'s>| {
                    side.waiting
                        .map_or("its end".to_string(), |w| format!("`{}`", self.k.stmt_text(w)))
                };
                let message = format!(
                    "the consumers wait at {} and the producer at {}: neither can go on (a GPU would hang here)",
                    at(&sides[0]),
                    at(&sides[1])
                );
                return Err(self.error(s, super::fault(FaultKind::InvalidIr, 0, message)));
            }
        }
    }

    /// Makes `side` the running threads, with its registers.
    fn enter(&mut self, side: &mut Side<'s>) {
        std::mem::swap(&mut self.regs, &mut side.regs);
        std::mem::swap(&mut self.def, &mut side.def);
        self.tid_base = side.base;
        self.threads = side.threads;
    }

    /// Gives `side` its registers back; the whole program (of `all` threads) runs again.
    fn leave(&mut self, side: &mut Side<'s>, all: usize) {
        std::mem::swap(&mut self.regs, &mut side.regs);
        std::mem::swap(&mut self.def, &mut side.def);
        self.tid_base = 0;
        self.threads = all;
    }
}

//! Warp specialization of a loop fed by the tensor memory accelerator: a producer
//! warpgroup of its own issues the copies, the program's `num_warps` warps (the consumers)
//! only wait for them, multiply, and run the rest of the kernel.
//!
//! ```text
//! before:    thread 0 initializes a "full" mbarrier per stage (one arrival and the stage's
//!            bytes) and an "empty" one (an arrival of every consumer warp); barrier
//! producer:  setmaxnreg.dec; for each iteration i, stage s = i % S:
//!              wait for phase ((i / S) + 1) % 2 of empty[s] (the first round passes at once)
//!              its first thread arrives on full[s] expecting the bytes; its first warp's
//!              lanes copy the boxes
//! consumers: setmaxnreg.inc; for each iteration i: wait for phase (i / S) % 2 of full[s];
//!              the body, its `dot` reading stage s; then lane 0 of each warp arrives on
//!              empty[s], or with one
//!              group of warpgroup MMAs in flight, on the stage of iteration i - 1, whose
//!              MMAs `wgmma.wait_group 1` has just retired (the last one after the loop)
//!            then the rest of the kernel, its barriers named barriers of the consumers
//! ```
//!
//! No barrier of the whole program is left in the loop: the mbarriers say when a stage is
//! full and when it is free again, so the producer runs the whole ring ahead. In a
//! persistent kernel (`persistent`) the ring is set up once, in the prologue, and its stage
//! and phase counters go on from tile to tile, so the producer fetches the next tile's first
//! stages while the consumers are still storing this one's results.
//!
//! The hand-written study (`benches/cuda/wgmma_tma_hand.cu`, docs/performance.md) measured
//! this schedule at the level of the compiler's plain TMA pipeline on the H100, and better
//! with persistence on ragged grids; the autotuner chooses.
//!
//! Specialized: the kernel's first top-level loop whose pipeline fetches every operand
//! through TMA, when everything before it is register arithmetic or global loads (such as
//! attention's Q tile). That is computed again at the start of each side (the loads on the
//! consumers' only), as is the kernel's prologue, so that nothing stays live across the
//! branch in the registers of the kernel's entry.
//!
//! Where a step of the loop issues two or more groups of warpgroup MMAs with most of its
//! other work after them (attention's rotated walk: `Q Kᵀ`, then the previous block's `P V`
//! running beside this block's softmax) and the consumers are two warpgroups or more, they
//! take turns at the tensor cores (FlashAttention-3's
//! ping-pong; `Stmt::Turn`): warpgroup `g` waits at named barrier `2 + g` before its step's
//! first MMA and, once its last group is issued, arrives at the next warpgroup's, so that
//! one's softmax runs while another's MMAs do. The last warpgroup hands the first turn on
//! before the loop, and the first takes the last hand-on after it, so that every barrier
//! completes as often as it is waited at. A barrier of the consumers inside the MMAs of a
//! step would deadlock against a warpgroup waiting for its turn; such a step takes no turns.
//! The hand-written kernel (`benches/cuda/attention_hand.cu`) measured the order worth 9
//! to 15% at head dimension 64.

use super::pipeline::{PipelinePlan, PipelineState};
use super::{LowerError, Lowerer};
use crate::ir::{BinaryOp, CmpOp, Inst, Literal, ValueId};
use crate::layout::Layout;
use crate::thread::{Expr, MBarrier, Memory, Reg, Stmt};
use crate::types::ScalarType;

/// Warps of the producer side: one warpgroup.
const PRODUCER_WARPS: u32 = 4;
/// Registers a producer thread keeps (`setmaxnreg.dec`): it only counts stages and computes
/// box coordinates. 32 beside three consumer warpgroups or more, which then get 160 each
/// (FlashAttention-3's split of the register file).
fn producer_registers(consumers: u32) -> u32 {
    if consumers > 256 {
        32
    } else {
        40
    }
}
/// A program's register file (64 Ki 32-bit registers on every GPU that has `setmaxnreg`).
const REGISTER_FILE: u32 = 64 * 1024;
/// The named barrier the consumers wait at (0 is the whole program's).
const CONSUMER_BARRIER: u32 = 1;
/// The first of the named barriers consumer warpgroups take turns at (one each).
const FIRST_TURN_BARRIER: i64 = 2;
/// Threads at a turn's barrier: the warpgroup waiting and the one handing on.
const TURN_THREADS: u32 = 256;

/// The consumers' side of a warp-specialized pipeline.
pub(crate) struct ConsumerState {
    /// Whether an iteration of this loop has run (then its stage is still to be released
    /// when MMAs stay in flight).
    started: Reg,
    /// Where in the consumers' statements the first turn is handed on, if they take turns.
    first_turn_at: usize,
}

impl Lowerer<'_> {
    /// Whether the loop of `plan`, about to be lowered, gets a producer warpgroup.
    pub(crate) fn can_specialize(&self, plan: &PipelinePlan) -> bool {
        let t = self.target;
        let consumers = self.consumer_threads();
        t.warp_specialize
            && t.tma
            && t.warp_size == 32
            && t.num_warps % 4 == 0
            && consumers + PRODUCER_WARPS * t.warp_size <= 1024
            && self.producer.is_none()
            && self.body.len() == 1
            && !plan.registers
            && plan.stages >= 2
            && plan.loads.iter().all(|l| l.tma.is_some())
            && self.body[0].iter().all(|s| {
                matches!(
                    s,
                    Stmt::Set { .. }
                        | Stmt::Comment(_)
                        | Stmt::Load {
                            mem: Memory::Global { .. },
                            ..
                        }
                )
            })
    }

    /// The ring of `plan`, the producer's loop (kept until the body is lowered), and the
    /// consumers' pipeline state; what is lowered next goes to the consumers' side.
    pub(crate) fn specialize(
        &mut self,
        plan: PipelinePlan,
        inst: &Inst,
        init: &[ValueId],
        layouts: &[Option<Layout>],
        (start, end, step): (Reg, Reg, Reg),
        after: &[super::hoist::AcrossLoop],
    ) -> Result<PipelineState, LowerError> {
        let consumers = self.consumer_threads();
        // What precedes the loop is computed again at the start of each side, once its
        // register budget is set, and the global loads (attention's Q, in the consumers'
        // layout) move to the consumers' side: nothing computed before the branch then stays
        // live across it, in the registers of the kernel's entry (see
        // `prologue_on_each_side`), and the producer's threads, outside every layout, load
        // nothing. (The registers computed before the branch still serve the ring's setup.)
        let before = std::mem::take(&mut self.body[0]);
        let arithmetic: Vec<Stmt> = before
            .iter()
            .filter(|s| !matches!(s, Stmt::Load { .. }))
            .cloned()
            .collect();
        self.body[0] = arithmetic.clone();
        let across_tiles = self.target.persistent;
        // One arrival per consumer warp frees a stage (its lane 0, once the warp's MMAs that
        // read the stage are retired): 8 atomic arrivals a stage rather than 256.
        let arrivals = consumers / self.target.warp_size;
        let mut state = self.pipeline_setup(plan, init, layouts, Some((arrivals, across_tiles)))?;
        let (Some(empty), stages) = (state.tma.as_ref().and_then(|r| r.empty), state.plan.stages) else {
            return Err(self.internal("a specialized pipeline without TMA"));
        };
        // The loop-invariant operands the producer copies itself (`staged`).
        let staged = self.plan_staged_copies(inst, after, arrivals, across_tiles)?;
        let (stage, phase) = (self.ring_counter(0, across_tiles), self.ring_counter(0, across_tiles));
        let iv_ty = self.regs[start].ty;
        let (producer, ()) = self.nested(|l| {
            l.emit(Stmt::SetMaxRegisters {
                count: producer_registers(consumers),
                increase: false,
            });
            for s in &arithmetic {
                l.emit(s.clone());
            }
            l.copy_threads_from = consumers;
            if let Some(staged) = &staged {
                l.staged_copies_producer(staged, across_tiles)?;
            }
            let iv = l.new_reg(iv_ty);
            l.emit(Stmt::Set {
                dst: iv,
                expr: Expr::Copy(start),
            });
            let (cond_body, cond) = l.nested(|l| Ok(l.set(ScalarType::Bool, Expr::Compare(CmpOp::Lt, iv, end))))?;
            let (body, ()) = l.nested(|l| {
                l.wait_until_freed(
                    MBarrier {
                        alloc: empty,
                        index: stage,
                    },
                    phase,
                    "the stage",
                );
                l.issue_copies(&mut state, inst, iv, end, (stage, 0))?;
                l.flip_phase_at_wrap(phase, stage, stages);
                l.next_stage(stage, stages);
                let next = l.set(iv_ty, Expr::Binary(BinaryOp::Add, iv, step));
                l.emit(Stmt::Set {
                    dst: iv,
                    expr: Expr::Copy(next),
                });
                Ok(())
            })?;
            l.emit(Stmt::While { cond_body, cond, body });
            l.copy_threads_from = 0;
            Ok(())
        })?;
        self.producer = Some(producer);
        // The consumers' side, from here to the end of the body.
        self.body.push(Vec::new());
        self.emit(Stmt::SetMaxRegisters {
            count: consumer_registers(consumers),
            increase: true,
        });
        let mut before = before;
        if let Some(staged) = &staged {
            self.drop_staged_loads(staged, &mut before);
        }
        for s in before {
            self.emit(s);
        }
        self.staged = staged;
        let started = self.set(ScalarType::Bool, Expr::Const(Literal::Bool(false)));
        let first_turn_at = self.body.last().map_or(0, Vec::len);
        state.consumer = Some(ConsumerState { started, first_turn_at });
        Ok(state)
    }

    /// The statements of one consumers' step, from `from` in the open list: where they
    /// issue two groups of warpgroup MMAs or more and the consumers are two warpgroups or
    /// more, the step waits for its warpgroup's turn before its first MMA and hands the
    /// turn on after its last group (module comment). Whether it did.
    pub(crate) fn take_turns(&mut self, from: usize) -> bool {
        let groups = self.block_warpgroups();
        if groups < 2 {
            return false;
        }
        let step = &self.body.last().expect("an open statement list")[from..];
        let commits = step.iter().filter(|s| matches!(s, Stmt::WgmmaCommit)).count();
        let (Some(first), Some(last)) = (
            step.iter().position(|s| matches!(s, Stmt::WgmmaFence)),
            step.iter().rposition(|s| matches!(s, Stmt::WgmmaCommit)),
        ) else {
            return false;
        };
        let mut barrier = false;
        crate::thread::walk_stmts(&step[first..=last], &mut |s| {
            barrier |= matches!(s, Stmt::Barrier | Stmt::NamedBarrier { .. });
        });
        // Most of the step's other work must come after its turn, beside the others' MMAs
        // (the rotated walk's softmax); where most of it is between the groups (the
        // tutorial's order), the turns would serialize it.
        let work = |stmts: &[Stmt]| {
            let mut n = 0usize;
            crate::thread::walk_stmts(stmts, &mut |s| n += matches!(s, Stmt::Set { .. }) as usize);
            n
        };
        let overlapped = work(&step[first..=last]) < work(&step[last + 1..]);
        if commits < 2 || first > last || barrier || !overlapped {
            return false;
        }
        let (own, next) = self.turn_barriers(groups);
        let list = self.body.last_mut().expect("an open statement list");
        list.insert(from + last + 1, turn(next, false, None));
        list.insert(from + first, turn(own, true, None));
        true
    }

    /// After the consumers' loop whose steps took turns: the last warpgroup's first
    /// hand-on goes in before the loop (at `c.first_turn_at`), and the first warpgroup
    /// takes the last one's final hand-on here, so that no barrier is left half-way.
    pub(crate) fn close_turns(&mut self, c: &ConsumerState) {
        let groups = self.block_warpgroups();
        let group = self.block_warpgroup_id();
        let (zero, last) = (self.i32c(0), self.i32c(groups as i64 - 1));
        let first_barrier = self.i32c(FIRST_TURN_BARRIER);
        let is_last = self.pset(ScalarType::Bool, Expr::Compare(CmpOp::Eq, group, last));
        let is_first = self.pset(ScalarType::Bool, Expr::Compare(CmpOp::Eq, group, zero));
        let list = self.body.last_mut().expect("an open statement list");
        list.insert(c.first_turn_at, turn(first_barrier, false, Some(is_last)));
        self.emit(turn(first_barrier, true, Some(is_first)));
    }

    /// This consumer warpgroup's turn barrier and the next one's.
    fn turn_barriers(&mut self, groups: u32) -> (Reg, Reg) {
        let group = self.block_warpgroup_id();
        let (one, count, base) = (self.i32c(1), self.i32c(groups as i64), self.i32c(FIRST_TURN_BARRIER));
        let after = self.pset(ScalarType::I32, Expr::Binary(BinaryOp::Add, group, one));
        let wraps = self.pset(ScalarType::Bool, Expr::Compare(CmpOp::Eq, after, count));
        let zero = self.i32c(0);
        let next_group = self.pset(ScalarType::I32, Expr::Select(wraps, zero, after));
        let own = self.pset(ScalarType::I32, Expr::Binary(BinaryOp::Add, group, base));
        let next = self.pset(ScalarType::I32, Expr::Binary(BinaryOp::Add, next_group, base));
        (own, next)
    }

    /// At the end of a consumers' iteration (before the ring advances): the stage whose
    /// MMAs are known complete goes back to the producer.
    pub(crate) fn release_stage(&mut self, state: &PipelineState, c: &ConsumerState) {
        let Some(empty) = state.tma.as_ref().and_then(|r| r.empty) else {
            return;
        };
        let lane0 = self.lane_zero();
        if state.plan.in_flight.is_none() {
            self.emit(Stmt::MbarrierArrive {
                bar: MBarrier {
                    alloc: empty,
                    index: state.read,
                },
                pred: Some(lane0),
            });
            return;
        }
        // This iteration's MMAs may still read stage `read`; the previous one's are done.
        self.release_previous_stage(empty, state, c);
        self.emit(Stmt::Set {
            dst: c.started,
            expr: Expr::Const(Literal::Bool(true)),
        });
    }

    /// After the consumers' loop and its last `wgmma.wait_group 0`: the last stage read goes
    /// back too, where MMAs were left in flight (the producer of a persistent kernel waits
    /// for it in the next tile).
    pub(crate) fn release_last_stage(&mut self, state: &PipelineState, c: &ConsumerState) {
        let Some(empty) = state.tma.as_ref().and_then(|r| r.empty) else {
            return;
        };
        if state.plan.in_flight.is_some() {
            self.release_previous_stage(empty, state, c);
        }
    }

    /// Lane 0 of each warp arrives on the "empty" mbarrier of the stage read before `read`,
    /// if an iteration has run.
    fn release_previous_stage(&mut self, empty: u32, state: &PipelineState, c: &ConsumerState) {
        let previous = self.previous_stage(state);
        let lane0 = self.lane_zero();
        let pred = self.set(ScalarType::Bool, Expr::Binary(BinaryOp::And, c.started, lane0));
        self.emit(Stmt::MbarrierArrive {
            bar: MBarrier {
                alloc: empty,
                index: previous,
            },
            pred: Some(pred),
        });
    }

    /// The producer waits until the consumers have freed what `empty` counts (`what`): for
    /// the phase before `phase`, so that the first round passes at once.
    pub(crate) fn wait_until_freed(&mut self, empty: MBarrier, phase: Reg, what: &str) {
        let one = self.i32c(1);
        let freed = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Xor, phase, one));
        self.emit(Stmt::Comment(format!("producer: wait until the consumers free {what}")));
        self.emit(Stmt::MbarrierWait {
            bar: empty,
            parity: freed,
        });
    }

    /// Whether this thread is lane 0 of its warp.
    pub(crate) fn lane_zero(&mut self) -> Reg {
        let (_, lane, _) = self.thread_ids();
        let zero = self.i32c(0);
        self.pset(ScalarType::Bool, Expr::Compare(CmpOp::Eq, lane, zero))
    }

    /// `read == 0 ? S - 1 : read - 1`: the stage read before `read` (a select, where a
    /// remainder would be a division every iteration).
    fn previous_stage(&mut self, state: &PipelineState) -> Reg {
        let (zero, one) = (self.i32c(0), self.i32c(1));
        let last = self.i32c(state.plan.stages as i64 - 1);
        let first = self.set(ScalarType::Bool, Expr::Compare(CmpOp::Eq, state.read, zero));
        let back = self.set(ScalarType::I32, Expr::Binary(BinaryOp::Sub, state.read, one));
        self.set(ScalarType::I32, Expr::Select(first, last, back))
    }

    /// At the end of the body: the two sides become one statement, the consumers' barriers
    /// named ones of theirs (the producer never comes), the last one making the consumers'
    /// shared memory free again for a persistent kernel's next tile.
    pub(crate) fn finish_specialized(&mut self) -> Result<(), LowerError> {
        let Some(producer) = self.producer.take() else {
            return Ok(());
        };
        let mut consumer = self.body.pop().ok_or_else(|| self.internal("no consumers' side"))?;
        let consumers = self.consumer_threads();
        let named = Stmt::NamedBarrier {
            id: CONSUMER_BARRIER,
            threads: consumers,
        };
        crate::thread::walk_stmts_mut(&mut consumer, &mut |s| {
            if matches!(s, Stmt::Barrier) {
                *s = named.clone();
            }
        });
        consumer.push(named);
        self.emit(Stmt::Specialized { producer, consumer });
        self.producer_warps = PRODUCER_WARPS;
        Ok(())
    }
}

/// The kernel's prologue (registers that depend on the thread only: its ids, layout offsets,
/// constants) computed again at the start of each side of a warp-specialized kernel, after
/// its register budget is set. Otherwise they are live across the branch into the sides,
/// in the registers of the kernel's entry, which the launch bounds (168 a thread with a
/// producer and two consumer warpgroups) before `setmaxnreg` raises the consumers' budget:
/// `ptxas` spilled them there (warp-specialized attention, 128 x 128 blocks: 564 bytes,
/// whatever the consumers' budget). Computing them again changes no value. Only the
/// prologue's register arithmetic: a persistent kernel's ring is set up there once too.
pub(crate) fn prologue_on_each_side(body: &mut [Stmt], prologue: &[Stmt]) {
    let prologue: Vec<&Stmt> = prologue.iter().filter(|s| matches!(s, Stmt::Set { .. })).collect();
    for s in body.iter_mut() {
        if let Stmt::Specialized { producer, consumer } = s {
            for side in [producer, consumer] {
                let at = side
                    .iter()
                    .position(|s| !matches!(s, Stmt::SetMaxRegisters { .. }))
                    .unwrap_or(side.len());
                side.splice(at..at, prologue.iter().map(|&s| s.clone()));
            }
        }
    }
}

/// A wait for a turn (`wait`) or a hand-on, at named barrier `id`.
fn turn(id: Reg, wait: bool, pred: Option<Reg>) -> Stmt {
    Stmt::Turn {
        id,
        threads: TURN_THREADS,
        wait,
        pred,
    }
}

/// The most registers a thread holds, as a `setmaxnreg` count (a multiple of 8).
const MAX_THREAD_REGISTERS: u32 = 248;

/// The registers each of a thread block's `threads` holds at entry, as `ptxas` fixes them
/// for a kernel that moves registers with `setmaxnreg`: the register file shared evenly, a
/// multiple of 8 (168 for 384 threads, 128 for 512, 96 for 640).
fn entry_registers(threads: u32) -> u32 {
    (REGISTER_FILE / threads.max(1) / 8 * 8).min(MAX_THREAD_REGISTERS)
}

/// The registers a consumer thread asks for: what the producer warpgroup's
/// `setmaxnreg.dec` leaves of the thread block's registers at entry, a multiple of 8, at
/// most 256. `setmaxnreg.inc` takes registers from the block's own pool and waits until it
/// has them: a budget past the pool hangs the block (four programs a block, 640 threads at
/// 96 registers, asked for 120 each for their 512 consumers where 112 fit).
fn consumer_registers(consumers: u32) -> u32 {
    let producer_threads = PRODUCER_WARPS * 32;
    let threads = consumers + producer_threads;
    let pool = entry_registers(threads) * threads;
    let left = pool - producer_registers(consumers) * producer_threads;
    (left / consumers / 8 * 8).min(256)
}

//! Several programs a thread block, sharing one producer (`Target::programs_per_block`).
//!
//! A warp-specialized loop whose copies do not depend on `program_id(0)` (attention's K and
//! V: the same key blocks for every query block of a head) fetches the same boxes in every
//! program along grid axis 0. With `programs_per_block = R`, a thread block runs `R`
//! consecutive programs as `R` groups of `num_warps` consumer warps beside one producer
//! warpgroup, which fills one ring for all of them:
//!
//! ```text
//! threads 0 .. R·P          the consumers: group g = tid / P is program
//!                           min(block·R + g, grid_x - 1), its threads tid % P
//! threads R·P .. R·P + 128  the producer: the ring's copies, once a block
//! ```
//!
//! (`P = num_warps · 32`.) This is FlashAttention-3's form, three consumer warpgroups of
//! 64 query rows each at 160 registers, which no block of one program expresses (192 rows
//! are not a power of two) and which the hand-written study measured at 65% of cuBLAS on an
//! H200 against 56% for two (`benches/cuda/attention_hand.cu`, docs/performance.md).
//!
//! The kernel is lowered for one program of `num_warps` warps, except that:
//! - thread coordinates of layouts are the thread's index in its program
//!   (`program_thread_id`), and `program_id(0)` / `num_programs(0)` are the group's
//!   program and the grid's x, an i32 parameter after the kernel's own
//!   ([`PROGRAMS_PARAM`]); the block's own index is only the raw `Special::ProgramId`;
//! - the producer's thread range, the consumers' named barrier, the ring's "empty"
//!   arrivals and the warpgroups that take turns at the tensor cores count every group;
//!
//! then [`share_producer`] finishes the kernel: it refuses one whose producer, or whose
//! consumers' block-wide statements (their own TMA copies, which the block's first thread
//! issues for every group, and loops or branches around barriers), read `program_id(0)`;
//! it gives each group its own copy of the consumers' shared buffers (those
//! the producer never touches: Q's tile, the conversions, the result's staging), and turns
//! off every global write of a group past the grid's end, whose program id was clamped to
//! the last one so that its loads stay in bounds.

use super::Lowerer;
use crate::ir::{BinaryOp, CmpOp, Literal};
use crate::thread::{Expr, Memory, Reg, RegData, Special, Stmt, ThreadKernel, WgmmaA};
use crate::types::ScalarType;
use std::collections::{BTreeSet, HashMap};

/// The name of the parameter that holds the program grid's x.
pub const PROGRAMS_PARAM: &str = "rutile_programs_x";

/// The most programs a block may run.
pub const MAX_PROGRAMS_PER_BLOCK: u32 = 8;

impl Lowerer<'_> {
    /// Programs a thread block runs (1 but with `Target::programs_per_block`).
    pub(crate) fn programs_per_block(&self) -> u32 {
        self.target.programs_per_block.max(1)
    }

    /// The thread's index in its program, in the prologue: the thread block's, or its
    /// group's where a block runs several programs.
    pub(crate) fn program_thread_id(&mut self) -> Reg {
        let tid = self.pset(ScalarType::I32, Expr::Special(Special::ThreadId));
        if self.programs_per_block() == 1 {
            return tid;
        }
        let mask = self.i32c(self.target.threads() as i64 - 1);
        self.pset(ScalarType::I32, Expr::Binary(BinaryOp::And, tid, mask))
    }

    /// The consumer threads of the thread block: all its programs'.
    pub(crate) fn consumer_threads(&self) -> u32 {
        self.target.threads() * self.programs_per_block()
    }

    /// The consumer warpgroups of the thread block: all its programs'.
    pub(crate) fn block_warpgroups(&self) -> u32 {
        self.consumer_threads() / 128
    }

    /// The parameter that holds the program grid's x, after the kernel's own.
    fn grid_x_param(&self) -> u32 {
        self.k.params.len() as u32
    }

    /// The thread's warpgroup in the thread block (`tid >> 7`), in the prologue: whose turn
    /// it is at the tensor cores goes round every program's.
    pub(crate) fn block_warpgroup_id(&mut self) -> Reg {
        let tid = self.pset(ScalarType::I32, Expr::Special(Special::ThreadId));
        let seven = self.i32c(7);
        self.pset(ScalarType::I32, Expr::Binary(BinaryOp::Shr, tid, seven))
    }

    /// What `program_id(axis)` reads.
    pub(crate) fn program_id(&mut self, axis: u8) -> Expr {
        if axis != 0 || self.programs_per_block() == 1 {
            return Expr::Special(Special::ProgramId(axis));
        }
        Expr::Copy(self.block_program())
    }

    /// What `num_programs(axis)` reads.
    pub(crate) fn num_programs(&mut self, axis: u8) -> Expr {
        if axis != 0 || self.programs_per_block() == 1 {
            return Expr::Special(Special::NumPrograms(axis));
        }
        Expr::Param(self.grid_x_param())
    }

    /// The thread's program along x where a block runs several, in the prologue:
    /// `min(block * R + tid / P, grid_x - 1)` (a group past the grid's end computes the last
    /// program again, its writes turned off by `share_producer`). A persistent kernel's
    /// block changes from tile to tile: there it is computed where it is read, from the
    /// block index the tile loop gives (`persistent::tile_loop`).
    fn block_program(&mut self) -> Reg {
        if let Some(r) = self.cache.block_program {
            return r;
        }
        let i32t = ScalarType::I32;
        let tid = self.pset(i32t, Expr::Special(Special::ThreadId));
        let shift = self.i32c(self.target.threads().trailing_zeros() as i64);
        let group = self.pset(i32t, Expr::Binary(BinaryOp::Shr, tid, shift));
        let per_block = self.i32c(self.programs_per_block() as i64);
        let one = self.i32c(1);
        let grid = self.pset(i32t, Expr::Param(self.grid_x_param()));
        let last = self.pset(i32t, Expr::Binary(BinaryOp::Sub, grid, one));
        let per_tile = self.target.persistent;
        let set = |l: &mut Self, expr| {
            if per_tile {
                l.set(i32t, expr)
            } else {
                l.pset(i32t, expr)
            }
        };
        let block = set(self, Expr::Special(Special::ProgramId(0)));
        let first = set(self, Expr::Binary(BinaryOp::Mul, block, per_block));
        let program = set(self, Expr::Binary(BinaryOp::Add, first, group));
        let clamped = set(self, Expr::Binary(BinaryOp::Min, program, last));
        if !per_tile {
            self.cache.block_program = Some(clamped);
        }
        clamped
    }
}

/// Finishes a kernel lowered for blocks of `programs` programs (module comment): its
/// warp-specialized statement is the body's last; `program_threads` threads a program.
pub(super) fn share_producer(kernel: &mut ThreadKernel, programs: u32, program_threads: u32) -> Result<(), String> {
    // (The last parameter: `Lowerer::grid_x_param`.)
    let grid_x_param = kernel.params.len() as u32 - 1;
    kernel.block_programs = Some(crate::thread::BlockPrograms { programs, grid_x_param });
    let mut body = std::mem::take(&mut kernel.body);
    let result = share(kernel, &mut body, programs, program_threads);
    kernel.body = body;
    result
}

fn share(kernel: &mut ThreadKernel, body: &mut [Stmt], programs: u32, program_threads: u32) -> Result<(), String> {
    let grid_x_param = kernel.block_programs.expect("set by share_producer").grid_x_param;
    let Some((Stmt::Specialized { producer, consumer }, entry)) = body.split_last_mut() else {
        return Err(format!(
            "programs_per_block = {programs} shares a producer warpgroup, but no loop of this kernel was warp-specialized (that needs warp_specialize, a loop whose `dot` operands all come through TMA, and only register arithmetic and loads before it); launch with programs_per_block = 1"
        ));
    };
    // The producer fetches once for every program of the block: what it reads must be
    // the same in all of them. So must the consumers' own copies through TMA (the ragged
    // last key block's, after the specialized walk), which the block's first thread issues
    // for all groups into the same buffers, and every loop or branch around a barrier,
    // which all groups reach together.
    let (entry, producer): (&[Stmt], &[Stmt]) = (entry, producer);
    let shared_side = [entry, producer];
    let everything = [entry, producer, consumer.as_slice()];
    let mut seeds = BTreeSet::new();
    for list in everything {
        crate::thread::walk_stmts(list, &mut |s| collect_program_regs(s, grid_x_param, &mut seeds));
    }
    let tainted = taint(&everything, &seeds);
    if reads_any(&shared_side, &tainted, &|_| true) {
        return Err(format!(
            "programs_per_block = {programs}: the producer's copies depend on program_id(0) (a causal walk's bounds, a tile's offsets), so the {programs} programs of a block cannot share them; launch with programs_per_block = 1"
        ));
    }
    if reads_any(&[consumer], &tainted, &|s| {
        is_block_wide(s) || (is_control(s) && synchronizes(s))
    }) {
        return Err(format!(
            "programs_per_block = {programs}: the consumers' copies through TMA, or a loop or branch around their barriers, depend on program_id(0), so the {programs} programs of a block cannot run them together; launch with programs_per_block = 1"
        ));
    }
    // The consumers' own shared buffers: those neither the producer, the set-up nor the
    // consumers' copies through TMA touch.
    let mut common = BTreeSet::new();
    for list in shared_side {
        crate::thread::walk_stmts(list, &mut |s| s.shared_buffers(&mut |a| _ = common.insert(a)));
    }
    crate::thread::walk_stmts(consumer, &mut |s| {
        if is_block_wide(s) {
            s.shared_buffers(&mut |a| _ = common.insert(a));
        }
    });
    let mut own = BTreeSet::new();
    crate::thread::walk_stmts(consumer, &mut |s| s.shared_buffers(&mut |a| _ = own.insert(a)));
    own.retain(|a| !common.contains(a));

    let mut rw = Rewrite {
        kernel,
        offsets: HashMap::new(),
        active: None,
        pid: None,
    };
    let mut prefix = Vec::new();
    let i32t = ScalarType::I32;
    let tid = rw.set(&mut prefix, i32t, Expr::Special(Special::ThreadId));
    let shift = rw.set(
        &mut prefix,
        i32t,
        Expr::Const(Literal::Int(program_threads.trailing_zeros() as i64)),
    );
    let group = rw.set(&mut prefix, i32t, Expr::Binary(BinaryOp::Shr, tid, shift));
    for &a in &own {
        let buffer = &mut rw.kernel.shared[a as usize];
        let elem = buffer.elem.size_bytes() as u32;
        // Each copy starts on the buffer's boundary (1024 bytes for a swizzled MMA operand,
        // whose swizzle the hardware applies to address bits).
        let step = (buffer.len * elem).next_multiple_of(buffer.align.max(16)) / elem;
        buffer.len = step * programs;
        let step = rw.set(&mut prefix, i32t, Expr::Const(Literal::Int(step as i64)));
        let offset = rw.set(&mut prefix, i32t, Expr::Binary(BinaryOp::Mul, group, step));
        rw.offsets.insert(a, offset);
    }
    let block = rw.set(&mut prefix, i32t, Expr::Special(Special::ProgramId(0)));
    let per_block = rw.set(&mut prefix, i32t, Expr::Const(Literal::Int(programs as i64)));
    let first = rw.set(&mut prefix, i32t, Expr::Binary(BinaryOp::Mul, block, per_block));
    let program = rw.set(&mut prefix, i32t, Expr::Binary(BinaryOp::Add, first, group));
    let grid = rw.set(&mut prefix, i32t, Expr::Param(grid_x_param));
    rw.active = Some(rw.set(&mut prefix, ScalarType::Bool, Expr::Compare(CmpOp::Lt, program, grid)));
    let y = rw.set(&mut prefix, i32t, Expr::Special(Special::ProgramId(1)));
    let z = rw.set(&mut prefix, i32t, Expr::Special(Special::ProgramId(2)));
    rw.pid = Some([program, y, z]);
    rw.list(consumer);
    let at = usize::from(matches!(consumer.first(), Some(Stmt::SetMaxRegisters { .. })));
    consumer.splice(at..at, prefix);
    Ok(())
}

/// The consumers' statements made per program: own shared buffers at the group's copy,
/// global writes only where the group's program is within the grid.
struct Rewrite<'k> {
    kernel: &'k mut ThreadKernel,
    offsets: HashMap<u32, Reg>,
    active: Option<Reg>,
    pid: Option<[Reg; 3]>,
}

impl Rewrite<'_> {
    /// `dst = expr` appended to `list`, `dst` a new register of type `ty`.
    fn set(&mut self, list: &mut Vec<Stmt>, ty: ScalarType, expr: Expr) -> Reg {
        let dst = self.kernel.regs.append(RegData { ty });
        list.push(Stmt::Set { dst, expr });
        dst
    }

    fn list(&mut self, list: &mut Vec<Stmt>) {
        for mut s in std::mem::take(list) {
            match &mut s {
                Stmt::If {
                    then_body, else_body, ..
                } => {
                    self.list(then_body);
                    self.list(else_body);
                }
                Stmt::While { cond_body, body, .. } => {
                    self.list(cond_body);
                    self.list(body);
                }
                _ => {}
            }
            self.stmt(&mut s, list);
            list.push(s);
        }
    }

    /// Rewrites `s`, the statements it needs first going to `out`.
    fn stmt(&mut self, s: &mut Stmt, out: &mut Vec<Stmt>) {
        match s {
            Stmt::Load {
                mem: Memory::Shared { alloc },
                index,
                ..
            }
            | Stmt::Store {
                mem: Memory::Shared { alloc },
                index,
                ..
            }
            | Stmt::LdMatrix { alloc, index, .. }
            | Stmt::CoopLoad { alloc, index, .. }
            | Stmt::CoopStore { alloc, index, .. }
            | Stmt::AsyncCopy { alloc, dst: index, .. } => self.offset(*alloc, index, out),
            Stmt::TmaStore { alloc, src, pred, .. } => {
                self.offset(*alloc, src, out);
                self.guard(pred, out);
            }
            Stmt::Wgmma { a, b, .. } => {
                if let WgmmaA::Shared(m) = a {
                    self.offset(m.alloc, &mut m.index, out);
                }
                self.offset(b.alloc, &mut b.index, out);
            }
            Stmt::Store {
                mem: Memory::Global { .. },
                pred,
                ..
            }
            | Stmt::Atomic { pred, .. }
            | Stmt::AtomicCas { pred, .. } => self.guard(pred, out),
            Stmt::Print { pred, program, .. } => {
                self.guard(pred, out);
                program.get_or_insert(self.pid.expect("set before the walk"));
            }
            _ => {}
        }
    }

    /// `index` moved to the group's copy of `alloc`, if the consumers own it.
    fn offset(&mut self, alloc: u32, index: &mut Reg, out: &mut Vec<Stmt>) {
        let Some(&offset) = self.offsets.get(&alloc) else {
            return;
        };
        let ty = self.kernel.regs[*index].ty;
        let offset = if ty == ScalarType::I32 {
            offset
        } else {
            self.set(out, ty, Expr::Cast(offset))
        };
        *index = self.set(out, ty, Expr::Binary(BinaryOp::Add, *index, offset));
    }

    /// `pred` and'ed with whether the group's program is within the grid.
    fn guard(&mut self, pred: &mut Option<Reg>, out: &mut Vec<Stmt>) {
        let active = self.active.expect("set before the walk");
        *pred = Some(match *pred {
            Some(p) => self.set(out, ScalarType::Bool, Expr::Binary(BinaryOp::And, p, active)),
            None => active,
        });
    }
}

/// Adds to `seeds` the registers `s` sets from the program's x or the grid's.
fn collect_program_regs(s: &Stmt, grid_x_param: u32, seeds: &mut BTreeSet<Reg>) {
    if let Stmt::Set { dst, expr } = s {
        if matches!(expr, Expr::Special(Special::ProgramId(0) | Special::NumPrograms(0)))
            || *expr == Expr::Param(grid_x_param)
        {
            seeds.insert(*dst);
        }
    }
}

/// The registers the statements of `lists` compute from `seeds` (through `Set`s, to a
/// fixed point: loops carry registers around).
fn taint(lists: &[&[Stmt]], seeds: &BTreeSet<Reg>) -> BTreeSet<Reg> {
    let mut tainted = seeds.clone();
    loop {
        let before = tainted.len();
        for list in lists {
            crate::thread::walk_stmts(list, &mut |s| {
                if let Stmt::Set { dst, expr } = s {
                    if crate::thread::operands(expr).iter().any(|r| tainted.contains(r)) {
                        tainted.insert(*dst);
                    }
                }
            });
        }
        if tainted.len() == before {
            return tainted;
        }
    }
}

/// Whether a statement of `lists` that `which` picks, other than a `Set`, reads a register
/// of `tainted`.
fn reads_any(lists: &[&[Stmt]], tainted: &BTreeSet<Reg>, which: &dyn Fn(&Stmt) -> bool) -> bool {
    let mut found = false;
    for list in lists {
        crate::thread::walk_stmts(list, &mut |s| {
            if which(s) {
                crate::thread::reads(s, &mut |r| found |= tainted.contains(&r));
            }
        });
    }
    found
}

/// A statement the consumers of a block run once for all its programs: the block's first
/// thread issues copies through TMA, everyone waits at the same mbarriers.
fn is_block_wide(s: &Stmt) -> bool {
    matches!(
        s,
        Stmt::TmaLoad { .. }
            | Stmt::MbarrierInit { .. }
            | Stmt::MbarrierArriveExpectTx { .. }
            | Stmt::MbarrierWait { .. }
            | Stmt::MbarrierArrive { .. }
            | Stmt::MbarrierInval { .. }
    )
}

fn is_control(s: &Stmt) -> bool {
    matches!(s, Stmt::If { .. } | Stmt::While { .. })
}

/// Whether `s` holds a barrier or a block-wide statement (see `is_block_wide`).
fn synchronizes(s: &Stmt) -> bool {
    let mut found = false;
    crate::thread::walk_stmts(std::slice::from_ref(s), &mut |n| {
        found |= is_block_wide(n)
            || matches!(
                n,
                Stmt::Barrier | Stmt::NamedBarrier { .. } | Stmt::Turn { .. } | Stmt::ClusterBarrier
            );
    });
    found
}

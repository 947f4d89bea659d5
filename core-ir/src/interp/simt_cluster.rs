//! The simulator's thread-block clusters: kernels whose `cluster` consecutive programs along
//! grid axis 0 reach each other's shared memory (`Stmt::ClusterStore`) and wait for each
//! other (`Stmt::ClusterBarrier`).
//!
//! Why turns: a program that reaches a cluster barrier must stop there, deep in its walk,
//! until every program of its cluster has reached one, and then go on. The walk is a stack
//! of frames (`simt_exec.rs`) that can stop and resume, so the programs of a cluster need no
//! threads of their own (the block interpreter's clusters do, `interp/cluster.rs`): each has
//! its own simulator state (registers, shared memory, race tracks, ...) and walk, and they
//! take turns in one OS thread, in rank order. A program's turn runs until it passes a
//! cluster barrier (a barrier of the program too: its barrier epoch moves on) or ends. When
//! every program of the cluster waits at a cluster barrier, the round ends and all go on;
//! when every program has ended, the next cluster starts. Clusters run one after another in
//! program order (axis 0 fastest), so a launch is deterministic.
//!
//! Why remote stores wait for the barrier: on a GPU a `ClusterStore` lands in the other
//! program's shared memory at some time before the next cluster barrier completes, and only
//! after it is the receiver sure to see it. So a store is queued (rank, buffer, element,
//! value, with the storing statement for faults), and the queues of all programs are
//! delivered, in rank order, when the round ends. A receiver that reads or writes an element
//! between the same two cluster barriers as a remote store to it would race with the store
//! on a GPU: a missing-barrier fault (here it would see the old value, or lose its write).
//! Delivered elements count as written just before the barrier, for the receiver's race and
//! initialization tracking.
//!
//! Global memory belongs to the launch: the running program's state holds the launch's
//! exclusive borrow of the buffers for its turn and gives it back at the turn's end (the
//! others hold an empty slice meanwhile), so no two programs can reach the buffers at once,
//! without any `unsafe`. Programs are not checked against each other in global memory, as
//! programs of different clusters are not.
//!
//! A cluster barrier may come split in two (`Stmt::ClusterArrive` early, `Stmt::ClusterWait`
//! later): the round ends at the wait, and stores made before the arrive are delivered
//! there. For the program's own accesses the arrive moves its barrier epoch on and the
//! wait does not: what a thread did before its arrive is ordered before what any thread of
//! the cluster does after its wait, and what it does between the two is ordered with
//! nothing, so a remote store that lands at the wait races with the receiver's accesses
//! between its arrive and wait. (One race this misses: two warps of one program, one
//! accessing an element before the arrive and the other between the arrive and the wait.
//! The lowering arrives before the kernel's first access to memory.) That the halves pair
//! up, at the kernel's top level, with no store into another program between them, is the
//! verifier's check (`thread/verify.rs`), made before a launch.
//!
//! Faults, besides each program's own: a remote store to a rank outside the cluster or an
//! element outside the buffer (out of bounds); a remote store before the program's first
//! cluster barrier (the receiver may not have started) or after its last one (the receiver
//! may have exited), or racing with the receiver's own accesses (missing barrier); two
//! remote stores of different values to one element in one round (racing stores); a
//! cluster in which some programs ended while others wait at a cluster barrier
//! ([`InterpError::ClusterBarrierMismatch`]: a hang on a GPU, an error here). Warp-specialized
//! and persistent kernels never come in clusters (the lowering refuses them): an invalid-IR
//! fault at launch.

use super::exec::{Frame, Turn};
use super::{bits, fault, shared_memory, zeroed_shared, SharedStats, Sim, SimFault, Track};
use crate::interp::error::{pid, FaultKind, InterpError};
use crate::interp::memory::{self, Buffers, Memory};
use crate::interp::tensor::{Data, Pointer, Tensor};
use crate::interp::{HostBuffer, MAX_CLUSTER};
use crate::thread::{Stmt, ThreadKernel};
use std::collections::HashMap;

/// A program's place in its cluster and its remote stores of the current round.
pub(super) struct Member<'s> {
    /// Programs per cluster.
    size: usize,
    /// This program's rank in its cluster: `program_id(0) % size`.
    rank: usize,
    /// Cluster barriers the cluster has passed together.
    barriers: u64,
    /// The program's barrier epoch just after the last cluster barrier (the first one of
    /// the program before any).
    since: u32,
    /// The remote stores made since the last cluster barrier, delivered at the next.
    outbox: Vec<RemoteStore<'s>>,
}

/// One execution of a `ClusterStore`: per thread of the program, the rank, element and value,
/// where `active`.
struct RemoteStore<'s> {
    stmt: &'s Stmt,
    /// The block op it was lowered from, for faults.
    context: &'s str,
    alloc: u32,
    ranks: Vec<i64>,
    index: Vec<i64>,
    value: Data,
    active: Vec<bool>,
}

/// `Track::write_stmt` of an element a remote store wrote (no statement of the program did).
const REMOTE: u64 = u64::MAX;

impl RemoteStore<'_> {
    /// The error of fault `f` of this store, made by program `program`.
    fn error(&self, k: &ThreadKernel, program: [u32; 3], f: SimFault) -> InterpError {
        InterpError::ThreadFault {
            kind: f.kind,
            stmt: k.stmt_text(self.stmt),
            context: self.context.to_string(),
            program,
            thread: f.thread.map(|t| t as u32),
            message: f.message,
        }
    }

    fn threads(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.active.len()).filter(|&t| self.active[t])
    }
}

/// The launch's checks of a kernel's cluster: its size (1 to [`MAX_CLUSTER`]), a grid of
/// whole clusters along axis 0, and a kernel that can run in clusters.
pub(super) fn check_launch(k: &ThreadKernel, grid: [u32; 3]) -> Result<(), InterpError> {
    let cluster = k.cluster;
    if cluster == 1 {
        return Ok(());
    }
    if cluster == 0 || cluster > MAX_CLUSTER {
        return Err(InterpError::ClusterSize { cluster });
    }
    if grid[0] % cluster != 0 {
        return Err(InterpError::GridNotClustered { grid, cluster });
    }
    if k.persistent.is_some() || k.producer_warps > 0 {
        return Err(InterpError::ThreadFault {
            kind: FaultKind::InvalidIr,
            stmt: String::new(),
            context: String::new(),
            program: [0; 3],
            thread: None,
            message: format!(
                "a {} kernel in clusters of {cluster}: the lowering makes none, and the simulator does not run one",
                if k.persistent.is_some() {
                    "persistent"
                } else {
                    "warp-specialized"
                }
            ),
        });
    }
    Ok(())
}

/// Runs the grid of a kernel with clusters (of 2 to [`MAX_CLUSTER`] programs, dividing
/// `grid[0]`: [`check_launch`]), cluster by cluster, as the module comment says. `global` is
/// the launch's memory, `args` the parameters' values, `names` the shared buffers' names.
pub(super) fn run<'s>(
    k: &'s ThreadKernel,
    grid: [u32; 3],
    global: Memory<'s>,
    args: Vec<Tensor>,
    names: &'s [String],
) -> Result<SharedStats, InterpError> {
    let n = k.cluster as usize;
    let Memory {
        buffers,
        param_buffer,
        param_names,
    } = global;
    // The launch's buffers, held by the running program during its turn.
    let mut held = buffers;
    let mut sets: Vec<Vec<HostBuffer>> = (0..n).map(|_| zeroed_shared(k)).collect();
    let mut sims: Vec<Sim<'_>> = sets
        .iter_mut()
        .enumerate()
        .map(|(rank, set)| {
            let global = Memory {
                buffers: Buffers::Exclusive(&mut []),
                param_buffer: param_buffer.clone(),
                param_names: param_names.clone(),
            };
            let mut sim = Sim::new(k, grid, global, shared_memory(k, set, names), args.clone());
            sim.cluster = Some(Member {
                size: n,
                rank,
                barriers: 0,
                since: 1,
                outbox: Vec::new(),
            });
            sim
        })
        .collect();
    for z in 0..grid[2] {
        for y in 0..grid[1] {
            for c in 0..grid[0] / n as u32 {
                run_cluster(k, &mut sims, &mut held, [c * n as u32, y, z])?;
            }
        }
    }
    let (first, rest) = sims.split_first_mut().expect("a cluster has programs");
    for sim in rest {
        for (key, counts) in std::mem::take(&mut sim.shared_counts) {
            first.shared_counts.entry(key).or_default().add(counts);
        }
    }
    Ok(first.stats())
}

/// Runs the cluster whose first program is `first`: turns until every program has ended.
fn run_cluster<'s>(
    k: &'s ThreadKernel,
    sims: &mut [Sim<'s>],
    held: &mut Buffers<'s>,
    first: [u32; 3],
) -> Result<(), InterpError> {
    let mut walks: Vec<Vec<Frame<'s>>> = Vec::with_capacity(sims.len());
    for (rank, sim) in sims.iter_mut().enumerate() {
        sim.start([first[0] + rank as u32, first[1], first[2]]);
        let epoch = sim.epoch;
        let member = sim.member();
        member.barriers = 0;
        member.since = epoch;
        member.outbox.clear();
        walks.push(vec![Frame::List { stmts: &k.body, pc: 0 }]);
    }
    // Per program: the cluster barrier it waits at and the block op it was lowered from;
    // `None` once it has ended (its walk is then empty).
    let mut waits: Vec<Option<&'s str>> = vec![None; sims.len()];
    loop {
        for ((sim, walk), wait) in sims.iter_mut().zip(&mut walks).zip(&mut waits) {
            if walk.is_empty() {
                continue;
            }
            std::mem::swap(&mut sim.global.buffers, held);
            let turn = sim.run_frames(walk, false).and_then(|turn| match turn {
                Turn::Done => sim.finish().map(|()| turn),
                _ => Ok(turn),
            });
            std::mem::swap(&mut sim.global.buffers, held);
            *wait = match turn? {
                Turn::Done => None,
                Turn::ClusterBarrier => Some(sim.context),
                Turn::Blocked { .. } => unreachable!("a program's own walk faults at a wait that cannot pass"),
            };
        }
        let ended = walks.iter().position(Vec::is_empty);
        let waiting = waits.iter().position(Option::is_some);
        match (ended, waiting) {
            (Some(e), Some(w)) => {
                return Err(InterpError::ClusterBarrierMismatch {
                    context: waits[w].unwrap_or_default().to_string(),
                    first,
                    size: sims.len() as u32,
                    ended: sims[e].pid,
                    waiting: sims[w].pid,
                    barriers: sims[w].member().barriers,
                })
            }
            (None, Some(_)) => deliver(k, sims)?,
            (_, None) => return check_outboxes_empty(k, sims),
        }
    }
}

/// Ends a round: every program waits at a cluster barrier. Delivers the remote stores made
/// since the last one, in rank order, and lets every program go on.
fn deliver<'s>(k: &'s ThreadKernel, sims: &mut [Sim<'s>]) -> Result<(), InterpError> {
    let outboxes: Vec<Vec<RemoteStore<'s>>> = sims
        .iter_mut()
        .map(|sim| std::mem::take(&mut sim.member().outbox))
        .collect();
    // Every element written, by target rank, buffer and index: the first program and thread
    // writing it, and the value.
    let mut written: HashMap<(i64, u32, i64), (usize, usize, u64)> = HashMap::new();
    for (from, outbox) in outboxes.iter().enumerate() {
        for st in outbox {
            for t in st.threads() {
                let (rank, e, b) = (st.ranks[t], st.index[t], bits(&st.value, t));
                let (first, first_t, first_bits) = *written.entry((rank, st.alloc, e)).or_insert((from, t, b));
                if first_bits != b {
                    let message = format!(
                        "program {} (thread {first_t}) and program {} (thread {t}) write different values to element {e} of shared{} of the cluster's program {} (rank {rank}) before one cluster barrier",
                        pid(&sims[first].pid),
                        pid(&sims[from].pid),
                        st.alloc,
                        pid(&sims[rank as usize].pid)
                    );
                    let f = fault(FaultKind::RacingStores, t, message);
                    return Err(st.error(k, sims[from].pid, f));
                }
            }
        }
    }
    for (from, outbox) in outboxes.iter().enumerate() {
        let storer = sims[from].pid;
        for st in outbox {
            for (rank, sim) in sims.iter_mut().enumerate() {
                let mask: Vec<bool> = st
                    .active
                    .iter()
                    .zip(&st.ranks)
                    .map(|(&a, &r)| a && r == rank as i64)
                    .collect();
                if mask.contains(&true) {
                    sim.receive(st, &mask).map_err(|f| st.error(k, storer, f))?;
                }
            }
        }
    }
    for sim in sims.iter_mut() {
        let epoch = sim.epoch;
        let member = sim.member();
        member.barriers += 1;
        member.since = epoch;
    }
    Ok(())
}

/// At the end of a cluster: a remote store after the last cluster barrier reaches a program
/// that may have exited.
fn check_outboxes_empty(k: &ThreadKernel, sims: &mut [Sim<'_>]) -> Result<(), InterpError> {
    for sim in sims.iter_mut() {
        let storer = sim.pid;
        if let Some(st) = sim.member().outbox.first() {
            let t = st.threads().next().unwrap_or(0);
            let message = format!(
                "a store into the shared memory of the cluster's program of rank {} after the last cluster barrier: that program may have exited, and would never see it",
                st.ranks[t]
            );
            return Err(st.error(k, storer, fault(FaultKind::MissingBarrier, t, message)));
        }
    }
    Ok(())
}

impl<'s> Sim<'s> {
    /// The program's place in its cluster.
    fn member(&mut self) -> &mut Member<'s> {
        self.cluster.as_mut().expect("a program of a cluster")
    }

    /// `Stmt::ClusterStore` `s`: checked and queued for the next cluster barrier.
    pub(super) fn cluster_store(&mut self, s: &'s Stmt) -> Result<(), SimFault> {
        let Stmt::ClusterStore {
            alloc,
            index,
            rank,
            value,
            pred,
        } = *s
        else {
            unreachable!("called for cluster stores")
        };
        self.serial += 1;
        let active = self.active(pred)?;
        let Some(first) = active.iter().position(|&a| a) else {
            return Ok(());
        };
        let ranks = self.read(rank, Some(&active))?.ints()?.to_vec();
        let (size, barriers) = {
            let m = self.member();
            (m.size as i64, m.barriers)
        };
        if barriers == 0 {
            let message = format!(
                "a store into the shared memory of the cluster's program of rank {} before the first cluster barrier: that program may not have started",
                ranks[first]
            );
            return Err(fault(FaultKind::MissingBarrier, first, message));
        }
        let index = self.read(index, Some(&active))?.ints()?.to_vec();
        let value = self.read(value, Some(&active))?.data.clone();
        let len = self.k.shared[alloc as usize].len as i64;
        for t in (0..active.len()).filter(|&t| active[t]) {
            let (r, i) = (ranks[t], index[t]);
            if !(0..size).contains(&r) {
                let message = format!(
                    "a store into the shared memory of rank {r}, outside the cluster of {size} programs (ranks 0 to {})",
                    size - 1
                );
                return Err(fault(FaultKind::OutOfBounds, t, message));
            }
            if !(0..len).contains(&i) {
                let message = format!(
                    "element {i} is outside shared{alloc} ({len} elements) of the cluster's program of rank {r}"
                );
                return Err(fault(FaultKind::OutOfBounds, t, message));
            }
        }
        let context = self.context;
        self.member().outbox.push(RemoteStore {
            stmt: s,
            context,
            alloc,
            ranks,
            index,
            value,
            active,
        });
        Ok(())
    }

    /// Writes the elements of remote store `st` that go to this program (`mask`) into its
    /// shared memory, as written just before the cluster barrier it waits at; faults where
    /// the program itself read or wrote one of them since the cluster barrier before.
    fn receive(&mut self, st: &RemoteStore<'_>, mask: &[bool]) -> Result<(), SimFault> {
        let (since, rank) = {
            let m = self.member();
            (m.since, m.rank)
        };
        // The barrier epoch before the cluster barrier (which moved it on; for a split one,
        // its arrive did).
        let at = self.epoch - 1;
        let (program, alloc) = (self.program, st.alloc as usize);
        for t in (0..mask.len()).filter(|&t| mask[t]) {
            let e = st.index[t];
            let track = &mut self.track[alloc][e as usize];
            if track.program != program {
                *track = Track {
                    program,
                    ..Track::default()
                };
            }
            let verb = if track.write_epoch >= since && track.write_stmt != REMOTE {
                Some("writes")
            } else if track.read_epoch >= since && track.readers != 0 {
                Some("reads")
            } else {
                None
            };
            if let Some(verb) = verb {
                let message = format!(
                    "a store into element {e} of shared{alloc} of the cluster's program {} (rank {rank}), which that program {verb} between the same two cluster barriers: no cluster barrier orders them",
                    pid(&self.pid)
                );
                return Err(fault(FaultKind::MissingBarrier, t, message));
            }
            track.write_epoch = at;
            track.write_stmt = REMOTE;
            track.writers = 0;
            track.write_atomic = false;
        }
        let ptrs: Vec<Pointer> = st
            .index
            .iter()
            .map(|&offset| Pointer {
                param: st.alloc,
                offset,
            })
            .collect();
        let elem = self.k.shared[alloc].elem;
        memory::store(&mut self.shared, elem, &ptrs, Some(mask), &st.value)?;
        // The store may land at any time since the last cluster barrier.
        self.mark_epochs(alloc, since, at);
        for t in (0..mask.len()).filter(|&t| mask[t]) {
            self.clobber(alloc, st.index[t]);
        }
        Ok(())
    }
}

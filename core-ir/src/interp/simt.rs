//! A SIMT simulator of per-thread IR: runs a [`ThreadKernel`] on the CPU the way a GPU runs
//! it, so that the shared lowering can be tested against the block interpreter without a GPU.
//!
//! All `num_warps * warp_size` threads of a program run in lockstep, statement by statement.
//! Each register is a column with one element per thread, held as the interpreter's blocks
//! (a `Tensor` of shape `[threads]`), and every expression is computed by the interpreter's
//! element-wise functions, so the arithmetic is the block interpreter's by construction.
//! Loads, stores and atomics go through the interpreter's memory code, thread by thread in
//! thread order, where the statement's predicate holds. Shared memory is zero-initialized at
//! the start of every program.
//!
//! Besides out-of-bounds accesses, the simulator reports what would be undefined on a GPU
//! although it is well defined in lockstep — each one a bug in whatever made the kernel:
//!
//! - a vector access of `n` elements at an element index that is not a multiple of `n`
//!   ([`FaultKind::Misaligned`]; for global memory the index counts from the start of the
//!   buffer, whose base GPUs align);
//! - threads of one store writing different values to one element
//!   ([`FaultKind::RacingStores`]; the same value from several threads is fine);
//! - an element of shared or global memory read by one thread after another thread wrote
//!   it, or written by one thread after another wrote or read it, with no barrier in
//!   between ([`FaultKind::MissingBarrier`]; lockstep hides these, and real warps do not run
//!   in step; nor do the threads of one warp: since Volta a warp's threads are scheduled
//!   independently, and Vulkan promises nothing of a subgroup's, so that a warp exchanging
//!   data through memory needs a barrier as much as two warps do).
//!   Writes of the value an element already holds are exempt, and atomics do not race with
//!   each other. Barriers order nothing else here: in lockstep they are otherwise no-ops.
//!   (Programs are not checked against each other: they run one after another, in the
//!   interpreter's order, or take turns within a thread-block cluster, see below);
//! - shared buffers that share bytes (`ThreadKernel::shared_offsets`) in use between the
//!   same two barriers, or an element read after another buffer sharing its bytes wrote
//!   them ([`FaultKind::MissingBarrier`]): what the layout assumes of them;
//! - a read of a register in a thread where no statement has written it
//!   ([`FaultKind::UndefinedRegister`]): `Set` reads its operands in every thread; a
//!   predicated load, store or atomic reads its index and values only where the predicate
//!   holds; a predicated load or atomic writes its destinations only there, and elsewhere
//!   they keep their values, which they must have;
//! - a read of a shared-memory element that the program has not written
//!   ([`FaultKind::Uninitialized`]): the zeros the simulator starts with are garbage on a
//!   GPU;
//! - an `if` or `while` condition that differs between threads
//!   ([`FaultKind::DivergentControlFlow`]): per-thread control flow must be uniform.
//!
//! Errors are [`InterpError::ThreadFault`]s naming the statement, the block op it was lowered
//! from (the last comment before it), the program and the first faulting thread.
//!
//! A kernel with thread-block clusters (`ThreadKernel::cluster` above 1) runs cluster by
//! cluster, its programs taking turns between cluster barriers, each with a state of its
//! own; remote stores (`Stmt::ClusterStore`) land at the next cluster barrier, where the
//! simulator also checks them (`simt_cluster.rs` says how and why).
//!
//! [`run_threads_with_stats`] runs a kernel the same way and also counts the bank conflicts
//! of its shared-memory accesses, per block op ([`SharedStats`], on NVIDIA's model of 32
//! banks of 4 bytes), so that tests can check that a lowering's exchanges through shared
//! memory are conflict-free without a GPU profiler.

use super::elementwise as ew;
use super::error::{Fault, FaultKind, InterpError};
use super::memory::{self, Memory};
use super::shape_ops;
use super::tensor::{Data, Pointer, Tensor};
use super::{bind_args, ArgValue, HostBuffer};
use crate::thread::{Expr, Memory as Space, Reg, Special, Stmt, ThreadKernel, ThreadParam};
use crate::types::{Elem, ScalarType, Shape, Type};
use std::collections::{BTreeMap, HashMap};

#[path = "simt_cluster.rs"]
mod cluster;
#[path = "simt_coop.rs"]
mod coop;
#[path = "simt_exec.rs"]
mod exec;
#[path = "simt_matrix.rs"]
mod matrix;
#[path = "simt_specialized.rs"]
mod specialized;
#[path = "simt_tma.rs"]
mod tma;
#[path = "simt_tma_store.rs"]
mod tma_store;
#[path = "simt_wgmma.rs"]
mod wgmma;

/// Runs every program of the grid (axis 0 fastest) of a per-thread kernel on the CPU.
///
/// The arguments follow [`super::run`]: one per parameter of `kernel` (which are the block
/// kernel's parameters, in order), pointers naming an element of `buffers`.
///
/// A kernel with clusters (`kernel.cluster` above 1) runs as [`super::run_clustered`] runs
/// its block kernel: the `cluster` consecutive programs along axis 0 form a cluster, and
/// clusters run one after another in program order. The programs of a cluster take turns in
/// rank order, each until it passes a `Stmt::ClusterBarrier` or ends; when all of them wait
/// at one, the remote stores (`Stmt::ClusterStore`) made since the last one are delivered
/// and all go on. Errors, besides the faults of one program: [`InterpError::ClusterSize`]
/// for a cluster of 0 or above [`super::MAX_CLUSTER`], [`InterpError::GridNotClustered`] when
/// `grid[0]` is not a multiple of the cluster, [`InterpError::ClusterBarrierMismatch`] when
/// some programs of a cluster ended while others wait at a cluster barrier (a hang on a
/// GPU), and thread faults for remote stores out of the cluster or the buffer, racing, or
/// not between two cluster barriers. Warp-specialized and persistent kernels do not run in
/// clusters (an invalid-IR fault).
pub fn run_threads(
    kernel: &ThreadKernel,
    grid: [u32; 3],
    args: &[ArgValue],
    buffers: &mut [HostBuffer],
) -> Result<(), InterpError> {
    run_threads_with_stats(kernel, grid, args, buffers).map(|_| ())
}

/// [`run_threads`], which also counts the shared-memory bank conflicts of the run: see
/// [`SharedStats`] for the model. The run, its results and its faults are
/// [`run_threads`]'s; the counts are summed over every program of the grid.
pub fn run_threads_with_stats(
    kernel: &ThreadKernel,
    grid: [u32; 3],
    args: &[ArgValue],
    buffers: &mut [HostBuffer],
) -> Result<SharedStats, InterpError> {
    if grid.contains(&0) {
        return Err(InterpError::EmptyGrid { grid });
    }
    if args.len() != kernel.params.len() {
        return Err(InterpError::ArgumentCount {
            kernel: kernel.name.clone(),
            expected: kernel.params.len(),
            got: args.len(),
        });
    }
    crate::thread::verify(kernel).map_err(|message| InterpError::ThreadFault {
        kind: FaultKind::InvalidIr,
        stmt: String::new(),
        context: String::new(),
        program: [0; 3],
        thread: None,
        message: format!("malformed per-thread kernel: {message}"),
    })?;
    let declared: Vec<(&str, Type)> = kernel
        .params
        .iter()
        .map(|p| match p {
            ThreadParam::Ptr { name, elem } => (name.as_str(), Type::ptr(*elem)),
            ThreadParam::Scalar { name, ty } => (name.as_str(), Type::scalar(*ty)),
        })
        .collect();
    cluster::check_launch(kernel, grid)?;
    let (args, param_buffer) = bind_args(&declared, args, buffers)?;
    let global = Memory {
        buffers: buffers.into(),
        param_buffer,
        param_names: kernel.params.iter().map(|p| p.name()).collect(),
    };
    let shared_names: Vec<String> = (0..kernel.shared.len()).map(|i| format!("shared{i}")).collect();
    if kernel.cluster > 1 {
        return cluster::run(kernel, grid, global, args, &shared_names);
    }
    let mut shared_buffers = zeroed_shared(kernel);
    let shared = shared_memory(kernel, &mut shared_buffers, &shared_names);
    let mut sim = Sim::new(kernel, grid, global, shared, args);
    for z in 0..grid[2] {
        for y in 0..grid[1] {
            for x in 0..grid[0] {
                sim.run([x, y, z])?;
            }
        }
    }
    Ok(sim.stats())
}

/// A program's shared buffers, zero-filled.
fn zeroed_shared(k: &ThreadKernel) -> Vec<HostBuffer> {
    k.shared
        .iter()
        .map(|a| HostBuffer::zeros(a.elem, a.len as usize))
        .collect()
}

/// A program's shared memory: its buffers `buffers` ([`zeroed_shared`]), named `names`.
fn shared_memory<'a>(k: &ThreadKernel, buffers: &'a mut [HostBuffer], names: &'a [String]) -> Memory<'a> {
    Memory {
        param_buffer: k
            .shared
            .iter()
            .enumerate()
            .map(|(i, a)| Some((i, a.len as usize)))
            .collect(),
        buffers: buffers.into(),
        param_names: names.iter().map(String::as_str).collect(),
    }
}

/// Whether a shared-memory statement reads (`Load`) or writes (`Store`). Shared memory has
/// no atomics: `Stmt::Atomic` and `Stmt::AtomicCas` address global memory only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SharedAccess {
    /// A read of shared memory: a `Stmt::Load` from it, or a `Stmt::LdMatrix`.
    Load,
    /// A write of shared memory: a `Stmt::Store` to it, or the shared side of a
    /// `Stmt::AsyncCopy`.
    Store,
}

/// Bank-conflict counts of some warp-level shared-memory accesses (see [`SharedStats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SharedCounts {
    /// Warp-level accesses: executions of a statement by a warp with at least one active lane.
    pub accesses: u64,
    /// The wavefronts (passes through the 32 banks) the hardware needs for them.
    pub wavefronts: u64,
    /// The wavefronts a conflict-free access of the same width would need.
    pub ideal_wavefronts: u64,
}

impl SharedCounts {
    /// The extra wavefronts that bank conflicts cost: 0 for conflict-free accesses.
    pub fn conflicts(&self) -> u64 {
        self.wavefronts.saturating_sub(self.ideal_wavefronts)
    }

    fn add(&mut self, other: SharedCounts) {
        self.accesses += other.accesses;
        self.wavefronts += other.wavefronts;
        self.ideal_wavefronts += other.ideal_wavefronts;
    }
}

/// Shared-memory bank conflicts of a run of [`run_threads_with_stats`], summed over every
/// program and every executed shared-memory access of the kinds [`SharedAccess`] lists
/// (global memory is not counted), in total and per block op.
///
/// The model is NVIDIA's: shared memory has 32 banks of 4 bytes, word `w` (bytes `4w` to
/// `4w + 3`) in bank `w % 32`. One warp-level access, where each active lane moves `s`
/// bytes (`n` elements of a vector access, at byte address element index × element size):
///
/// - is split into phases of lanes that the banks serve together: all 32 lanes when
///   `s <= 4`, half-warps of 16 lanes when `s == 8`, quarter-warps of 8 lanes when
///   `s == 16` (and so on: `128 / s` lanes when `s > 16`, which GPUs split into several
///   instructions of as many wavefronts in all);
/// - in a phase, each active lane touches the 4-byte words that cover its bytes (elements
///   narrower than 4 bytes share words). Lanes touching the same word are served at once (a
///   broadcast, not a conflict), so a phase needs as many wavefronts as the bank with the
///   most *distinct* words touched has words: at least 1 if any lane of the phase is active,
///   0 if none is. Its ideal is 1 if any lane is active;
/// - needs the sum of its phases' wavefronts; its ideal is the sum of their ideals.
///
/// Lanes are the threads of a warp of the kernel's `warp_size` (threads `w * warp_size` to
/// `(w + 1) * warp_size - 1`); warps of more than 32 lanes are split into groups of 32
/// consecutive lanes first (each group one access to the 32 banks, all of them one warp-level
/// access), warps of fewer lanes keep their size (phases never span two warps).
///
/// Addresses count from the start of the allocation accessed: the backends place the
/// allocations of a kernel one after another in one buffer, but here each one is taken to
/// start at a 128-byte boundary (a multiple of the 32 banks' width), so that only an
/// element's index in its allocation matters, and the counts do not depend on how the
/// backend packs the allocations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SharedStats {
    /// Warp-level accesses, as [`SharedCounts::accesses`].
    pub accesses: u64,
    /// Wavefronts the hardware needs, as [`SharedCounts::wavefronts`].
    pub wavefronts: u64,
    /// Wavefronts conflict-free accesses would need, as [`SharedCounts::ideal_wavefronts`].
    pub ideal_wavefronts: u64,
    /// The counts per statement kind and block op, keyed by the text of the last comment run
    /// before the statement (what the lowering writes: `"<op> at <location> -> <layouts>"`;
    /// `""` before any comment), the context of the simulator's faults. Statements of one op
    /// and kind are summed.
    pub by_op: BTreeMap<(String, SharedAccess), SharedCounts>,
}

impl SharedStats {
    /// The extra wavefronts that bank conflicts cost in the whole run.
    pub fn conflicts(&self) -> u64 {
        self.total().conflicts()
    }

    /// The totals, as one [`SharedCounts`].
    pub fn total(&self) -> SharedCounts {
        SharedCounts {
            accesses: self.accesses,
            wavefronts: self.wavefronts,
            ideal_wavefronts: self.ideal_wavefronts,
        }
    }

    /// The counts of the `access` statements of every block op named `op`: of the contexts
    /// that are `op` itself or start with `op` and a space (so `"convert"` selects the
    /// lowering's `"convert at k.rs:3:9 -> ..."`, and not `"converter ..."`). Zero when there
    /// are none.
    pub fn op(&self, op: &str, access: SharedAccess) -> SharedCounts {
        let mut sum = SharedCounts::default();
        for ((context, a), counts) in &self.by_op {
            let named = context
                .strip_prefix(op)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(' '));
            if *a == access && named {
                sum.add(*counts);
            }
        }
        sum
    }
}

/// Shared memory's banks, and the bytes of a bank word.
const BANKS: u64 = 32;
const BANK_BYTES: u64 = 4;

/// The counts of one warp-level access of `bytes` bytes per lane, where `lanes` holds, per
/// lane of the warp, the byte address of its first byte if it is active. A warp with no
/// active lane made no access and counts nothing.
fn warp_counts(lanes: &[Option<u64>], bytes: u64) -> SharedCounts {
    if lanes.iter().all(Option::is_none) {
        return SharedCounts::default();
    }
    // Each phase moves at most one word per bank: 128 bytes (a power of two of lanes, as
    // `bytes` is a power of two, at most 64).
    let phase_lanes = (BANKS / bytes.div_ceil(BANK_BYTES).max(1)).max(1) as usize;
    let mut counts = SharedCounts {
        accesses: 1,
        ..SharedCounts::default()
    };
    // Phases of consecutive lanes: their sizes divide 32, so a warp of more than 32 lanes is
    // split into groups of 32 as well.
    for phase in lanes.chunks(phase_lanes) {
        let wavefronts = phase_wavefronts(phase, bytes);
        counts.wavefronts += wavefronts;
        counts.ideal_wavefronts += u64::from(wavefronts > 0);
    }
    counts
}

/// The wavefronts one phase of an access needs (see [`warp_counts`]): the most distinct words
/// that its active lanes touch in one bank; 0 when no lane is active.
fn phase_wavefronts(lanes: &[Option<u64>], bytes: u64) -> u64 {
    let mut words: Vec<u64> = lanes
        .iter()
        .flatten()
        .flat_map(|&a| a / BANK_BYTES..=(a.saturating_add(bytes.max(1) - 1)) / BANK_BYTES)
        .collect();
    words.sort_unstable();
    words.dedup();
    let mut per_bank = [0u64; BANKS as usize];
    for w in words {
        per_bank[(w % BANKS) as usize] += 1;
    }
    per_bank.into_iter().max().unwrap_or(0)
}

/// In which threads a register holds a value.
#[derive(Clone, Debug)]
enum Def {
    None,
    All,
    Some(Vec<bool>),
}

/// Who touched an element since the last barrier: bit masks of threads, each thread its
/// warp's bit (modulo 64) and, 64 bits higher, its lane's (see `Sim::thread_bits`).
#[derive(Clone, Copy, Default)]
struct Track {
    /// The program the rest speaks of (older records are void).
    program: u64,
    /// The barrier epoch of the last write (0: none in this program).
    write_epoch: u32,
    /// The statement that wrote it last, and its threads.
    write_stmt: u64,
    writers: u128,
    /// Whether the last write was an atomic.
    write_atomic: bool,
    read_epoch: u32,
    readers: u128,
    /// Where another buffer sharing the element's bytes wrote them since this one did, that
    /// buffer's index + 1 (0: none).
    clobbered_by: u32,
}

/// A fault of one statement, before the statement and program are attached.
struct SimFault {
    kind: FaultKind,
    thread: Option<usize>,
    message: String,
}

impl From<Fault> for SimFault {
    fn from(f: Fault) -> SimFault {
        SimFault {
            kind: f.kind,
            thread: None,
            message: f.message,
        }
    }
}

fn fault(kind: FaultKind, thread: usize, message: String) -> SimFault {
    SimFault {
        kind,
        thread: Some(thread),
        message,
    }
}

/// An element's value as bits, to compare values written by different threads.
fn bits(d: &Data, t: usize) -> u64 {
    match d {
        Data::Bool(v) => v[t] as u64,
        Data::Int(v) => v[t] as u64,
        Data::Float(v) => v[t].to_bits(),
        Data::Ptr(v) => v[t].offset as u64,
    }
}

/// `dst[t] = src[t]` where `active[t]`.
fn merge(dst: &mut Data, src: &Data, active: &[bool]) {
    fn m<T: Copy>(d: &mut [T], s: &[T], active: &[bool]) {
        for ((d, &s), &a) in d.iter_mut().zip(s).zip(active) {
            if a {
                *d = s;
            }
        }
    }
    match (dst, src) {
        (Data::Bool(d), Data::Bool(s)) => m(d, s, active),
        (Data::Int(d), Data::Int(s)) => m(d, s, active),
        (Data::Float(d), Data::Float(s)) => m(d, s, active),
        (Data::Ptr(d), Data::Ptr(s)) => m(d, s, active),
        _ => unreachable!("a register and its new values share a representation"),
    }
}

fn zeros(ty: Type) -> Tensor {
    let n = ty.shape.numel();
    let data = match ty.scalar_type() {
        Some(ScalarType::Bool) => Data::Bool(vec![false; n]),
        Some(s) if s.is_float() => Data::Float(vec![0.0; n]),
        _ => Data::Int(vec![0; n]),
    };
    Tensor { ty, data }
}

struct Sim<'s> {
    k: &'s ThreadKernel,
    /// The threads running: the program's, or one side's of a warp-specialized statement
    /// (`simt_specialized.rs`), the first of which is thread `tid_base` of the program.
    threads: usize,
    tid_base: usize,
    /// Whether a side of a warp-specialized statement is running: its mbarrier waits then
    /// order it after the other side (see `simt_specialized.rs`).
    in_side: bool,
    warp_size: usize,
    grid: [u32; 3],
    pid: [u32; 3],
    global: Memory<'s>,
    shared: Memory<'s>,
    /// The parameters' values; pointers hold their element offset into their buffer.
    args: Vec<Tensor>,
    regs: Vec<Tensor>,
    def: Vec<Def>,
    /// Who touched each shared element, by buffer and element.
    track: Vec<Vec<Track>>,
    /// The same for global elements, by buffer (made on first use) and offset.
    global_track: Vec<Vec<Track>>,
    /// Programs run so far, counting this one: tracks of earlier ones are void.
    program: u64,
    /// Barriers passed in this program, plus one.
    epoch: u32,
    /// Memory statements run so far.
    serial: u64,
    /// The last comment run: the block op being executed.
    context: &'s str,
    /// Bank-conflict counts of the shared accesses run so far, by context and kind.
    shared_counts: HashMap<(&'s str, SharedAccess), SharedCounts>,
    /// Asynchronous copies started and not yet complete.
    copies: matrix::AsyncCopies,
    /// Warpgroup MMAs issued and not yet waited for.
    wgmmas: wgmma::Wgmmas,
    /// The program's live mbarriers and the TMA copies pending on them.
    mbarriers: tma::Mbarriers,
    /// TMA stores whose reads of shared memory no wait has covered yet.
    bulk_reads: tma_store::BulkReads,
    /// Cooperative matrices, per warp (see `simt_coop.rs`).
    coop: coop::CoopValues,
    /// Per shared buffer, the barrier epochs of this program that touched it, as ranges in
    /// the order they came (a remote store's range may reach back).
    shared_epochs: Vec<Vec<(u32, u32)>>,
    /// The pairs of shared buffers the kernel's layout puts on common bytes.
    aliased: Vec<(usize, usize)>,
    /// Per shared buffer, those sharing its bytes (see `clobber`).
    overlaps: Vec<Vec<Overlap>>,
    /// The program's place in its thread-block cluster, when the kernel has clusters
    /// (`simt_cluster.rs`).
    cluster: Option<cluster::Member<'s>>,
}

impl<'s> Sim<'s> {
    fn new(k: &'s ThreadKernel, grid: [u32; 3], global: Memory<'s>, shared: Memory<'s>, args: Vec<Tensor>) -> Sim<'s> {
        let threads = k.threads() as usize;
        let column = |s: ScalarType| Type::block(Elem::Scalar(s), Shape::new(&[threads as u32]).unwrap());
        let overlaps = overlapping_elements(k);
        let aliased = overlaps
            .iter()
            .enumerate()
            .flat_map(|(a, os)| os.iter().filter(move |o| o.buffer > a).map(move |o| (a, o.buffer)))
            .collect();
        Sim {
            k,
            threads,
            tid_base: 0,
            in_side: false,
            warp_size: k.warp_size as usize,
            grid,
            pid: [0; 3],
            global,
            shared,
            args,
            regs: k.regs.iter().map(|(_, r)| zeros(column(r.ty))).collect(),
            def: vec![Def::None; k.regs.len()],
            track: k
                .shared
                .iter()
                .map(|a| vec![Track::default(); a.len as usize])
                .collect(),
            global_track: Vec::new(),
            program: 0,
            epoch: 1,
            serial: 0,
            context: "",
            shared_counts: HashMap::new(),
            copies: matrix::AsyncCopies::default(),
            wgmmas: wgmma::Wgmmas::default(),
            mbarriers: tma::Mbarriers::default(),
            bulk_reads: tma_store::BulkReads::default(),
            coop: vec![vec![None; threads / k.warp_size.max(1) as usize]; k.coop.len()],
            shared_epochs: vec![Vec::new(); k.shared.len()],
            aliased,
            overlaps,
            cluster: None,
        }
    }

    /// The bank-conflict counts of the programs run so far.
    fn stats(&self) -> SharedStats {
        let mut stats = SharedStats::default();
        for (&(context, access), &counts) in &self.shared_counts {
            stats.accesses += counts.accesses;
            stats.wavefronts += counts.wavefronts;
            stats.ideal_wavefronts += counts.ideal_wavefronts;
            stats.by_op.insert((context.to_string(), access), counts);
        }
        stats
    }

    /// Counts the bank conflicts of one shared-memory statement (see [`SharedStats`]) that
    /// moves `n` elements of `elem` per thread, starting at element `offsets[t]` of its
    /// allocation in the threads where `active` holds (which [`Sim::addresses`] checked).
    fn count_banks(&mut self, access: SharedAccess, offsets: &[i64], elem: ScalarType, n: usize, active: &[bool]) {
        let elem_bytes = elem.size_bytes() as u64;
        let bytes = elem_bytes * n as u64;
        // Byte addresses from the allocation's start, taken to be 128-byte aligned.
        let lanes: Vec<Option<u64>> = offsets
            .iter()
            .zip(active)
            .map(|(&o, &a)| a.then(|| (o.max(0) as u64).saturating_mul(elem_bytes)))
            .collect();
        let mut counts = SharedCounts::default();
        for warp in lanes.chunks(self.warp_size.max(1)) {
            counts.add(warp_counts(warp, bytes));
        }
        if counts.accesses > 0 {
            self.shared_counts
                .entry((self.context, access))
                .or_default()
                .add(counts);
        }
    }

    fn run(&mut self, pid: [u32; 3]) -> Result<(), InterpError> {
        self.start(pid);
        let body = &self.k.body;
        match (self.k.persistent, body.split_last()) {
            // Each tile is checked as a program would be: buffers that share bytes are
            // used in different epochs of one tile (the tile ends with a barrier).
            (Some(_), Some((Stmt::While { cond_body, cond, body }, setup))) => {
                self.block(setup)?;
                loop {
                    self.block(cond_body)?;
                    if !self
                        .uniform(*cond)
                        .map_err(|f| self.error(&self.k.body[self.k.body.len() - 1], f))?
                    {
                        break;
                    }
                    self.block(body)?;
                    self.check_aliased()?;
                    self.shared_epochs.iter_mut().for_each(Vec::clear);
                }
            }
            _ => self.block(body)?,
        }
        self.finish()
    }

    /// Makes the simulator program `pid`, at its start: no register written, shared memory
    /// zeroed (garbage, as far as the program knows), no barrier passed.
    fn start(&mut self, pid: [u32; 3]) {
        self.pid = pid;
        self.def.iter_mut().for_each(|d| *d = Def::None);
        for b in self.shared.buffers.iter_mut() {
            b.as_bytes_mut().fill(0);
        }
        self.program += 1;
        self.epoch = 1;
        self.context = "";
        self.copies = matrix::AsyncCopies::default();
        self.mbarriers = tma::Mbarriers::default();
        self.coop.iter_mut().flatten().for_each(|c| *c = None);
        self.shared_epochs.iter_mut().for_each(Vec::clear);
    }

    /// The checks at a program's end: no copy or store still in flight, buffers that share
    /// bytes never in use at once.
    fn finish(&mut self) -> Result<(), InterpError> {
        self.check_tma_done()?;
        self.check_bulk_reads_done()?;
        self.check_aliased()
    }

    /// Buffers that share bytes must never be in use in the same barrier epoch (what
    /// `thread::ThreadKernel::shared_offsets` assumes). (That one's data survive the other's
    /// use is checked element by element: `clobber`.)
    fn check_aliased(&self) -> Result<(), InterpError> {
        for &(a, b) in &self.aliased {
            if let Some(((a0, a1), (b0, b1))) = first_overlap(&self.shared_epochs[a], &self.shared_epochs[b]) {
                return Err(InterpError::ThreadFault {
                    kind: FaultKind::MissingBarrier,
                    stmt: String::new(),
                    context: String::new(),
                    program: self.pid,
                    thread: None,
                    message: format!(
                        "shared{a} (barrier epochs {a0}..={a1}) and shared{b} ({b0}..={b1}) share bytes but are in use between the same barriers"
                    ),
                });
            }
        }
        Ok(())
    }

    /// Marks shared buffer `alloc` in use in barrier epochs `from..=to`.
    pub(super) fn mark_epochs(&mut self, alloc: usize, from: u32, to: u32) {
        let used = &mut self.shared_epochs[alloc];
        match used.last_mut() {
            Some(last) if from >= last.0 && from <= last.1.saturating_add(1) => last.1 = last.1.max(to),
            _ => used.push((from, to)),
        }
    }

    /// A write to element `e` of shared buffer `alloc` destroys what the buffers sharing its
    /// bytes held there: their elements there count as unwritten (a later read of one faults),
    /// as on a GPU, where they would read this write's bytes.
    pub(super) fn clobber(&mut self, alloc: usize, e: i64) {
        let program = self.program;
        let size = self.k.shared[alloc].elem.size_bytes() as i64;
        for o in &self.overlaps[alloc] {
            let (lo, hi) = (o.offset + e * size, o.offset + (e + 1) * size);
            let other = o.size as i64;
            let first = lo.div_euclid(other).max(0);
            let last = (hi - 1).div_euclid(other).min(o.len as i64 - 1);
            for j in first..=last {
                self.track[o.buffer][j as usize] = Track {
                    program,
                    clobbered_by: alloc as u32 + 1,
                    ..Track::default()
                };
            }
        }
    }

    fn error(&self, s: &Stmt, f: SimFault) -> InterpError {
        InterpError::ThreadFault {
            kind: f.kind,
            stmt: self.k.stmt_text(s),
            context: self.context.to_string(),
            program: self.pid,
            thread: f.thread.map(|t| (t + self.tid_base) as u32),
            message: f.message,
        }
    }

    fn column_type(&self, r: Reg) -> Type {
        Type::block(
            Elem::Scalar(self.k.reg_type(r)),
            Shape::new(&[self.threads as u32]).unwrap(),
        )
    }

    /// Register `r`, which must be defined in every thread where `active` holds (`None`: in
    /// every thread).
    fn read(&self, r: Reg, active: Option<&[bool]>) -> Result<&Tensor, SimFault> {
        let undefined = match (&self.def[r.index()], active) {
            (Def::All, _) => None,
            (Def::None, None) => Some(0),
            (Def::None, Some(a)) => a.iter().position(|&a| a),
            (Def::Some(d), None) => d.iter().position(|&d| !d),
            (Def::Some(d), Some(a)) => d.iter().zip(a).position(|(&d, &a)| a && !d),
        };
        match undefined {
            None => Ok(&self.regs[r.index()]),
            Some(t) => Err(fault(
                FaultKind::UndefinedRegister,
                t,
                format!("r{} is read before it is written", r.index()),
            )),
        }
    }

    /// Writes `value` to `r` where `active` holds. Elsewhere `r` keeps its value, which it
    /// must have.
    fn write_where(&mut self, r: Reg, value: &Data, active: &[bool]) -> Result<(), SimFault> {
        self.wgmma_a_guard(r)?;
        let kept: Vec<bool> = active.iter().map(|&a| !a).collect();
        if let Err(f) = self.read(r, Some(&kept)) {
            let message = format!(
                "r{} keeps its value where the predicate is false, but has none",
                r.index()
            );
            return Err(SimFault { message, ..f });
        }
        merge(&mut self.regs[r.index()].data, value, active);
        self.define(r, active);
        Ok(())
    }

    /// Marks `r` defined where `active` holds.
    fn define(&mut self, r: Reg, active: &[bool]) {
        let d = &mut self.def[r.index()];
        let next = match d {
            Def::All => return,
            Def::None => active.to_vec(),
            Def::Some(v) => v.iter().zip(active).map(|(&a, &b)| a | b).collect(),
        };
        *d = if next.iter().all(|&x| x) {
            Def::All
        } else {
            Def::Some(next)
        };
    }

    fn uniform(&self, cond: Reg) -> Result<bool, SimFault> {
        let c = self.read(cond, None)?.bools()?;
        match c.iter().position(|&x| x != c[0]) {
            None => Ok(c[0]),
            Some(t) => Err(fault(
                FaultKind::DivergentControlFlow,
                t,
                format!(
                    "condition r{} is {} in thread 0 but {} in thread {t}",
                    cond.index(),
                    c[0],
                    c[t]
                ),
            )),
        }
    }

    /// `Stmt::Mma` in every warp: each warp's fragments gathered into matrices, multiplied
    /// exactly (f64 holds every product of two f16 or bf16 values and their sums of 16 terms
    /// to well within f32's precision) and rounded to f32 once, then scattered back.
    fn mma(&mut self, d: &[Reg; 4], a: &[Reg; 8], b: &[Reg; 4], c: &[Reg; 4]) -> Result<(), SimFault> {
        let av: Vec<Vec<f64>> = a.iter().map(|&r| self.float_column(r)).collect::<Result<_, _>>()?;
        let bv: Vec<Vec<f64>> = b.iter().map(|&r| self.float_column(r)).collect::<Result<_, _>>()?;
        let cv: Vec<Vec<f64>> = c.iter().map(|&r| self.float_column(r)).collect::<Result<_, _>>()?;
        let mut out = vec![vec![0.0f64; self.threads]; 4];
        for w in 0..self.threads / 32 {
            let (mut am, mut bm, mut cm) = ([[0f64; 16]; 16], [[0f64; 8]; 16], [[0f64; 8]; 16]);
            for l in 0..32 {
                let (t, g, q) = (w * 32 + l, l / 4, 2 * (l % 4));
                let a_at = [
                    (g, q),
                    (g, q + 1),
                    (g + 8, q),
                    (g + 8, q + 1),
                    (g, q + 8),
                    (g, q + 9),
                    (g + 8, q + 8),
                    (g + 8, q + 9),
                ];
                for (i, &(r, k)) in a_at.iter().enumerate() {
                    am[r][k] = av[i][t];
                }
                for (i, k) in [q, q + 1, q + 8, q + 9].into_iter().enumerate() {
                    bm[k][g] = bv[i][t];
                }
                for (i, &(r, n)) in matrix::accumulator_fragment(g, l % 4).iter().enumerate() {
                    cm[r][n] = cv[i][t];
                }
            }
            for l in 0..32 {
                let (t, g) = (w * 32 + l, l / 4);
                for (i, &(r, n)) in matrix::accumulator_fragment(g, l % 4).iter().enumerate() {
                    let sum: f64 = cm[r][n] + (0..16).map(|k| am[r][k] * bm[k][n]).sum::<f64>();
                    out[i][t] = sum as f32 as f64;
                }
            }
        }
        let all = vec![true; self.threads];
        for (&r, v) in d.iter().zip(out) {
            self.write_where(r, &Data::Float(v), &all)?;
        }
        Ok(())
    }

    /// The threads where a statement acts.
    fn active(&self, pred: Option<Reg>) -> Result<Vec<bool>, SimFault> {
        match pred {
            None => Ok(vec![true; self.threads]),
            Some(p) => Ok(self.read(p, None)?.bools()?.to_vec()),
        }
    }

    fn simple(&mut self, s: &Stmt) -> Result<(), SimFault> {
        match s {
            Stmt::Set { dst, expr } => {
                self.wgmma_a_guard(*dst)?;
                let value = self.eval(*dst, expr)?;
                self.regs[dst.index()] = value;
                self.def[dst.index()] = Def::All;
                Ok(())
            }
            Stmt::Mma { d, a, b, c } => self.mma(d, a, b, c),
            Stmt::MmaTf32 { d, a, b, c } => self.mma_tf32(d, a, b, c),
            Stmt::LdMatrix {
                dsts,
                alloc,
                index,
                trans,
            } => self.ldmatrix(dsts, *alloc, *index, *trans),
            Stmt::AsyncCopy {
                alloc,
                dst,
                param,
                src,
                len,
                pred,
            } => self.async_copy(*alloc, *dst, *param, *src, *len, *pred),
            Stmt::AsyncCommit => {
                self.async_commit();
                Ok(())
            }
            Stmt::AsyncWait { pending } => self.async_wait(*pending),
            Stmt::Wgmma {
                acc,
                a,
                b,
                n,
                accumulate,
            } => self.wgmma(acc, a, b, *n, *accumulate),
            Stmt::WgmmaCommit => {
                self.wgmma_commit();
                Ok(())
            }
            Stmt::WgmmaWait { pending } => self.wgmma_wait(*pending),
            Stmt::MbarrierInit { bar, count, pred } => self.mbarrier_init(bar, *count, *pred),
            Stmt::MbarrierArriveExpectTx { bar, bytes, pred } => self.mbarrier_arrive_expect_tx(bar, *bytes, *pred),
            Stmt::MbarrierWait { bar, parity } => {
                if self.mbarrier_try_wait(bar, *parity)? {
                    Ok(())
                } else {
                    Err(self.never_completes(bar, *parity))
                }
            }
            Stmt::MbarrierInval { bar, pred } => self.mbarrier_inval(bar, *pred),
            Stmt::TmaLoad {
                map,
                alloc,
                dst,
                coords,
                bar,
                pred,
            } => self.tma_load(*map, *alloc, *dst, coords, bar, *pred),
            Stmt::TmaStore {
                map,
                alloc,
                src,
                coords,
                pred,
            } => self.tma_store(*map, *alloc, *src, coords, *pred),
            Stmt::BulkCommit { pred } => self.bulk_commit(*pred),
            Stmt::BulkWaitRead { alloc, pred } => self.bulk_wait_read(*alloc, *pred),
            // Ordering only: the simulator's shared memory has one proxy, and its registers
            // are not renamed.
            Stmt::FenceProxyAsync | Stmt::WgmmaFence => Ok(()),
            Stmt::CoopLoad {
                dst,
                alloc,
                index,
                stride,
                row_major,
            } => self.coop_load(*dst, *alloc, *index, *stride, *row_major),
            Stmt::CoopStore {
                src,
                alloc,
                index,
                stride,
                row_major,
            } => self.coop_store(*src, *alloc, *index, *stride, *row_major),
            Stmt::CoopMulAdd { d, a, b, c } => self.coop_mul_add(*d, *a, *b, *c),
            Stmt::CoopMul { d, a, b } => self.coop_mul(*d, *a, *b),
            Stmt::CoopZero { dst } => self.coop_zero(*dst),
            Stmt::Load {
                dsts, mem, index, pred, ..
            } => self.load(dsts, *mem, *index, *pred),
            Stmt::Store {
                values,
                mem,
                index,
                pred,
            } => self.store(values, *mem, *index, *pred),
            Stmt::Atomic {
                dst,
                param,
                index,
                pred,
                ..
            }
            | Stmt::AtomicCas {
                dst,
                param,
                index,
                pred,
                ..
            } => {
                self.serial += 1;
                let active = self.active(*pred)?;
                let (offsets, elem) = self.addresses(Space::Global { param: *param }, *index, 1, &active)?;
                let ptrs: Vec<Pointer> = offsets
                    .iter()
                    .map(|&o| Pointer {
                        param: *param,
                        offset: o,
                    })
                    .collect();
                for (t, p) in ptrs.iter().enumerate().filter(|&(t, _)| active[t]) {
                    self.touch(Space::Global { param: *param }, p.offset, t, Access::Atomic)?;
                }
                let old = match s {
                    Stmt::Atomic { op, value, .. } => {
                        let v = &self.read(*value, Some(&active))?.data.clone();
                        memory::atomic(&mut self.global, *op, elem, &ptrs, Some(&active), v)?
                    }
                    Stmt::AtomicCas { cmp, value, .. } => {
                        let c = &self.read(*cmp, Some(&active))?.data.clone();
                        let v = &self.read(*value, Some(&active))?.data.clone();
                        memory::atomic_cas(&mut self.global, elem, &ptrs, Some(&active), c, v)?
                    }
                    _ => unreachable!(),
                };
                self.write_where(*dst, &old, &active)
            }
            Stmt::Print {
                prefix,
                coords,
                values,
                pred,
                program,
            } => {
                let active = self.active(*pred)?;
                let program = match program {
                    Some(p) => Some(
                        p.iter()
                            .map(|&r| Ok(self.read(r, Some(&active))?.data.clone()))
                            .collect::<Result<Vec<Data>, SimFault>>()?,
                    ),
                    None => None,
                };
                let columns = |regs: &[Reg]| -> Result<Vec<Data>, SimFault> {
                    regs.iter()
                        .map(|&r| Ok(self.read(r, Some(&active))?.data.clone()))
                        .collect()
                };
                let value_types: Vec<ScalarType> = values.iter().map(|&r| self.k.reg_type(r)).collect();
                let (coords, values) = (columns(coords)?, columns(values)?);
                for t in (0..self.threads).filter(|&t| active[t]) {
                    let idx: Vec<String> = coords.iter().map(|c| super::debug_ops::element(c, t, None)).collect();
                    let vals: Vec<String> = value_types
                        .iter()
                        .zip(&values)
                        .map(|(&ty, v)| super::debug_ops::element(v, t, Some(ty)))
                        .collect();
                    let pid = match &program {
                        Some(p) => {
                            // (i32 registers, which the verifier checked.)
                            let at = |a: usize| match &p[a] {
                                Data::Int(v) => v[t] as u32,
                                _ => 0,
                            };
                            [at(0), at(1), at(2)]
                        }
                        None => self.pid,
                    };
                    super::debug_ops::print_line(pid, &idx, prefix, &vals);
                }
                Ok(())
            }
            Stmt::MbarrierArrive { bar, pred } => self.mbarrier_arrive(bar, *pred),
            // (The consumers run in lockstep: their turns are already taken in order.)
            Stmt::Turn { .. } => Ok(()),
            // (A register budget: nothing to simulate.)
            Stmt::SetMaxRegisters { .. } => Ok(()),
            // (Run by `run_frames` where the program is in a cluster.)
            Stmt::ClusterStore { .. } | Stmt::ClusterBarrier | Stmt::ClusterArrive | Stmt::ClusterWait => {
                Err(SimFault {
                    kind: FaultKind::InvalidIr,
                    thread: None,
                    message: "a thread-block cluster statement in a program that is in no cluster".into(),
                })
            }
            Stmt::Barrier
            | Stmt::NamedBarrier { .. }
            | Stmt::Comment(_)
            | Stmt::If { .. }
            | Stmt::While { .. }
            | Stmt::Specialized { .. } => unreachable!("run by `block`"),
        }
    }

    fn eval(&self, dst: Reg, expr: &Expr) -> Result<Tensor, SimFault> {
        let ty = self.column_type(dst);
        let r = |reg: Reg| self.read(reg, None);
        let t = match expr {
            Expr::Const(l) => shape_ops::constant(*l, ty)?,
            Expr::Param(i) => Tensor {
                ty,
                data: self.args[*i as usize].data.splat(self.threads),
            },
            Expr::Special(sp) => {
                let v: Vec<i64> = match *sp {
                    Special::ThreadId => (self.tid_base as i64..(self.tid_base + self.threads) as i64).collect(),
                    Special::ProgramId(a) => vec![self.pid[a as usize] as i64; self.threads],
                    Special::NumPrograms(a) => vec![self.grid[a as usize] as i64; self.threads],
                };
                Tensor { ty, data: Data::Int(v) }
            }
            Expr::Copy(a) => Tensor {
                ty,
                data: r(*a)?.data.clone(),
            },
            Expr::Unary(op, a) => ew::unary(*op, r(*a)?, ty)?,
            Expr::Binary(op, a, b) => ew::binary(*op, r(*a)?, r(*b)?, ty)?,
            Expr::Compare(op, a, b) => ew::compare(*op, r(*a)?, r(*b)?, ty)?,
            Expr::Select(c, a, b) => ew::select(r(*c)?, r(*a)?, r(*b)?, ty)?,
            Expr::Fma(a, b, c) => ew::fma(r(*a)?, r(*b)?, r(*c)?, ty)?,
            Expr::BytePerm(a, b, s) => ew::byte_perm(r(*a)?, r(*b)?, r(*s)?, ty)?,
            Expr::Rounded(op, rounding, args) => {
                let args = args.iter().map(|a| r(*a)).collect::<Result<Vec<_>, _>>()?;
                ew::rounded(*op, *rounding, &args, ty)?
            }
            Expr::Cast(a) => ew::cast(r(*a)?, ty)?,
            Expr::Bitcast(a) => ew::bitcast(r(*a)?, ty)?,
            Expr::ShuffleXor { value, mask } => {
                let ws = self.warp_size;
                let from: Vec<usize> = (0..self.threads)
                    .map(|t| (t & !(ws - 1)) | ((t & (ws - 1)) ^ *mask as usize))
                    .collect();
                Tensor {
                    ty,
                    data: r(*value)?.data.gather(&from),
                }
            }
            Expr::ShuffleIdx { value, lane } => {
                let ws = self.warp_size;
                let lanes = r(*lane)?.ints()?;
                let mut from = Vec::with_capacity(self.threads);
                for (t, &l) in lanes.iter().enumerate() {
                    if !(0..ws as i64).contains(&l) {
                        return Err(fault(
                            FaultKind::InvalidIr,
                            t,
                            format!("shuffle from lane {l}, outside the warp of {ws}"),
                        ));
                    }
                    from.push((t & !(ws - 1)) | l as usize);
                }
                Tensor {
                    ty,
                    data: r(*value)?.data.gather(&from),
                }
            }
        };
        Ok(t)
    }

    /// The memory a statement addresses and the offset of element 0 of the statement's index
    /// space in it (a pointer argument's offset into its buffer; 0 for shared memory).
    fn space(&self, m: Space) -> (u32, i64, ScalarType) {
        match m {
            Space::Global { param } => {
                let offset = match &self.args[param as usize].data {
                    Data::Ptr(p) => p[0].offset,
                    _ => unreachable!("verified: a pointer parameter"),
                };
                let elem = match self.k.params[param as usize] {
                    ThreadParam::Ptr { elem, .. } => elem,
                    ThreadParam::Scalar { .. } => unreachable!("verified: a pointer parameter"),
                };
                (param, offset, elem)
            }
            Space::Shared { alloc } => (alloc, 0, self.k.shared[alloc as usize].elem),
        }
    }

    /// Per thread, the buffer offset of the first of `n` elements at register `index`,
    /// checked (where `active`) for alignment and bounds.
    fn addresses(&self, m: Space, index: Reg, n: usize, active: &[bool]) -> Result<(Vec<i64>, ScalarType), SimFault> {
        let (param, base, elem) = self.space(m);
        let idx = self.read(index, Some(active))?.ints()?;
        let offsets: Vec<i64> = idx.iter().map(|&i| base.wrapping_add(i)).collect();
        for (t, &o) in offsets.iter().enumerate() {
            if !active[t] {
                continue;
            }
            if o.rem_euclid(n as i64) != 0 {
                return Err(fault(
                    FaultKind::Misaligned,
                    t,
                    format!("a vector of {n} elements at element {o} of its buffer, which is not a multiple of {n}"),
                ));
            }
            for k in 0..n as i64 {
                let p = Pointer { param, offset: o + k };
                let located = match m {
                    Space::Global { .. } => self.global.locate(p).map(|_| ()),
                    Space::Shared { .. } => self.shared.locate(p).map(|_| ()),
                };
                located.map_err(|f| SimFault {
                    kind: f.kind,
                    thread: Some(t),
                    message: f.message,
                })?;
            }
        }
        Ok((offsets, elem))
    }

    fn load(&mut self, dsts: &[Reg], m: Space, index: Reg, pred: Option<Reg>) -> Result<(), SimFault> {
        self.serial += 1;
        let active = self.active(pred)?;
        let (offsets, elem) = self.addresses(m, index, dsts.len(), &active)?;
        if let Space::Shared { .. } = m {
            self.count_banks(SharedAccess::Load, &offsets, elem, dsts.len(), &active);
        }
        for (k, &dst) in dsts.iter().enumerate() {
            let (param, _, _) = self.space(m);
            let ptrs: Vec<Pointer> = offsets
                .iter()
                .map(|&o| Pointer {
                    param,
                    offset: o + k as i64,
                })
                .collect();
            for (t, p) in ptrs.iter().enumerate().filter(|&(t, _)| active[t]) {
                self.touch(m, p.offset, t, Access::Read)?;
            }
            let data = match m {
                Space::Global { .. } => memory::load(&self.global, elem, &ptrs, Some(&active), None)?,
                Space::Shared { .. } => memory::load(&self.shared, elem, &ptrs, Some(&active), None)?,
            };
            self.write_where(dst, &data, &active)?;
        }
        Ok(())
    }

    fn store(&mut self, values: &[Reg], m: Space, index: Reg, pred: Option<Reg>) -> Result<(), SimFault> {
        self.serial += 1;
        let active = self.active(pred)?;
        let (offsets, elem) = self.addresses(m, index, values.len(), &active)?;
        if let Space::Shared { .. } = m {
            self.count_banks(SharedAccess::Store, &offsets, elem, values.len(), &active);
        }
        let (param, _, _) = self.space(m);
        // Every element written, with the first thread that writes it and the value.
        let mut written: HashMap<i64, (usize, u64)> = HashMap::new();
        for (k, &v) in values.iter().enumerate() {
            let data = &self.read(v, Some(&active))?.data;
            for (t, &o) in offsets.iter().enumerate().filter(|&(t, _)| active[t]) {
                let b = bits(data, t);
                let (first, first_bits) = *written.entry(o + k as i64).or_insert((t, b));
                if first_bits != b {
                    return Err(fault(
                        FaultKind::RacingStores,
                        t,
                        format!(
                            "threads {first} and {t} write different values to element {}",
                            o + k as i64
                        ),
                    ));
                }
            }
        }
        for (k, &v) in values.iter().enumerate() {
            let ptrs: Vec<Pointer> = offsets
                .iter()
                .map(|&o| Pointer {
                    param,
                    offset: o + k as i64,
                })
                .collect();
            let data = self.regs[v.index()].data.clone();
            let mem = match m {
                Space::Global { .. } => &mut self.global,
                Space::Shared { .. } => &mut self.shared,
            };
            let old = memory::load(mem, elem, &ptrs, Some(&active), None)?;
            memory::store(mem, elem, &ptrs, Some(&active), &data)?;
            for (t, p) in ptrs.iter().enumerate().filter(|&(t, _)| active[t]) {
                self.touch(
                    m,
                    p.offset,
                    t,
                    Access::Write {
                        same: bits(&old, t) == bits(&data, t),
                    },
                )?;
            }
        }
        Ok(())
    }

    fn warp_bit(&self, t: usize) -> u64 {
        1 << (((t + self.tid_base) / self.warp_size) % 64)
    }

    /// Thread `t` in a [`Track`]'s masks: its warp's bit and its lane's. Two threads differ
    /// exactly where one's bits are not all in the other's mask, so that a mask less a
    /// thread's bits is empty only where the thread alone is in it (modulo 64 warps and 64
    /// lanes).
    fn thread_bits(&self, t: usize) -> u128 {
        self.lane_bits(t, (t + self.tid_base) % self.warp_size)
    }

    /// Thread `t`'s warp recorded as lane `lane` (for [`Self::thread_bits`], or a lane of its
    /// own for accesses that no one invocation makes: `simt_coop.rs`).
    pub(super) fn lane_bits(&self, t: usize, lane: usize) -> u128 {
        let g = t + self.tid_base;
        (1u128 << ((g / self.warp_size) % 64)) | (1u128 << (64 + lane % 64))
    }

    /// Records an access by thread `t` to element `e` of `m` (a buffer offset); faults if
    /// another thread's access since the last barrier makes it a race.
    fn touch(&mut self, m: Space, e: i64, t: usize, access: Access) -> Result<(), SimFault> {
        self.touch_as(m, e, t, self.thread_bits(t), access)
    }

    /// [`Self::touch`] by thread `t` recorded as the threads `w` (`Track`'s bits).
    pub(super) fn touch_as(&mut self, m: Space, e: i64, t: usize, w: u128, mut access: Access) -> Result<(), SimFault> {
        if let Space::Shared { alloc } = m {
            self.mbarrier_guard(alloc, e, t)?;
            if matches!(access, Access::Write { .. } | Access::Atomic) {
                self.bulk_read_guard(alloc, e, t)?;
                self.wgmma_read_guard(alloc, e, t)?;
            }
        }
        let (epoch, serial, program) = (self.epoch, self.serial, self.program);
        let track = match m {
            Space::Shared { alloc } => {
                self.mark_epochs(alloc as usize, epoch, epoch);
                if matches!(access, Access::Write { .. } | Access::Atomic) {
                    self.clobber(alloc as usize, e);
                }
                let track = &mut self.track[alloc as usize][e as usize];
                if track.program != program {
                    *track = Track {
                        program,
                        ..Track::default()
                    };
                }
                if track.write_epoch == 0 {
                    match access {
                        Access::Read if track.clobbered_by > 0 => {
                            let message = format!(
                                "element {e} of shared{alloc} is read after shared{}, which shares its bytes, overwrote it",
                                track.clobbered_by - 1
                            );
                            return Err(fault(FaultKind::MissingBarrier, t, message));
                        }
                        Access::Read => {
                            let message = format!("element {e} of shared{alloc} is read before this program writes it");
                            return Err(fault(FaultKind::Uninitialized, t, message));
                        }
                        // The zeros the simulator starts with are garbage on a GPU: a first
                        // write counts even when it writes zero.
                        Access::Write { .. } => access = Access::Write { same: false },
                        Access::Atomic => {}
                    }
                }
                track
            }
            Space::Global { param } => {
                let (buffer, len) = self.global.param_buffer[param as usize].expect("a pointer parameter");
                if self.global_track.len() <= buffer {
                    self.global_track.resize(buffer + 1, Vec::new());
                }
                let tracks = &mut self.global_track[buffer];
                if tracks.is_empty() {
                    *tracks = vec![Track::default(); len];
                }
                let track = &mut tracks[e as usize];
                if track.program != program {
                    *track = Track {
                        program,
                        ..Track::default()
                    };
                }
                track
            }
        };
        track.access(access, epoch, serial, w).map_err(|what| {
            let warp = t / self.warp_size;
            let name = match m {
                Space::Shared { alloc } => format!("shared{alloc}"),
                Space::Global { param } => {
                    let buffer = self.global.param_buffer[param as usize].map_or(0, |(b, _)| b);
                    format!("buffer {buffer} (`{}`)", self.k.params[param as usize].name())
                }
            };
            let verb = match access {
                Access::Read => "reads",
                Access::Write { .. } => "overwrites",
                Access::Atomic => "updates",
            };
            let message =
                format!("warp {warp} {verb} element {e} of {name}, which another thread {what} with no barrier since");
            fault(FaultKind::MissingBarrier, t, message)
        })
    }
}

/// An access to one element, for [`Track`].
#[derive(Clone, Copy)]
enum Access {
    Read,
    /// `same`: of the value the element holds, which changes nothing.
    Write {
        same: bool,
    },
    Atomic,
}

impl Track {
    /// Records an access by the thread `w` ([`Sim::thread_bits`]) in statement `serial` of
    /// barrier epoch `epoch`; returns what another thread did to the element since the last
    /// barrier that makes the access a race. Atomics do not race with each other.
    fn access(&mut self, access: Access, epoch: u32, serial: u64, w: u128) -> Result<(), &'static str> {
        let others_wrote = self.write_epoch == epoch && self.write_stmt != serial && self.writers & !w != 0;
        let others_read = self.read_epoch == epoch && self.readers & !w != 0;
        match access {
            Access::Read => {
                if others_wrote {
                    return Err(if self.write_atomic {
                        "updated atomically"
                    } else {
                        "wrote"
                    });
                }
                if self.read_epoch != epoch {
                    self.read_epoch = epoch;
                    self.readers = 0;
                }
                self.readers |= w;
                return Ok(());
            }
            Access::Write { same: true } => return Ok(()),
            Access::Write { same: false } if others_wrote => {
                return Err(if self.write_atomic {
                    "updated atomically"
                } else {
                    "wrote"
                })
            }
            Access::Atomic if others_wrote && !self.write_atomic => return Err("wrote"),
            _ if others_read => return Err("read"),
            _ => {}
        }
        let atomic = matches!(access, Access::Atomic);
        // The threads of the last write, or of all atomics since the barrier.
        let keep = self.write_epoch == epoch && (self.write_stmt == serial || atomic && self.write_atomic);
        if !keep {
            self.writers = 0;
        }
        self.write_epoch = epoch;
        self.write_stmt = serial;
        self.write_atomic = atomic;
        self.writers |= w;
        Ok(())
    }
}

/// The first pair of epoch ranges, one from `a` and one from `b`, that overlap.
fn first_overlap(a: &[(u32, u32)], b: &[(u32, u32)]) -> Option<((u32, u32), (u32, u32))> {
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    a.sort_unstable();
    b.sort_unstable();
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].0 <= b[j].1 && b[j].0 <= a[i].1 {
            return Some((a[i], b[j]));
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    None
}

/// Another buffer sharing bytes with a shared buffer: its index, its offset less this
/// one's (bytes), and its element size and length.
struct Overlap {
    buffer: usize,
    offset: i64,
    size: u32,
    len: u32,
}

/// Per shared buffer of `k`, the buffers whose bytes overlap its own in its layout.
fn overlapping_elements(k: &ThreadKernel) -> Vec<Vec<Overlap>> {
    let offsets = k.shared_offsets();
    let span = |i: usize| (offsets[i], offsets[i] + k.shared[i].bytes());
    let mut out: Vec<Vec<Overlap>> = (0..k.shared.len()).map(|_| Vec::new()).collect();
    for a in 0..k.shared.len() {
        for b in (0..k.shared.len()).filter(|&b| b != a) {
            let ((a0, a1), (b0, b1)) = (span(a), span(b));
            if a0 < b1 && b0 < a1 {
                out[a].push(Overlap {
                    buffer: b,
                    offset: offsets[a] as i64 - offsets[b] as i64,
                    size: k.shared[b].elem.size_bytes() as u32,
                    len: k.shared[b].len,
                });
            }
        }
    }
    out
}

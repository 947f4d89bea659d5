//! The shared lowering: block IR → per-thread IR, once for every backend.
//!
//! Each block value gets a [`Layout`] and becomes, in each thread, the registers of the
//! elements that thread holds (`LVal`). Layouts are chosen as values are made (`assign`):
//! every global access gets the layout its own pointer's contiguity asks for, other ops
//! follow their operands, reductions give slice layouts, and `expand_dims` of a slice is
//! free. Where an op needs an operand in another layout, the operand is recomputed there
//! when it is index arithmetic, and otherwise goes through shared memory, swizzled so that
//! neither side has bank conflicts (`convert`). The per-thread IR's comments name the
//! layout of each block op's result.
//!
//! Pointer blocks are traced to the parameter they come from: in registers they are element
//! offsets from that parameter, which is how both PTX (an address) and SPIR-V (a storage
//! buffer index) reach memory.

mod affine_index;
mod assign;
mod block_programs;
mod byte_perm;
mod cluster;
mod control;
mod convert;
mod coop;
mod debug;
mod dot;
mod elementwise;
mod exchange;
mod exp2;
mod fp8_dot;
mod gather;
mod hoist;
mod mask_bound;
mod memory;
mod mma;
mod ordering;
mod overlap;
mod persistent;
mod pipeline;
mod reduce;
mod scan;
mod shape;
mod specialize;
mod staged;
mod tma;
mod tma_box;
mod tma_store;
mod wgmma;

use crate::analysis::axis::{self, AxisInfo};
use crate::arena::Arena;
use crate::ir::{BinaryOp, CmpOp, Inst, Kernel, Literal, Op, Region, SourceLoc, ValueId};
use crate::layout::Layout;
use crate::target::{Specialization, Target};
use crate::thread::{Expr, Reg, RegData, SharedAlloc, Stmt, ThreadKernel, ThreadParam};
use crate::types::{Elem, ScalarType, Shape};
use std::collections::HashMap;

pub use block_programs::{MAX_PROGRAMS_PER_BLOCK, PROGRAMS_PARAM};
pub use cluster::{MAX_CLUSTER, PORTABLE_CLUSTER};
pub use persistent::GRID_PARAMS;

/// Why a kernel could not be lowered for a target.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LowerError {
    /// The kernel uses something this target or this version of the lowering cannot do.
    #[error("`{op}` at {loc}: {message}")]
    Unsupported {
        /// The op's name, as [`Op::name`] gives it.
        op: &'static str,
        /// Where the kernel author's code created the op.
        loc: SourceLoc,
        /// What the target or the lowering cannot do, in words.
        message: String,
    },
    /// The kernel needs more shared memory per program than the device has.
    #[error("kernel `{kernel}` needs {needed} bytes of shared memory per program; the device allows {limit}")]
    OutOfSharedMemory {
        /// The name of the kernel.
        kernel: String,
        /// The shared memory the lowered kernel needs per program, in bytes.
        needed: u32,
        /// The shared memory a program may use, in bytes: [`Target::max_shared_bytes`].
        limit: u32,
    },
    /// The launch shape is invalid for the target.
    #[error("invalid launch configuration: {0}")]
    InvalidConfig(String),
    /// The kernel is malformed: it fails [`crate::verify::verify`] (the builder's kernels
    /// pass it; one whose public fields were edited may not).
    #[error(transparent)]
    Invalid(#[from] crate::error::BuildError),
    /// A bug in the lowering: the per-thread IR it made is malformed.
    #[error("internal error lowering kernel `{kernel}`: {message}")]
    Internal {
        /// The name of the kernel.
        kernel: String,
        /// What went wrong, in words.
        message: String,
    },
}

/// A lowered block value: its layout and, in each thread, one register per element held.
/// Pointer blocks keep the index of their base parameter; their registers are offsets.
#[derive(Clone, Debug)]
pub(crate) struct LVal {
    pub layout: Layout,
    pub regs: Vec<Reg>,
    pub ptr: Option<u32>,
}

/// Lowers `kernel` for `target`, relying on the facts in `spec`.
pub fn lower(kernel: &Kernel, target: &Target, spec: &Specialization) -> Result<ThreadKernel, LowerError> {
    if target.num_warps == 0 || !target.num_warps.is_power_of_two() || !target.warp_size.is_power_of_two() {
        return Err(LowerError::InvalidConfig(format!(
            "num_warps ({}) and warp size ({}) must be powers of two",
            target.num_warps, target.warp_size
        )));
    }
    if target.threads() > crate::thread::MAX_THREADS {
        return Err(LowerError::InvalidConfig(format!(
            "num_warps ({}) warps of {} threads make {} threads per program; at most {} are allowed",
            target.num_warps,
            target.warp_size,
            target.num_warps as u64 * target.warp_size as u64,
            crate::thread::MAX_THREADS
        )));
    }
    if !(1..=cluster::MAX_CLUSTER).contains(&target.cluster) {
        return Err(LowerError::InvalidConfig(format!(
            "a cluster groups 1 to {} programs, not {}",
            cluster::MAX_CLUSTER,
            target.cluster
        )));
    }
    if target.cluster > target.threads() {
        return Err(LowerError::InvalidConfig(format!(
            "a cluster of {} programs needs at least as many threads a program (one writes to each), the program has {}",
            target.cluster,
            target.threads()
        )));
    }
    let programs = target.programs_per_block;
    if !(1..=MAX_PROGRAMS_PER_BLOCK).contains(&programs) {
        return Err(LowerError::InvalidConfig(format!(
            "programs_per_block = {programs}: a thread block runs 1 to {MAX_PROGRAMS_PER_BLOCK} programs"
        )));
    }
    if programs > 1 && (!target.warp_specialize || target.cluster > 1 || target.num_warps % 4 != 0) {
        return Err(LowerError::InvalidConfig(format!(
            "programs_per_block = {programs} needs warp_specialize, whole warpgroups a program (num_warps a multiple of 4, not {}) and no cluster: its programs share a producer warpgroup",
            target.num_warps
        )));
    }
    if programs > 1 && kernel.params.iter().any(|p| p.name == PROGRAMS_PARAM) {
        return Err(LowerError::InvalidConfig(format!(
            "a kernel parameter is named `{PROGRAMS_PARAM}`, which programs_per_block uses"
        )));
    }
    if target.cluster > 1 && target.persistent {
        return Err(LowerError::InvalidConfig(
            "a persistent grid cannot run in clusters: its programs walk tiles, not clusters".into(),
        ));
    }
    // The lowering relies on the typing rules holding (result types, operand counts), which
    // the builder guarantees but a kernel whose public fields were edited may break.
    crate::verify::verify(kernel)?;
    let widened = fp8_dot::widen_fp8_dots(kernel, target);
    let kernel = widened.as_ref().unwrap_or(kernel);
    // Own copies are a hint (a loop's own `num_stages`, or a tensor-core `dot` of computed
    // operands): where they do not fit shared memory, the kernel is lowered with plain
    // loads in such loops instead.
    let mut out = match lower_fitting(kernel, target, spec, true) {
        Err(LowerError::OutOfSharedMemory { .. }) if has_staged_loop(kernel) || has_dot(kernel) => {
            lower_fitting(kernel, target, spec, false)?
        }
        r => r?,
    };
    if target.divisions_as_shifts {
        crate::thread::reduce_constant_divisions(&mut out);
    }
    crate::thread::eliminate_dead_registers(&mut out);
    if out.dots.is_none() {
        out.dots = dot_path(kernel, target, &out);
    }
    crate::thread::verify(&out).map_err(|message| LowerError::Internal {
        kernel: kernel.name.clone(),
        message,
    })?;
    Ok(out)
}

/// A lowering of `kernel` (`own_copies`: whether loops that give their own `num_stages`
/// copy their loads ahead, see `pipeline`). Cooperative matrices take more shared memory
/// than the FMA path (the pipeline's stages of the operands, the accumulator's
/// exchanges): where the kernel does not fit with them, it is lowered without the
/// pipeline (the operands staged per iteration), then without them, as a `dot` they do not
/// fit would be.
fn lower_fitting(
    kernel: &Kernel,
    target: &Target,
    spec: &Specialization,
    own_copies: bool,
) -> Result<ThreadKernel, LowerError> {
    match lower_once(kernel, target, spec, true, own_copies) {
        Err(LowerError::OutOfSharedMemory { .. }) if !target.coop_matrix.is_empty() => {
            match lower_once(kernel, target, spec, false, own_copies) {
                Err(LowerError::OutOfSharedMemory { needed, limit, .. }) => {
                    let fma = Target {
                        coop_matrix: Vec::new(),
                        ..target.clone()
                    };
                    let mut k = lower_once(kernel, &fma, spec, false, own_copies)?;
                    // Why the `dot`s left the cooperative matrices (`ThreadKernel::dots`).
                    let why = format!(
                        "on cooperative matrices the kernel needs {needed} bytes of shared memory, the device allows {limit}"
                    );
                    k.dots = Some(crate::thread::DotPath::Fma { why: Some(why) });
                    Ok(k)
                }
                r => r,
            }
        }
        r => r,
    }
}

/// What `lowered`'s `dot`s run on (`None` where `kernel` has none), where the lowering did
/// not already say (`lower_fitting`, when they did not fit the cooperative matrices).
fn dot_path(kernel: &Kernel, target: &Target, lowered: &ThreadKernel) -> Option<crate::thread::DotPath> {
    use crate::thread::DotPath;
    if !kernel.insts.iter().any(|(_, i)| matches!(i.op, Op::Dot { .. })) {
        return None;
    }
    let (mut wgmma, mut mma, mut coop) = (false, false, false);
    lowered.walk(&mut |s| match s {
        Stmt::Wgmma { .. } => wgmma = true,
        Stmt::Mma { .. } => mma = true,
        Stmt::CoopMulAdd { .. } => coop = true,
        _ => {}
    });
    Some(if wgmma {
        DotPath::Wgmma
    } else if mma {
        DotPath::Mma
    } else if coop {
        DotPath::CooperativeMatrix
    } else {
        let units = !target.coop_matrix.is_empty() || target.mma_sync || target.wgmma;
        let why = units.then(|| {
            "no matrix instruction of the device fits the dots' types, precision, block shapes and warps".into()
        });
        DotPath::Fma { why }
    })
}

/// Whether `kernel` has a `dot` (whose loop may copy its other loads ahead, `pipeline`).
fn has_dot(kernel: &Kernel) -> bool {
    kernel.insts.iter().any(|(_, inst)| matches!(inst.op, Op::Dot { .. }))
}

/// Whether `kernel` has a `for` loop with its own `num_stages`.
fn has_staged_loop(kernel: &Kernel) -> bool {
    kernel.insts.iter().any(|(_, inst)| {
        matches!(
            inst.op,
            Op::For {
                num_stages: Some(_),
                ..
            }
        )
    })
}

/// One lowering of `kernel`; `coop_stages`: whether loops may pipeline the operands
/// of `dot`s on cooperative matrices; `own_copies`: whether loops with their own
/// `num_stages` copy their other loads ahead (see `pipeline`).
fn lower_once(
    kernel: &Kernel,
    target: &Target,
    spec: &Specialization,
    coop_stages: bool,
    own_copies: bool,
) -> Result<ThreadKernel, LowerError> {
    let mut l = Lowerer::new(kernel, target, spec);
    l.coop_stages = coop_stages;
    l.own_copies_allowed = own_copies;
    l.lower_body()?;
    l.finish()
}

pub(crate) struct Lowerer<'k> {
    pub k: &'k Kernel,
    pub target: &'k Target,
    pub axis: Vec<AxisInfo>,
    /// Vector width per (shape, access order), see `assign`.
    vec_by_access: HashMap<(Shape, assign::Order), u32>,
    /// Per value: whether it is anchored (see `assign`): not recomputable in any layout.
    anchored: Vec<bool>,
    pub regs: Arena<RegData>,
    params: Vec<ThreadParam>,
    pub shared: Vec<SharedAlloc>,
    /// Statement lists being filled, innermost last.
    body: Vec<Vec<Stmt>>,
    /// Statements run once at the start: thread coordinates, constants.
    prologue: Vec<Stmt>,
    values: Vec<Option<LVal>>,
    pub(crate) cache: exchange::Cache,
    /// Global accesses since the last barrier (see `ordering`).
    pub(crate) accesses: ordering::Accesses,
    /// Loads replaced by their loop's pipeline: where the `dot` finds them (see `pipeline`).
    pipelined: HashMap<ValueId, mma::SharedOperand>,
    /// The own copies of the loop being lowered (see `pipeline`): where each load, when
    /// lowered, reads its value back from.
    own_copies: HashMap<ValueId, pipeline::OwnRead>,
    /// The copies that refill the stage the loop's own copies were read back from, until
    /// the body has used what it read (see `pipeline`).
    pending_refill: Option<pipeline::PendingRefill>,
    /// Loop-invariant `dot` operands staged before their loop (see `hoist`).
    hoisted: HashMap<hoist::HoistKey, mma::SharedOperand>,
    /// The operands of `dot`s after the `for` loop about to be lowered (in its statement
    /// list) that were computed before it, staged with its invariant ones (see `hoist`).
    dots_after_loop: Vec<hoist::AcrossLoop>,
    /// The `dot` result whose warpgroup MMAs may stay in flight into the next iteration of
    /// the loop being lowered, and the carried value whose registers they accumulate into
    /// (see `pipeline`).
    wgmma_in_flight: Option<(ValueId, ValueId)>,
    /// Per `dot` left in flight whose operands are stored in two tiles in turn: the
    /// register saying which (see `wgmma.rs`).
    staging_phases: HashMap<ValueId, Reg>,
    /// The `dot` operand buffers of the loops being lowered, outermost first (see
    /// `operand_alloc`).
    loop_operand_allocs: Vec<Vec<u32>>,
    /// The cooperative matrices the statements name (see `coop`).
    coop: Vec<crate::thread::CoopMatrix>,
    /// The tensor maps the pipeline's TMA copies read through (`ThreadKernel::tensor_maps`).
    tensor_maps: Vec<crate::thread::TensorMap>,
    /// Values held in cooperative matrices (`values` has `None` for them while they are,
    /// or their registers once moved out for a use that others follow, see `inst`).
    coop_vals: HashMap<ValueId, coop::CoopAcc>,
    /// The statement-list depth (`body.len()`) at which each value in `coop_vals` was made.
    coop_depth: HashMap<ValueId, usize>,
    /// How many operands of the kernel's instructions each value is (by value index).
    use_counts: Vec<usize>,
    /// Whether loops double-buffer the operands of `dot`s on cooperative matrices.
    coop_stages: bool,
    /// Whether loops with their own `num_stages` copy their other loads ahead (see
    /// `pipeline`; off where those copies do not fit shared memory).
    own_copies_allowed: bool,
    /// Whether the register pipeline's prefetches are lowered unpredicated: in the trips of
    /// a loop that run only where all their predicates hold (`pipeline/prefetch.rs`).
    unmasked_prefetch: bool,
    /// The first thread of those that issue TMA copies: 0, or the producer warpgroup's
    /// first while its side of a warp-specialized loop is lowered (see `specialize`).
    copy_threads_from: u32,
    /// The producer side of the kernel's warp-specialized loop, once lowered: the rest of
    /// the body goes to the consumer side (see `specialize`).
    producer: Option<Vec<Stmt>>,
    /// The operands the producer of the warp-specialized loop being lowered copies before
    /// it (see `staged`), until the consumers release them after the loop.
    staged: Option<staged::StagedCopies>,
    /// Staged operands of a persistent grid's loop, some of `dot`s after it: handed back
    /// once those `dot`s are lowered (see `staged`).
    staged_after: Option<staged::StagedCopies>,
    /// The warps of the kernel's producer side (0: none), once its body is lowered.
    producer_warps: u32,
    /// `cluster_reduce`s lowered so far (see `cluster`).
    cluster_sites: u32,
}

impl<'k> Lowerer<'k> {
    fn new(k: &'k Kernel, target: &'k Target, spec: &Specialization) -> Lowerer<'k> {
        let axis = axis::analyze(k, spec);
        let mut params = k
            .params
            .iter()
            .map(|p| match p.ty.elem {
                Elem::Ptr(elem) => ThreadParam::Ptr {
                    name: p.name.clone(),
                    elem,
                },
                Elem::Scalar(ty) => ThreadParam::Scalar {
                    name: p.name.clone(),
                    ty,
                },
            })
            .collect::<Vec<_>>();
        if target.programs_per_block > 1 {
            // The program grid's x (`block_programs`), after the kernel's own.
            params.push(ThreadParam::Scalar {
                name: PROGRAMS_PARAM.into(),
                ty: ScalarType::I32,
            });
        }
        let mut l = Lowerer {
            k,
            target,
            axis,
            vec_by_access: HashMap::new(),
            anchored: vec![false; k.values.len()],
            regs: Arena::new(),
            params,
            shared: Vec::new(),
            body: vec![Vec::new()],
            prologue: Vec::new(),
            values: vec![None; k.values.len()],
            cache: exchange::Cache::default(),
            accesses: ordering::Accesses::default(),
            pipelined: HashMap::new(),
            own_copies: HashMap::new(),
            pending_refill: None,
            hoisted: HashMap::new(),
            dots_after_loop: Vec::new(),
            wgmma_in_flight: None,
            staging_phases: HashMap::new(),
            loop_operand_allocs: Vec::new(),
            coop: Vec::new(),
            tensor_maps: Vec::new(),
            coop_vals: HashMap::new(),
            coop_depth: HashMap::new(),
            use_counts: {
                let mut n = vec![0; k.values.len()];
                for (_, i) in k.insts.iter() {
                    for o in i.op.operands() {
                        n[o.index()] += 1;
                    }
                }
                n
            },
            coop_stages: true,
            own_copies_allowed: true,
            unmasked_prefetch: false,
            copy_threads_from: 0,
            producer: None,
            staged: None,
            staged_after: None,
            producer_warps: 0,
            cluster_sites: 0,
        };
        l.choose_vector_widths();
        l
    }

    fn lower_body(&mut self) -> Result<(), LowerError> {
        for (i, p) in self.k.params.iter().enumerate() {
            let lval = match p.ty.elem {
                Elem::Ptr(_) => {
                    let zero = self.konst(ScalarType::I32, Literal::Int(0));
                    LVal {
                        layout: Layout::scalar(),
                        regs: vec![zero],
                        ptr: Some(i as u32),
                    }
                }
                Elem::Scalar(s) => {
                    let r = self.new_reg(s);
                    self.prologue.push(Stmt::Set {
                        dst: r,
                        expr: crate::thread::Expr::Param(i as u32),
                    });
                    LVal {
                        layout: Layout::scalar(),
                        regs: vec![r],
                        ptr: None,
                    }
                }
            };
            self.values[p.value.index()] = Some(lval);
        }
        let body = &self.k.body;
        if self.region(body)?.is_some() {
            return Err(self.internal("the kernel body yields"));
        }
        self.staged_all_released()?;
        self.finish_specialized()
    }

    fn finish(mut self) -> Result<ThreadKernel, LowerError> {
        let mut body = std::mem::take(&mut self.prologue);
        let prologue = body.len();
        let prologue_stmts = (self.producer_warps > 0).then(|| body.clone());
        body.append(&mut self.body.pop().expect("the kernel body"));
        let mut kernel = ThreadKernel {
            name: self.k.name.clone(),
            params: self.params,
            regs: self.regs,
            shared: self.shared,
            coop: self.coop,
            tensor_maps: self.tensor_maps,
            num_warps: self.target.num_warps * self.target.programs_per_block.max(1),
            warp_size: self.target.warp_size,
            reuse_shared: self.target.reuse_shared,
            narrow_shared_in_words: self.target.narrow_shared_in_words,
            persistent: None,
            producer_warps: self.producer_warps,
            block_programs: None,
            cluster: self.target.cluster,
            dots: None,
            body,
        };
        // The programs of a block share their producer before each side becomes a loop over
        // blocks (persistent): the consumers' prefix, which reads the block's index, then
        // runs every tile.
        let programs = self.target.programs_per_block;
        if programs > 1 {
            block_programs::share_producer(&mut kernel, programs, self.target.threads())
                .map_err(LowerError::InvalidConfig)?;
        }
        if self.target.persistent {
            persistent::make_persistent(&mut kernel, prologue).map_err(LowerError::InvalidConfig)?;
        }
        if let Some(p) = prologue_stmts {
            specialize::prologue_on_each_side(&mut kernel.body, &p);
        }
        let needed = kernel.shared_bytes();
        if needed > self.target.max_shared_bytes {
            return Err(LowerError::OutOfSharedMemory {
                kernel: kernel.name.clone(),
                needed,
                limit: self.target.max_shared_bytes,
            });
        }
        Ok(kernel)
    }

    /// Lowers a region's instructions; returns the values its `yield` gives, if any.
    pub(crate) fn region(&mut self, r: &Region) -> Result<Option<Vec<ValueId>>, LowerError> {
        // The operands staged before this list's loops for `dot`s after them (`hoist`).
        let mut staged = Vec::new();
        for (at, &id) in r.insts.iter().enumerate() {
            let inst = &self.k.insts[id];
            if let Op::Yield { values } = &inst.op {
                return Ok(Some(values.clone()));
            }
            if matches!(inst.op, Op::For { .. }) {
                self.dots_after_loop = self.dots_across_loop(r, at);
                staged.extend_from_slice(&self.dots_after_loop);
            }
            self.emit(Stmt::Comment(format!("{} at {}", inst.op.name(), inst.loc)));
            let at = self.body.last().map_or(0, |b| b.len()) - 1;
            let depth = self.body.len();
            self.inst(inst)?;
            if matches!(inst.op, Op::Dot { .. }) {
                self.forget_staged_for(id, &staged);
                self.staged_dot_lowered(id);
            }
            // (A warp-specialized loop leaves the statements that follow on a side of their own.)
            if self.body.len() == depth {
                self.name_result_layouts(inst, at);
            }
        }
        Ok(None)
    }

    fn inst(&mut self, inst: &'k Inst) -> Result<(), LowerError> {
        self.inst_alone(inst)?;
        // A loop's refill of the stage its own copies were read from waits for their use.
        self.refill_after(inst);
        Ok(())
    }

    fn inst_alone(&mut self, inst: &'k Inst) -> Result<(), LowerError> {
        if self.is_pipelined_load(inst) {
            // An own copy is read back here, where the program loads it: data from memory,
            // as the load's, so that its users take its layout rather than move it.
            self.read_own_copy(inst)?;
            for &v in &inst.results {
                self.anchored[v.index()] = true;
            }
            return Ok(());
        }
        let depth = self.body.len();
        // An accumulator in cooperative matrices scaled row by row stays in them, updated in
        // place where this is its only use (see `coop`).
        if let Some((x, factors)) = self.coop_row_scale(inst) {
            let acc = self.coop_vals[&x].clone();
            let in_place = self.only_use(x, inst);
            let scaled = self.coop_scale_rows(&acc, factors, in_place)?;
            self.coop_vals.insert(inst.results[0], scaled);
            self.coop_depth.insert(inst.results[0], depth);
            return Ok(());
        }
        // It is moved to registers for any other use but as the accumulator of a `dot` on
        // them. Its registers serve this instruction, and the value's later uses where they
        // are in the same statement list (a value with several uses is never updated in
        // place: attention's scores feed their row maximum and their exponent from one
        // move); otherwise they are dropped.
        let coop_acc = match inst.op {
            Op::Dot { acc, .. } if self.coop_plan(inst).is_some() => Some(acc),
            _ => None,
        };
        let mut materialized = Vec::new();
        for o in inst.op.operands() {
            if Some(o) != coop_acc && self.values[o.index()].is_none() && !materialized.contains(&o) {
                if let Some(acc) = self.coop_vals.get(&o).cloned() {
                    let lval = self.coop_to_blocked(&acc)?;
                    self.values[o.index()] = Some(lval);
                    materialized.push(o);
                }
            }
        }
        let r = self.inst_lowered(inst);
        for o in materialized {
            if self.use_count(o) < 2 || self.coop_depth.get(&o) != Some(&depth) {
                self.values[o.index()] = None;
            }
        }
        for &v in &inst.results {
            if self.coop_vals.contains_key(&v) {
                // (No registers from an earlier lowering of the same instruction, as in an
                // unrolled loop body's first copy, stand for these matrices.)
                self.values[v.index()] = None;
                self.coop_depth.insert(v, depth);
            }
        }
        r
    }

    fn inst_lowered(&mut self, inst: &'k Inst) -> Result<(), LowerError> {
        if let Op::Dot { .. } = inst.op {
            if let Some(acc) = self.dot_coop(inst)? {
                self.coop_vals.insert(inst.results[0], acc);
                return Ok(());
            }
        }
        let results: Vec<LVal> = match &inst.op {
            Op::For { .. } | Op::If { .. } | Op::While { .. } => self.control(inst)?,
            Op::Load { .. } | Op::Store { .. } | Op::Atomic { .. } | Op::AtomicCas { .. } => {
                self.memory(inst)?.into_iter().collect()
            }
            Op::Reduce { .. } => vec![self.reduce(inst)?],
            Op::Splat { .. }
            | Op::Broadcast { .. }
            | Op::ExpandDims { .. }
            | Op::Reshape { .. }
            | Op::Permute { .. }
            | Op::Arange { .. }
            | Op::Constant { .. } => vec![self.shape_op(inst)?],
            Op::Dot { .. } => vec![self.dot(inst)?],
            // ---- scans, combine reductions, gather, sort, histogram ----
            Op::Scan { .. } | Op::ReduceCombine { .. } => self.combine_scan(inst)?,
            Op::Sort { .. } => vec![self.sort(inst)?],
            Op::Gather { .. } => vec![self.gather(inst)?],
            Op::Histogram { .. } => vec![self.histogram(inst)?],
            Op::ClusterReduce { .. } => vec![self.cluster_reduce(inst)?],
            Op::ClusterReduceCombine { .. } => self.cluster_reduce_combine(inst)?,
            // ---- end of scans, combine reductions, gather, sort, histogram ----
            // Compiled out of GPU code; the interpreter checks it.
            Op::Assert { .. } => vec![],
            Op::Print { .. } => {
                self.print(inst)?;
                vec![]
            }
            _ => vec![self.elementwise(inst)?],
        };
        let anchored = self.anchors(&inst.op);
        for (&v, lval) in inst.results.iter().zip(results) {
            // (A loop's result carried in cooperative matrices has no registers.)
            if !self.coop_vals.contains_key(&v) {
                self.values[v.index()] = Some(lval);
            }
            self.anchored[v.index()] = anchored;
        }
        Ok(())
    }

    /// Appends the layouts of `inst`'s block results to its comment (at index `at` of the
    /// current statement list), so that dumps of per-thread IR show the assignment.
    fn name_result_layouts(&mut self, inst: &Inst, at: usize) {
        let layouts: Vec<String> = inst
            .results
            .iter()
            .filter(|v| !self.k.ty(**v).shape.is_scalar())
            .filter_map(|v| self.values[v.index()].as_ref().map(|l| l.layout.to_string()))
            .collect();
        if layouts.is_empty() {
            return;
        }
        if let Some(Stmt::Comment(c)) = self.body.last_mut().and_then(|b| b.get_mut(at)) {
            c.push_str(" -> ");
            c.push_str(&layouts.join(", "));
        }
    }

    // ---- helpers shared by the op lowerings ----

    pub(crate) fn unsupported(&self, inst: &Inst, message: impl Into<String>) -> LowerError {
        LowerError::Unsupported {
            op: inst.op.name(),
            loc: inst.loc,
            message: message.into(),
        }
    }

    pub(crate) fn internal(&self, message: impl Into<String>) -> LowerError {
        LowerError::Internal {
            kernel: self.k.name.clone(),
            message: message.into(),
        }
    }

    /// A new shared buffer for `dot` operands (a pipeline's ring, a staged or hoisted tile),
    /// recorded as the enclosing loop's: a top-level loop that has some ends with a barrier
    /// (`leave_loop_operands`), so that the walks of a kernel that runs several loops one
    /// after the other (attention's) share their bytes where `thread::shared` places them.
    pub(crate) fn operand_alloc(&mut self, alloc: crate::thread::SharedAlloc) -> u32 {
        self.shared.push(alloc);
        let id = self.shared.len() as u32 - 1;
        if let Some(current) = self.loop_operand_allocs.last_mut() {
            current.push(id);
        }
        id
    }

    /// Starts recording the operand buffers of a loop (see `operand_alloc`).
    pub(crate) fn enter_loop_operands(&mut self) {
        self.loop_operand_allocs.push(Vec::new());
    }

    /// After a loop: its operand buffers go to the enclosing loop's, or, for a top-level
    /// loop, a barrier follows it, after which they are free.
    pub(crate) fn leave_loop_operands(&mut self) {
        let done = self.loop_operand_allocs.pop().unwrap_or_default();
        // (Only whether there are any matters at the top level: `thread::shared` places
        // buffers apart by a barrier on common bytes.)
        match self.loop_operand_allocs.last_mut() {
            Some(outer) => outer.extend(done),
            None if done.is_empty() => {}
            // A persistent kernel's producer fills the ring of its warp-specialized loop
            // for the next tile while the consumers run what follows the loop in this one
            // (attention's walk over the ragged last key block): that ring is never free.
            None if self.target.persistent && self.producer.is_some() => {}
            None => {
                let open = self.body.last().expect("an open statement list");
                if !matches!(open.last(), Some(crate::thread::Stmt::Barrier)) {
                    self.emit(crate::thread::Stmt::Barrier);
                }
            }
        }
    }

    pub(crate) fn new_reg(&mut self, ty: ScalarType) -> Reg {
        self.regs.append(RegData { ty })
    }

    pub(crate) fn emit(&mut self, s: Stmt) {
        if s == Stmt::Barrier {
            self.note_barrier();
        }
        self.body.last_mut().expect("an open statement list").push(s);
    }

    /// `dst = expr` into a new register of type `ty`.
    pub(crate) fn set(&mut self, ty: ScalarType, expr: crate::thread::Expr) -> Reg {
        let r = self.new_reg(ty);
        self.emit(Stmt::Set { dst: r, expr });
        r
    }

    /// Like [`set`](Self::set), in the prologue (for values that depend only on the thread).
    pub(crate) fn pset(&mut self, ty: ScalarType, expr: crate::thread::Expr) -> Reg {
        let r = self.new_reg(ty);
        self.prologue.push(Stmt::Set { dst: r, expr });
        r
    }

    /// A constant register (made once, in the prologue).
    pub(crate) fn konst(&mut self, ty: ScalarType, value: Literal) -> Reg {
        let bits = match value {
            Literal::Bool(b) => b as u64,
            Literal::Int(i) => i as u64,
            Literal::Float(f) => f.to_bits(),
        };
        if let Some(&r) = self.cache.consts.get(&(ty, bits)) {
            return r;
        }
        let r = self.pset(ty, crate::thread::Expr::Const(value));
        self.cache.consts.insert((ty, bits), r);
        if let (Literal::Int(i), true) = (value, ty.is_int()) {
            self.cache.const_ints.insert(r, i);
        }
        r
    }

    pub(crate) fn i32c(&mut self, v: i64) -> Reg {
        self.konst(ScalarType::I32, Literal::Int(v))
    }

    /// Runs `f` with a fresh statement list and returns what it emitted.
    /// `for i in 0..count { body(i) }` as a per-thread `While`, alike in every thread (a walk
    /// over shared memory: the CUDA-core `dot`'s K steps, a histogram's elements).
    pub(crate) fn counted_loop(
        &mut self,
        count: Reg,
        body: impl FnOnce(&mut Self, Reg) -> Result<(), LowerError>,
    ) -> Result<(), LowerError> {
        let i = self.set(ScalarType::I32, Expr::Const(Literal::Int(0)));
        let (cond_body, cond) = self.nested(|l| Ok(l.set(ScalarType::Bool, Expr::Compare(CmpOp::Lt, i, count))))?;
        let (body, ()) = self.nested(|l| {
            body(l, i)?;
            let one = l.i32c(1);
            l.emit(Stmt::Set {
                dst: i,
                expr: Expr::Binary(BinaryOp::Add, i, one),
            });
            Ok(())
        })?;
        self.emit(Stmt::While { cond_body, cond, body });
        Ok(())
    }

    pub(crate) fn nested<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, LowerError>,
    ) -> Result<(Vec<Stmt>, T), LowerError> {
        self.body.push(Vec::new());
        let r = f(self);
        let stmts = self.body.pop().expect("the nested list");
        r.map(|t| (stmts, t))
    }

    pub(crate) fn lval(&self, v: ValueId) -> Result<LVal, LowerError> {
        self.values[v.index()]
            .clone()
            .ok_or_else(|| self.internal(format!("value %{} used before it was lowered", v.index())))
    }

    pub(crate) fn set_lval(&mut self, v: ValueId, l: LVal) {
        self.values[v.index()] = Some(l);
    }

    /// The register type of a value's elements (pointer offsets are integers).
    pub(crate) fn elem_reg_type(&self, v: ValueId, lval: &LVal) -> ScalarType {
        match self.k.ty(v).elem {
            Elem::Scalar(s) => s,
            Elem::Ptr(_) => self.regs[lval.regs[0]].ty,
        }
    }

    /// The default layout of a shape (rank 0: uniform): row-major order.
    pub(crate) fn default_layout(&self, shape: Shape) -> Layout {
        self.ordered_layout(shape, Self::default_order(shape.rank()))
    }

    /// The registers of `v` in `layout`, converting through shared memory if needed.
    pub(crate) fn ensure(&mut self, v: ValueId, layout: Layout) -> Result<Vec<Reg>, LowerError> {
        let lval = self.lval(v)?;
        let shape = self.k.ty(v).shape;
        if lval.layout == layout || shape.is_scalar() {
            return Ok(lval.regs);
        }
        if let Some(regs) = self.rematerialize(v, layout, 0)? {
            return Ok(regs);
        }
        // Layouts of different form may place the value alike (a slice of a layout with a
        // dimension held in each thread, and the plain layout of the rest).
        let (t, mine) = (self.target, lval.layout.map(shape));
        if mine.places_alike(&layout.map(shape), t.warp_size, t.num_warps) {
            return Ok(lval.regs);
        }
        let ty = self.elem_reg_type(v, &lval);
        self.convert(&lval, ty, shape, layout, shape, None)
    }

    /// The registers of operand `o` in `layout`: as it is, repeated if it is a scalar, or
    /// recomputed.
    fn recompute_operand(&mut self, o: ValueId, layout: Layout, depth: u32) -> Result<Option<Vec<Reg>>, LowerError> {
        // (An accumulator in cooperative matrices has no registers to recompute from.)
        if self.values[o.index()].is_none() && self.coop_vals.contains_key(&o) {
            return Ok(None);
        }
        let l = self.lval(o)?;
        let n = layout.map(self.k.ty(o).shape).len;
        if l.layout == layout || self.k.ty(o).shape.is_scalar() {
            return Ok(Some(if l.regs.len() == n { l.regs } else { vec![l.regs[0]; n] }));
        }
        self.rematerialize(o, layout, depth + 1)
    }

    /// Recomputes `v` directly in `layout` when it is made only of ops that need no data
    /// from other threads — `arange`, constants, splats and element-wise ops on them (index
    /// arithmetic, mostly) — which is cheaper than moving it through shared memory. `None`
    /// when `v` is not such a value.
    fn rematerialize(&mut self, v: ValueId, layout: Layout, depth: u32) -> Result<Option<Vec<Reg>>, LowerError> {
        use crate::thread::Expr;
        const MAX_DEPTH: u32 = 8;
        let ty = self.k.ty(v);
        let crate::ir::ValueDef::Result { inst, .. } = self.k.values[v].def else {
            return Ok(None);
        };
        if depth > MAX_DEPTH || ty.shape.is_scalar() {
            return Ok(None);
        }
        let inst = &self.k.insts[inst];
        let map = layout.map(ty.shape);
        let n = map.len;
        // Ops that only rearrange registers: recompute the operand where they need it.
        match &inst.op {
            Op::ExpandDims { value, axis } if layout.sliced & (1 << layout.blocked_dim(*axis as usize)) == 0 => {
                let src_layout = layout.slice(layout.blocked_dim(*axis as usize));
                return self.recompute_operand(*value, src_layout, depth);
            }
            // A splat (of a pointer, too) is its scalar in every register.
            Op::Splat { value } => return Ok(Some(vec![self.lval(*value)?.regs[0]; n])),
            Op::Broadcast { value } if layout.sliced == 0 => {
                let src_shape = self.k.ty(*value).shape;
                let src = match self.recompute_operand(*value, layout.unsliced(), depth)? {
                    Some(src) => src,
                    // A broadcast is its source repeated: moving the source through shared
                    // memory moves far fewer elements than moving the broadcast would.
                    None => self.ensure(*value, layout.unsliced())?,
                };
                return Ok(Some(shape::broadcast_registers(&src, src_shape, layout, ty.shape)));
            }
            // A gather whose index is recomputable here reads its source again.
            Op::Gather { index, .. } => {
                let Some(index_regs) = self.recompute_operand(*index, layout, depth)? else {
                    return Ok(None);
                };
                let inst = inst.clone();
                return self.regather(&inst, &index_regs, layout);
            }
            _ => {}
        }
        // Pointer offsets are integers of the width `add_ptr` chose.
        let elem = match (ty.scalar_type(), &inst.op) {
            (Some(s), _) => s,
            (None, Op::AddPtr { .. }) => self.regs[self.lval(v)?.regs[0]].ty,
            (None, _) => return Ok(None),
        };
        // Operands: already in `layout`, a scalar, or themselves recomputable.
        let mut operand_regs = Vec::new();
        let element_wise = matches!(
            inst.op,
            Op::Unary { .. }
                | Op::Binary { .. }
                | Op::Compare { .. }
                | Op::Select { .. }
                | Op::Cast { .. }
                | Op::Fma { .. }
                | Op::BytePerm { .. }
                | Op::Rounded { .. }
                | Op::AddPtr { .. }
        );
        if element_wise {
            for o in inst.op.operands() {
                match self.recompute_operand(o, layout, depth)? {
                    Some(r) => operand_regs.push(r),
                    None => return Ok(None),
                }
            }
        }
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let r = |k: usize| operand_regs[k][i];
            let reg = match &inst.op {
                Op::Arange { start, .. } => {
                    let c = self.coord(&map, i, layout.blocked_dim(0));
                    self.arange_element(c, *start as i64)
                }
                Op::Constant { value } => self.konst(elem, *value),
                Op::Splat { value } => self.lval(*value)?.regs[0],
                Op::Unary { op, .. } => self.set(elem, Expr::Unary(*op, r(0))),
                Op::Binary { op, .. } => match self.affine_binary(elem, *op, r(0), r(1)) {
                    Some(q) => q,
                    None => self.set(elem, Expr::Binary(*op, r(0), r(1))),
                },
                Op::Compare { op, .. } => self.set(elem, Expr::Compare(*op, r(0), r(1))),
                Op::Select { .. } => self.set(elem, Expr::Select(r(0), r(1), r(2))),
                Op::Cast { .. } => self.set(elem, Expr::Cast(r(0))),
                Op::Fma { .. } => self.set(elem, Expr::Fma(r(0), r(1), r(2))),
                Op::BytePerm { x, y, selector } => self.byte_perm(elem, [r(0), r(1), r(2)], [*x, *y, *selector]),
                Op::Rounded { op, rounding, args } => {
                    self.set(elem, Expr::Rounded(*op, *rounding, (0..args.len()).map(r).collect()))
                }
                Op::AddPtr { .. } => {
                    let (a, b) = (r(0), r(1));
                    let a = if self.regs[a].ty == elem {
                        a
                    } else {
                        self.set(elem, Expr::Cast(a))
                    };
                    let b = if self.regs[b].ty == elem {
                        b
                    } else {
                        self.set(elem, Expr::Cast(b))
                    };
                    self.set(elem, Expr::Binary(crate::ir::BinaryOp::Add, a, b))
                }
                _ => return Ok(None),
            };
            out.push(reg);
        }
        Ok(Some(out))
    }
}

//! What the lowering needs to know about the device and the launch.

use crate::types::ScalarType;

/// A description of the device a kernel is lowered for, and the launch's shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    /// Threads that run in lockstep and can exchange values by shuffles (32 on NVIDIA; the
    /// subgroup size on Vulkan when the device fixes it).
    pub warp_size: u32,
    /// Warps per program; a program has `num_warps * warp_size` threads.
    pub num_warps: u32,
    /// Shared (workgroup) memory one program may use, in bytes.
    pub max_shared_bytes: u32,
    /// Whether warp shuffles are available; without them cross-thread exchanges go through
    /// shared memory.
    pub shuffles: bool,
    /// The widest global access of one thread, in bytes (16 on NVIDIA).
    pub max_vector_bytes: u32,
    /// Whether the backend computes the IR's f32 `minimum`/`maximum` (NaN if either is NaN,
    /// -0.0 below +0.0) in one instruction, as PTX's `max.NaN` on sm_80 and later. Without
    /// one, each is a dozen compares and selects, so f32 max and min reductions combine
    /// integer keys instead (see `lower::reduce`).
    pub native_float_minmax: bool,
    /// Whether warps can run `mma.sync.m16n8k16` on f16 and bf16 (NVIDIA's tensor cores,
    /// sm_80 and later): `dot` of f16 or bf16 tiles into f32 then runs on them (see
    /// `lower::dot`); elsewhere it runs on the CUDA cores, one `fma` per product.
    pub mma_sync: bool,
    /// Whether warpgroups can run `wgmma.mma_async` (Hopper, sm_90a): `dot` of f16 or bf16
    /// tiles into f32 then reads its operands from shared memory through matrix descriptors
    /// (see `lower::wgmma`) where the program's warps and tile allow, and uses `mma.sync`
    /// elsewhere.
    pub wgmma: bool,
    /// Whether the tensor memory accelerator can copy boxes of a tensor into shared memory
    /// (`cp.async.bulk.tensor`, sm_90): a pipelined operand of a `dot` on warpgroup MMAs
    /// that the lowering proves is such a box is then fetched that way (see `lower::tma`),
    /// through a tensor map the runtime encodes at launch.
    pub tma: bool,
    /// Where [`tma`](Self::tma) is on, whether a store of a warpgroup MMA's result that is a
    /// box of a tensor goes through it too (a staging tile and bulk tensor stores, see
    /// `lower::tma_store`); on by default, off to measure what it is worth.
    pub tma_store: bool,
    /// Where [`tma`](Self::tma) is on, whether a box may also span a pointer's outer
    /// dimensions (an offset `c * s` with `s` an integer parameter, such as attention's
    /// head and batch offsets) and dimensions no mask bounds (an unmasked load, its extent
    /// derived from the strides at launch: `thread::TensorMap::extents`). Off by default:
    /// measured no faster than the `cp.async` ring for attention on an H200 (the runtime's
    /// `RUTILE_TMA_OUTER=1` turns it on).
    pub tma_outer: bool,
    /// Where [`tma_outer`](Self::tma_outer) and [`tma_store`](Self::tma_store) are on,
    /// whether a store's box may span outer dimensions and unmasked ones too (attention's
    /// output, across heads, with its head dimension unmasked; `lower::tma_store`). Off
    /// here; the CUDA runtime turns it on where one program's consumers take a producer's
    /// loop (attention's ping-pongs: on an H200 3.5–5% faster at 1024 tokens, 0.6–3% from
    /// 2048) and leaves it off elsewhere (within run-to-run spread on one warpgroup a
    /// program and on several programs a block); `RUTILE_TMA_STORE_OUTER=0` or `=1` says so
    /// for every launch (docs/performance.md, "The ping-pongs' output through TMA across
    /// heads, measured again").
    pub tma_store_outer: bool,
    /// Whether a warp-specialized loop's producer copies, through TMA, the loop-invariant
    /// `dot` operands that would otherwise be loaded by the consumers and stored before the
    /// loop (attention's `Q`; `lower::staged`). On by default where the target has TMA;
    /// the CUDA runtime's `RUTILE_TMA_STAGED=0` turns it off, to measure it.
    pub tma_staged_operands: bool,
    /// With [`tma_staged_operands`](Self::tma_staged_operands), whether the producer also
    /// copies the operands of the `dot`s after the loop that were computed before it (the
    /// rotated attention walk's last values loaded ahead; on a persistent grid the consumers
    /// then hand the buffers back after those `dot`s rather than after the loop, and the
    /// producer copies the next tile's while they finish this one). Off here; the CUDA
    /// runtime turns it on for persistent grids, where on an H200 the head-128 ping-pong
    /// with the last values ahead then ran 8–11% faster at 1024 tokens than the plain
    /// grid's, and leaves it off on plain ones, where it
    /// gained 1.5–1.8% against 3% with `Q` alone (docs/performance.md, "The persistent
    /// ping-pong with the last values copied"); `RUTILE_TMA_STAGED_AFTER=0` or `=1` says so
    /// for every launch.
    pub tma_staged_after: bool,
    /// Whether threads can copy global memory to shared memory asynchronously (`cp.async`,
    /// sm_80 and later): the loads that feed a `dot` on the tensor cores in a loop then go
    /// through a ring of [`num_stages`](Self::num_stages) buffers (see `lower::pipeline`).
    pub async_copy: bool,
    /// Shared-memory buffers in such a ring, as Triton's `num_stages`: copies for the next
    /// `num_stages - 1` iterations are in flight while one computes. 1 (or a target without
    /// asynchronous copies) loads each iteration's operands in that iteration, except where
    /// a `dot` runs on cooperative matrices: its operands are then loaded into registers
    /// `num_stages - 1` iterations ahead, at most 2 (with one stage, in the iteration that
    /// stores them into shared memory; `lower::pipeline`).
    pub num_stages: u32,
    /// Which shared buffers not in use at once may share bytes, as the backend lays shared
    /// memory out ([`crate::thread::ThreadKernel::shared_offsets`]): any (PTX's one block of
    /// dynamic shared memory), those of one element type (SPIR-V's workgroup arrays, one per
    /// type), or none.
    pub reuse_shared: SharedReuse,
    /// Shared buffers of `bf16` and of 8- and 16-bit integers take a 4-byte word an
    /// element (SPIR-V's workgroup arrays hold them widened, as registers do: naga has no
    /// narrower type but `f16`), which the shared memory a program may use is counted in
    /// ([`crate::thread::ThreadKernel::shared_bytes`]).
    pub narrow_shared_in_words: bool,
    /// The cooperative-matrix multiply-adds warps (subgroups) can run
    /// (`VK_KHR_cooperative_matrix`, subgroup scope; where [`warp_size`](Self::warp_size) is
    /// the device's subgroup size): a `dot` whose types and tile fit one of them runs on
    /// them (see `lower::coop`); empty where there are none, and `dot` runs on the CUDA
    /// cores (or `mma.sync`).
    pub coop_matrix: Vec<CoopMatrixShape>,
    /// Where [`coop_matrix`](Self::coop_matrix) lists shapes, whether an accumulator held in
    /// cooperative matrices may be multiplied by a column of per-row factors in place
    /// (attention's `acc * alpha[:, None]`): the factors go through shared memory as a
    /// vector, each warp loads them as a matrix that repeats them along its rows, and
    /// multiplies element by element (`thread::Stmt::CoopMul`, `OpFMul` on cooperative
    /// matrices). Without it the accumulator goes to registers and back through shared
    /// memory for every such product. naga cannot write that product, so rutile-spirv writes
    /// it into its own SPIR-V words: the Vulkan runtime turns it on where the device takes
    /// them (wgpu's passthrough shaders).
    pub coop_scale: bool,
    /// Whether each program walks several output tiles: the kernel runs on a grid the
    /// runtime sizes to the device (multiprocessors x occupancy), and each program takes the
    /// tiles `program, program + programs, ...` of the grid the launch asked for, its
    /// `program_id` and `num_programs` being those of the tile (see `lower::persistent`).
    /// A schedule the autotuner can choose; the result is the same. (The CUDA and Vulkan
    /// runtimes honour it; the interpreter runs the plain grid.)
    pub persistent: bool,
    /// Whether a loop whose `dot` operands all come through the tensor memory accelerator
    /// gets a producer warpgroup of its own: four more warps issue the copies, the
    /// `num_warps` warps only wait for them and multiply (see `lower::specialize`).
    /// Needs [`tma`](Self::tma); a schedule the autotuner can choose.
    pub warp_specialize: bool,
    /// Programs per thread-block cluster, consecutive along grid axis 0 (CUDA from sm_90;
    /// 1, the default, is none): `cluster_reduce` combines over them (see
    /// `lower::cluster`).
    pub cluster: u32,
    /// Programs a thread block runs, consecutive along grid axis 0 (1, the default: one):
    /// with [`warp_specialize`](Self::warp_specialize), `programs_per_block` groups of
    /// `num_warps` consumer warps, each its own program, share one producer warpgroup, which
    /// copies the loop's operands once for all of them (attention's K and V, the same for
    /// every query block of a head): FlashAttention-3's three consumer warpgroups of 64 query
    /// rows each, from the unchanged kernel of one warpgroup a program (see
    /// `lower::block_programs`). The producer's copies must not depend on `program_id(0)`.
    pub programs_per_block: u32,
    /// Of every eight registers of an f32 `exp2` result a thread computes, how many (0 to 8)
    /// are computed by a polynomial on the FMA units instead of the special-function unit
    /// (`lower::exp2`; relative error within 3e-7, near the hardware's, flushing results
    /// below the normal range to 0 as it does). 0, the default, is none: on an H200 every
    /// share made attention at head dimension 64 slower (about a dozen instructions where
    /// one `ex2` was; docs/performance.md, "The switches measured").
    pub exp2_on_fma: u32,
    /// Into how many interleaved partials a thread folds its own elements of a `max` or
    /// `min` reduction before combining them (`lower::reduce`; exact in any order): 1 is in
    /// order along the axis, one dependent chain as long as the thread's elements; more
    /// shorten the chain that attention's `exp2`s wait for (32 values a row a thread at
    /// 128-key blocks) at a few registers (`ptxas` 12.9 with 4: 0 to 9 more in the
    /// tutorial's attention kernels, no new spills). 1 by default: on an H200, 4 timed
    /// within run-to-run spread of it in two runs (docs/performance.md, "The last values
    /// ahead, and shorter chains timed"); the CUDA runtime's `RUTILE_REDUCE_CHAINS=k` asks
    /// for k. On Vulkan the attention blocks that NVIDIA's driver runs wrong were found on
    /// the in-order code (docs/performance.md, "The wrong Vulkan blocks, located").
    pub reduce_chains: u32,
    /// Into how many interleaved partials a thread folds its elements of a `sum` before
    /// combining them (`lower::reduce`). A float sum's rounding depends on its order, which
    /// neither Triton nor rutile specifies (the lanes' and warps' partials already combine
    /// as a tree), so any count is a correct sum; 1 is in order along the axis, one
    /// dependent chain of adds as long as the thread's elements, which the layer norm's
    /// statistics wait for twice a row (32 adds a thread at 8192 columns on 8 warps).
    pub sum_chains: u32,
    /// Whether divisions and remainders by constant powers of two in loops become shifts
    /// and masks (`thread::reduce_constant_divisions`): `ptxas` expands even a division by
    /// an immediate into its general sequence of about 18 instructions, and a pipelined
    /// loop divides every iteration. On by default; the CUDA runtime's
    /// `RUTILE_DIVISIONS_AS_SHIFTS=0` turns it off, to time what it saves.
    pub divisions_as_shifts: bool,
    /// Whether a comparison that the axis analysis finds constant over runs of a thread's
    /// consecutive elements (`cols < n`, `n` divisible by 16) is computed once a run
    /// (`lower::elementwise`): a mask in a loop then costs `ptxas` a predicate a 16-byte
    /// vector where it held a 0 or 1 in a register for every element (the layer norm's row
    /// walk at 8192 columns on 8 warps: 116 registers to 64, sm_90). On by default; the
    /// runtimes' `RUTILE_MASKS_BY_RUNS=0` turns it off, to time what it saves.
    pub masks_by_runs: bool,
    /// Whether a loop whose pipelined loads are all own copies (`lower::pipeline`: each
    /// thread reads back its own slots) refills the stage a thread has just read, once what
    /// it read is used, rather than another stage at the iteration's top: `num_stages - 1`
    /// stages of shared memory where `num_stages` were, the copies as far ahead. On by
    /// default; the CUDA runtime's `RUTILE_REFILL_AFTER_READ=0` turns it off, to time it.
    pub refill_after_read: bool,
    /// Whether the backend has one instruction for `byte_perm` (PTX's `prmt`); without
    /// it the lowering picks the bytes by shifts and masks (`lower::byte_perm`).
    pub byte_perm: bool,
}

/// One cooperative-matrix multiply-add a device offers (a `VkCooperativeMatrixPropertiesKHR`
/// of subgroup scope): an `m x k` A and a `k x n` B of `ab` into an `m x n` accumulator of
/// `acc`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CoopMatrixShape {
    /// Rows of A and of the accumulator.
    pub m: u32,
    /// Columns of B and of the accumulator.
    pub n: u32,
    /// Columns of A and rows of B.
    pub k: u32,
    /// The element type of A and B.
    pub ab: ScalarType,
    /// The element type of the accumulator and the result.
    pub acc: ScalarType,
}

/// Which shared buffers may share bytes when they are never in use between the same two
/// barriers (`thread::shared` says when that is).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SharedReuse {
    /// Each buffer has bytes of its own.
    Never,
    /// Buffers of one element type: the backend declares one array per element type (SPIR-V
    /// workgroup variables, which cannot alias across types without
    /// `VK_KHR_workgroup_memory_explicit_layout`), and a buffer's offset counts from the
    /// start of its type's array.
    SameType,
    /// Any buffers: the backend lays shared memory out as one block (PTX).
    Any,
}

impl Target {
    /// An NVIDIA GPU: warps of 32, shuffles, 16-byte accesses.
    pub fn nvidia(num_warps: u32, max_shared_bytes: u32) -> Target {
        Target {
            warp_size: 32,
            num_warps,
            max_shared_bytes,
            shuffles: true,
            max_vector_bytes: 16,
            native_float_minmax: true,
            mma_sync: false,
            wgmma: false,
            tma: false,
            tma_store: true,
            tma_outer: false,
            tma_store_outer: false,
            tma_staged_operands: true,
            tma_staged_after: false,
            async_copy: false,
            num_stages: 1,
            reuse_shared: SharedReuse::Any,
            narrow_shared_in_words: false,
            coop_matrix: Vec::new(),
            coop_scale: false,
            persistent: false,
            warp_specialize: false,
            cluster: 1,
            programs_per_block: 1,
            exp2_on_fma: 0,
            reduce_chains: 1,
            sum_chains: 1,
            divisions_as_shifts: true,
            masks_by_runs: true,
            refill_after_read: true,
            byte_perm: true,
        }
    }
    /// A Vulkan device as the SPIR-V backend sees it: subgroups of `warp_size` with
    /// shuffles, 16-byte accesses, no NaN-propagating `maximum` instruction, one workgroup
    /// variable per shared buffer, narrow types widened to words there, no byte permute,
    /// no matrix units (the runtime adds what the device has).
    pub fn vulkan(warp_size: u32, num_warps: u32, max_shared_bytes: u32) -> Target {
        Target {
            warp_size,
            native_float_minmax: false,
            reuse_shared: SharedReuse::SameType,
            narrow_shared_in_words: true,
            byte_perm: false,
            ..Target::nvidia(num_warps, max_shared_bytes)
        }
    }
    /// Threads per program, saturating at `u32::MAX` (more than any device allows, and more
    /// than [`crate::lower::lower`] accepts).
    pub fn threads(&self) -> u32 {
        self.warp_size.saturating_mul(self.num_warps)
    }
}

/// Facts about the launch's arguments that the compiled code may rely on, as Triton's
/// specialization: integers and pointers divisible by 16 (pointers: their address in bytes),
/// and integers equal to 1 (a unit stride: what makes a column-major operand's pointer
/// contiguous down its columns, so that its accesses coalesce along them).
/// The runtime computes it from the actual arguments and compiles one kernel per value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Specialization {
    /// For each parameter, whether it is divisible by 16.
    pub divisible_by_16: Vec<bool>,
    /// For each integer parameter, whether it is 1 (missing entries: not known to be).
    pub equal_to_1: Vec<bool>,
}

impl Specialization {
    /// No assumptions.
    pub fn none(num_params: usize) -> Specialization {
        Specialization {
            divisible_by_16: vec![false; num_params],
            equal_to_1: vec![false; num_params],
        }
    }
    /// Every parameter divisible by 16.
    pub fn all(num_params: usize) -> Specialization {
        Specialization {
            divisible_by_16: vec![true; num_params],
            equal_to_1: vec![false; num_params],
        }
    }
    /// Whether parameter `param` is known to be divisible by 16 (a pointer: its address in
    /// bytes); false for a parameter without an entry.
    pub fn is_divisible(&self, param: usize) -> bool {
        self.divisible_by_16.get(param).copied().unwrap_or(false)
    }
    /// Whether integer parameter `param` is known to be 1.
    pub fn is_one(&self, param: usize) -> bool {
        self.equal_to_1.get(param).copied().unwrap_or(false)
    }
}

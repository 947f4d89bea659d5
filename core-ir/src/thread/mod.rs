//! The per-thread IR: what one thread of a program (a CUDA block, a Vulkan workgroup) runs.
//!
//! The shared lowering ([`crate::lower`]) turns block ops into this form once, for every
//! backend: each block value becomes a few scalar registers per thread, block ops become
//! scalar arithmetic, predicated (and vectorized) memory accesses, warp shuffles and
//! shared-memory exchanges with barriers. The PTX and SPIR-V generators only translate it.
//!
//! Registers are typed scalars and mutable: most are set once, but loop-carried values,
//! `if` results and masked loads (which keep the `other` value where the mask is false)
//! set a register more than once. All control flow here is uniform across the threads of a
//! program: it comes from the block IR's `for`/`if`/`while` on scalars, which every thread
//! computes alike, so barriers and shuffles may appear anywhere.

mod build;
mod dce;
mod halves;
mod print;
mod products;
mod shared;
mod strength;
mod tensor_map;
mod verify;

pub use build::ThreadKernelBuilder;
pub use dce::eliminate_dead_registers;
pub use dce::{operands, reads, writes};
pub use halves::{word_halves, WordHalf};
pub use products::{product_pairs, ProductRole};
pub use strength::reduce_constant_divisions;
pub use tensor_map::{LaunchValue, MBarrier, TensorMap, ViewExtents};
pub use verify::verify;

use crate::arena::{Arena, Handle};
use crate::ir::{AtomicOp, AtomicOrder, BinaryOp, CacheModifier, CmpOp, Literal, RoundedOp, Rounding, UnaryOp};
use crate::types::ScalarType;

/// A virtual register.
pub type Reg = Handle<RegData>;

/// A register's type (booleans are predicates).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegData {
    /// The register's scalar type; `Bool` registers are predicates (PTX's `.pred`).
    pub ty: ScalarType,
}

/// A kernel parameter as the backends pass it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ThreadParam {
    /// A pointer to global memory holding elements of `elem`. Backends address it by element
    /// index: PTX as a 64-bit address, SPIR-V as a storage buffer.
    Ptr {
        /// The parameter's name in the block kernel.
        name: String,
        /// The type of the elements it points to.
        elem: ScalarType,
    },
    /// A scalar passed by value, read with [`Expr::Param`]: PTX passes it as a `.param` of
    /// its type, SPIR-V in the launch block.
    Scalar {
        /// The parameter's name in the block kernel.
        name: String,
        /// Its type.
        ty: ScalarType,
    },
}

impl ThreadParam {
    /// The parameter's name, of either kind.
    pub fn name(&self) -> &str {
        match self {
            ThreadParam::Ptr { name, .. } | ThreadParam::Scalar { name, .. } => name,
        }
    }
}

/// A buffer of shared (workgroup) memory, private to one program. Never of booleans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedAlloc {
    /// The element type (a number: [`verify`] rejects `Bool`).
    pub elem: ScalarType,
    /// The length in elements (not bytes); [`verify`] rejects 0.
    pub len: u32,
    /// The byte boundary the buffer starts at: 16, or 1024 for the operands of
    /// [`Stmt::Wgmma`], whose swizzle the hardware applies to address bits.
    pub align: u32,
    /// Whether what it holds never passes from one iteration of a loop to the next: every
    /// element read in an iteration of a loop that holds both the read and the write is
    /// written earlier in that iteration (a layout exchange, an operand stored for the `dot`
    /// that reads it). Such a buffer used only inside a loop may share bytes with another
    /// used in the same iteration apart from it by barriers (`shared.rs`); a pipeline's ring,
    /// filled for later iterations, is not transient.
    pub transient: bool,
}

impl SharedAlloc {
    /// A buffer of `len` elements of `elem` on a 16-byte boundary.
    pub fn new(elem: ScalarType, len: u32) -> SharedAlloc {
        SharedAlloc {
            elem,
            len,
            align: 16,
            transient: false,
        }
    }

    /// A [transient](Self::transient) buffer of `len` elements of `elem` on a 16-byte
    /// boundary.
    pub fn transient(elem: ScalarType, len: u32) -> SharedAlloc {
        SharedAlloc {
            transient: true,
            ..SharedAlloc::new(elem, len)
        }
    }

    /// Its size in bytes, saturating at `u32::MAX` ([`verify`] rejects kernels whose shared
    /// memory does not fit a `u32`).
    pub fn bytes(&self) -> u32 {
        self.len.saturating_mul(self.elem.size_bytes() as u32)
    }
}

/// Which dimension a [`Stmt::Wgmma`] operand's rows in shared memory run along.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatrixMajor {
    /// Rows along K (A stored row-major, B column-major).
    K,
    /// Rows along M for A, N for B.
    MN,
}

/// A [`Stmt::Wgmma`] operand in shared memory, as its matrix descriptor describes it: the
/// canonical layouts of the PTX ISA ("Shared Memory Matrix Layout"), 16-bit elements in rows
/// of `swizzle` bytes (32, 64 or 128) whose 16-byte chunks are XORed with address bits 7 and
/// up (the same as [`crate::layout::SwizzledTile`]'s swizzle for such rows, when the buffer
/// starts on a 1024-byte boundary).
///
/// Element `(i, k)` of a K-major operand (`i` the row: M for A, N for B) is at byte
/// `(i / 8) * sbo + (i % 8) * swizzle + 2 k` from the start; element `(k, i)` of an MN-major
/// one at `(i / c) * lbo + (k / 8) * sbo + (k % 8) * swizzle + 2 (i % c)`, `c = swizzle / 2`;
/// then swizzled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmemMatrix {
    /// The shared buffer holding the operand: an index into [`ThreadKernel::shared`], a
    /// buffer of f16 or bf16 starting on a 1024-byte boundary.
    pub alloc: u32,
    /// The element index of the matrix's first element is `index + offset`: a uniform
    /// register, and a constant kept apart (a multiple of 16 bytes), so that a group's MMAs,
    /// which step through one stage's operands at constant offsets, share the register and
    /// the backend can derive each descriptor from the first by an addition.
    pub index: Reg,
    /// The constant part of the first element's index (see `index`), in elements: a
    /// multiple of 16 bytes' worth.
    pub offset: u32,
    /// Which dimension the operand's rows run along.
    pub major: MatrixMajor,
    /// The swizzle mode in bytes, which is also the length of a row: 32, 64 or 128.
    pub swizzle: u32,
    /// The leading byte offset: in an MN-major operand, the bytes from one span of `c`
    /// elements along M or N to the next (see above); unused by K-major operands.
    pub lbo: u32,
    /// The stride byte offset: the bytes from one group of 8 rows to the next (see above).
    pub sbo: u32,
}

/// The A operand of a [`Stmt::Wgmma`]: a matrix in shared memory, or registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WgmmaA {
    /// A 64x16 matrix in shared memory, of the element type of B.
    Shared(SmemMatrix),
    /// Eight 16-bit registers a thread: lane `l` of warp `w` of the warpgroup, with
    /// `g = l / 4` and `t = l % 4`, holds rows `16w + g` and `16w + g + 8`, columns `2t`,
    /// `2t + 1`, `2t + 8` and `2t + 9`, in the order `(g, 2t)`, `(g, 2t+1)`, `(g+8, 2t)`,
    /// `(g+8, 2t+1)`, `(g, 2t+8)`, `(g, 2t+9)`, `(g+8, 2t+8)`, `(g+8, 2t+9)`: the positions
    /// of the accumulator's columns `0..16` (so a `wgmma` result, converted, feeds the next
    /// one without going through shared memory).
    Registers([Reg; 8]),
}

/// The part a cooperative matrix plays in `D = A B + C` (Vulkan's `MatrixAUseKHR`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CoopRole {
    /// The left operand, `rows x k`.
    A,
    /// The right operand, `k x cols`.
    B,
    /// The accumulator (and result).
    Acc,
}

/// A cooperative matrix (`VK_KHR_cooperative_matrix`, subgroup scope): a `rows x cols`
/// matrix of `elem` held by a whole warp (subgroup) together, in a distribution of elements
/// over lanes that the device does not disclose. So it is never a set of registers: only
/// [`Stmt::CoopLoad`], [`Stmt::CoopStore`], [`Stmt::CoopMulAdd`], [`Stmt::CoopMul`] and
/// [`Stmt::CoopZero`] touch it, each executed by every lane of the warp alike. Each warp has its own value of
/// every cooperative matrix of the kernel (indexed by [`CoopReg`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CoopMatrix {
    /// The part it plays in a [`Stmt::CoopMulAdd`].
    pub role: CoopRole,
    /// Its number of rows.
    pub rows: u32,
    /// Its number of columns.
    pub cols: u32,
    /// Its element type, also that of the shared buffers it is loaded from and stored to.
    pub elem: ScalarType,
}

/// A cooperative matrix of the kernel: an index into [`ThreadKernel::coop`].
pub type CoopReg = u32;

/// Values a thread can read about where it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Special {
    /// Index of the thread in its thread block, `0..(num_warps + producer_warps) *
    /// warp_size`: in its program, unless a block runs several ([`BlockPrograms`], whose
    /// lowering computes a program's own thread index from it).
    ThreadId,
    /// The thread block's index along grid axis 0, 1 or 2: the program's, unless a block
    /// runs several along axis 0 ([`BlockPrograms`]).
    ProgramId(u8),
    /// The launch's size in thread blocks along axis 0, 1 or 2.
    NumPrograms(u8),
}

/// Where a load or store goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    /// Global memory through pointer parameter `param` (an index into `params`).
    Global {
        /// The pointer parameter: an index into [`ThreadKernel::params`].
        param: u32,
    },
    /// Shared memory buffer `alloc` (an index into `shared`).
    Shared {
        /// The buffer: an index into [`ThreadKernel::shared`].
        alloc: u32,
    },
}

/// A scalar computation. The result type is the destination register's.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A constant: a boolean literal for a `Bool` destination, an integer one for an
    /// integer type, a float one for a float type.
    Const(Literal),
    /// The value of scalar parameter `index` (an index into [`ThreadKernel::params`]; the
    /// parameter is a [`ThreadParam::Scalar`] of the destination's type).
    Param(u32),
    /// A [`Special`] value (thread index, program index, grid size); the destination is an
    /// i32.
    Special(Special),
    /// The value of another register of the destination's type.
    Copy(Reg),
    /// A unary op of a register of the destination's type (semantics of the block IR's).
    Unary(UnaryOp, Reg),
    /// A binary op of two registers of the destination's type (semantics of the block
    /// IR's).
    Binary(BinaryOp, Reg, Reg),
    /// A boolean: the comparison of two registers of one type.
    Compare(CmpOp, Reg, Reg),
    /// `cond ? a : b`.
    Select(Reg, Reg, Reg),
    /// `a * b + c` with one rounding, on floats of the destination's type (PTX's
    /// `fma.rn`).
    Fma(Reg, Reg, Reg),
    /// Four bytes of `a` (bytes 0 to 3) and `b` (4 to 7) picked by selector `s`, all of
    /// the destination's type, a 32-bit integer (the block IR's `byte_perm`; PTX's `prmt`).
    /// Lowered only where the target has one instruction for it
    /// ([`crate::target::Target::byte_perm`]); elsewhere the lowering writes it in shifts.
    BytePerm(Reg, Reg, Reg),
    /// Float arithmetic rounded once in the given direction (semantics of the block IR's
    /// `rounded`): [`RoundedOp::arity`] registers of the destination's type, f32 or f64.
    Rounded(RoundedOp, Rounding, Vec<Reg>),
    /// Numeric conversion (semantics of the block IR's `cast`).
    Cast(Reg),
    /// The bits of a register of the same width as the destination, reinterpreted.
    Bitcast(Reg),
    /// The value of `value` in lane `lane ^ mask` of this warp (every lane takes part).
    ShuffleXor {
        /// The register read in the other lane, of the destination's type.
        value: Reg,
        /// XORed with the lane number: below the warp size (PTX's `shfl.sync.bfly`).
        mask: u32,
    },
    /// The value of `value` in lane `lane` of this warp (every lane takes part).
    ShuffleIdx {
        /// The register read in the other lane, of the destination's type.
        value: Reg,
        /// The lane to read from: an i32 register, `0..warp_size` (PTX's `shfl.sync.idx`).
        lane: Reg,
    },
}

/// The most threads a program may have: far above any GPU's (1024 on CUDA, 1024 to 2048 in
/// a Vulkan workgroup), and low enough that thread ids and the lowering's element
/// coordinates stay well within `i32`.
pub const MAX_THREADS: u32 = 1 << 16;

/// The most registers one vector `Load` or `Store` moves (1, 2, 4 or 8).
pub const MAX_VECTOR: usize = 8;

/// A statement of the per-thread program.
#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// `dst = expr`.
    Set {
        /// The register written.
        dst: Reg,
        /// The value written, of `dst`'s type.
        expr: Expr,
    },
    /// Reads `dsts.len()` consecutive elements starting at element `index` (a 32- or 64-bit
    /// integer register) into `dsts`, where `pred` holds; otherwise the registers keep their
    /// values. With more than one destination the index is a multiple of the count (aligned
    /// vector).
    Load {
        /// The registers read into, of the memory's element type: 1, 2, 4 or 8 of them (up to
        /// [`MAX_VECTOR`]).
        dsts: Vec<Reg>,
        /// The buffer read.
        mem: Memory,
        /// The element index (not bytes) of the first element read, counted from the
        /// pointer's (global) or the buffer's (shared) first element.
        index: Reg,
        /// A boolean register: where it is false the thread reads nothing; `None`: always.
        pred: Option<Reg>,
        /// The block op's cache policy (global memory only; a hint).
        cache: CacheModifier,
    },
    /// Writes `values` to consecutive elements starting at `index` where `pred` holds.
    Store {
        /// The registers written, of the memory's element type: 1, 2, 4 or 8 of them (up to
        /// [`MAX_VECTOR`]), `index` a multiple of their count.
        values: Vec<Reg>,
        /// The buffer written.
        mem: Memory,
        /// The element index (not bytes) of the first element written, as [`Stmt::Load`]'s.
        index: Reg,
        /// A boolean register: where it is false the thread writes nothing; `None`: always.
        pred: Option<Reg>,
    },
    /// Atomic read-modify-write of global element `index`; `dst` gets the old value where
    /// `pred` holds and keeps its value elsewhere.
    Atomic {
        /// Receives the element's old value; of the element type.
        dst: Reg,
        /// The operation (semantics of the block IR's atomics).
        op: AtomicOp,
        /// The pointer parameter: an index into [`ThreadKernel::params`].
        param: u32,
        /// The element index (not bytes): a 32- or 64-bit integer register.
        index: Reg,
        /// The operand combined with the element; of the element type.
        value: Reg,
        /// A boolean register: where it is false the thread does nothing; `None`: always.
        pred: Option<Reg>,
        /// The memory ordering and scope (the block IR's; the barriers a release needs
        /// between the program's threads are statements of their own).
        order: AtomicOrder,
    },
    /// Atomic compare-and-swap of global element `index`, as `Atomic`.
    AtomicCas {
        /// Receives the element's old value; of the element type.
        dst: Reg,
        /// The pointer parameter: an index into [`ThreadKernel::params`].
        param: u32,
        /// The element index (not bytes): a 32- or 64-bit integer register.
        index: Reg,
        /// The value compared with the element; of the element type.
        cmp: Reg,
        /// The value written where the element equals `cmp`; of the element type.
        value: Reg,
        /// A boolean register: where it is false the thread does nothing; `None`: always.
        pred: Option<Reg>,
        /// The memory ordering and scope, as `Atomic`'s.
        order: AtomicOrder,
    },
    /// One warp-wide matrix multiply-add on the matrix units, PTX's
    /// `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32`: `d = a b + c` for
    /// a 16x16 `a`, a 16x8 `b` and 16x8 `c` and `d`, each spread over the 32 lanes of the
    /// warp as PTX lays out its fragments. Lane `l`, with `g = l / 4` and `t = l % 4`, holds
    ///
    /// - `a`: `(g, 2t)`, `(g, 2t+1)`, `(g+8, 2t)`, `(g+8, 2t+1)`, `(g, 2t+8)`, `(g, 2t+9)`,
    ///   `(g+8, 2t+8)`, `(g+8, 2t+9)` (f16 or bf16, all alike);
    /// - `b`: `(2t, g)`, `(2t+1, g)`, `(2t+8, g)`, `(2t+9, g)` (the type of `a`);
    /// - `c` and `d`: `(g, 2t)`, `(g, 2t+1)`, `(g+8, 2t)`, `(g+8, 2t+1)` (f32).
    ///
    /// The products are exact and the sums are in f32, in an order the hardware picks.
    /// Every lane of the warp takes part (warps of 32 only); `d` may be `c`.
    Mma {
        /// The result fragment: four f32 registers.
        d: [Reg; 4],
        /// This lane's eight elements of `a`, f16 or bf16.
        a: [Reg; 8],
        /// This lane's four elements of `b`, of `a`'s type.
        b: [Reg; 4],
        /// The addend fragment: four f32 registers.
        c: [Reg; 4],
    },
    /// The tf32 form of [`Stmt::Mma`], PTX's
    /// `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32`: `d = a b + c` for a 16x8 `a`,
    /// an 8x8 `b` and 16x8 `c` and `d`. The registers are f32; each operand is rounded to
    /// tf32 first (as `cvt.rna.tf32.f32`, [`crate::ir::round_to_tf32`]). Lane `l`, with
    /// `g = l / 4` and `t = l % 4`, holds
    ///
    /// - `a`: `(g, t)`, `(g+8, t)`, `(g, t+4)`, `(g+8, t+4)`;
    /// - `b`: `(t, g)`, `(t+4, g)`;
    /// - `c` and `d`: `(g, 2t)`, `(g, 2t+1)`, `(g+8, 2t)`, `(g+8, 2t+1)`, as for `Mma`.
    ///
    /// The products of the rounded operands are exact and the sums are in f32, in an order
    /// the hardware picks. Every lane of the warp takes part (warps of 32 only); `d` may be
    /// `c`.
    MmaTf32 {
        /// The result fragment: four f32 registers.
        d: [Reg; 4],
        /// This lane's four elements of `a` (f32, rounded to tf32).
        a: [Reg; 4],
        /// This lane's two elements of `b` (f32, rounded to tf32).
        b: [Reg; 2],
        /// The addend fragment: four f32 registers.
        c: [Reg; 4],
    },
    /// Warp-wide load of 8x8 matrices of 16-bit elements from shared memory, PTX's
    /// `ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16`: `dsts` has 2 registers per
    /// matrix (1, 2 or 4 matrices). Lane `8j + r` gives, in `index`, the element index of row
    /// `r` of matrix `j` in shared buffer `alloc` (8 consecutive elements, 16-byte aligned);
    /// lane `l` receives `dsts[2j]`, `dsts[2j + 1]` = row `l / 4`, columns `2 (l % 4)` and
    /// `2 (l % 4) + 1` of matrix `j`, or with `trans` rows `2 (l % 4)`, `2 (l % 4) + 1` of
    /// column `l / 4`: exactly an `mma` operand fragment's pair. Every lane takes part
    /// (warps of 32 only); lanes past the matrices' rows give ignored indices.
    ///
    /// A buffer of 32-bit elements is read as the same bytes: a row is 4 elements, `dsts`
    /// has 1 register per matrix, and lane `l` receives element `l % 4` of row `l / 4` (the
    /// two 16-bit halves of one element): a tf32 fragment's element, for [`Stmt::MmaTf32`].
    /// `trans` would split elements, so it needs 16-bit ones.
    LdMatrix {
        /// The registers received, of the buffer's element type: 2 per matrix for 16-bit
        /// elements, 1 for 32-bit ones.
        dsts: Vec<Reg>,
        /// The shared buffer read: an index into [`ThreadKernel::shared`].
        alloc: u32,
        /// The element index (not bytes) of the row this lane gives: a 32- or 64-bit integer
        /// register.
        index: Reg,
        /// Whether each matrix is transposed on the way (`.trans`; 16-bit elements only).
        trans: bool,
    },
    /// Starts an asynchronous copy of `len` consecutive elements (4, 8 or 16 bytes) from
    /// element `src` of global pointer parameter `param` to element `dst` of shared buffer
    /// `alloc` (both aligned to the copy's size), PTX's `cp.async`. Where `pred` is false
    /// nothing is read and the shared elements become zeros (the zero-fill form, which is
    /// what a masked load with `other = 0` gives). The copy belongs to the thread's next
    /// [`Stmt::AsyncCommit`] group and is complete only after an [`Stmt::AsyncWait`] that
    /// covers that group; other threads see it after a barrier that follows the wait.
    AsyncCopy {
        /// The shared buffer written: an index into [`ThreadKernel::shared`], of the
        /// pointer's element type.
        alloc: u32,
        /// The element index (not bytes) in `alloc` of the first element written: a 32- or
        /// 64-bit integer register.
        dst: Reg,
        /// The pointer parameter read: an index into [`ThreadKernel::params`].
        param: u32,
        /// The element index (not bytes) of the first element read: a 32- or 64-bit integer
        /// register.
        src: Reg,
        /// The number of elements, which make 4, 8 or 16 bytes.
        len: u32,
        /// A boolean register: where it is false nothing is read and zeros are written;
        /// `None`: always read.
        pred: Option<Reg>,
    },
    /// Closes the group of the thread's copies started since the last commit
    /// (`cp.async.commit_group`).
    AsyncCommit,
    /// Waits until at most `pending` of the thread's committed copy groups are incomplete,
    /// the newest ones (`cp.async.wait_group pending`).
    AsyncWait {
        /// How many of the newest committed groups may still be incomplete.
        pending: u32,
    },
    /// Makes the thread's earlier shared-memory writes (stores, completed copies) visible to
    /// the asynchronous proxy that [`Stmt::Wgmma`] reads operands through
    /// (`fence.proxy.async.shared::cta`); a barrier after it publishes them to the other
    /// threads' wgmmas.
    FenceProxyAsync,
    /// Where `pred` holds (one thread, in practice): initializes mbarrier `bar` to expect
    /// `count` arrivals a phase, in phase 0 (`mbarrier.init`), and makes that visible to the
    /// asynchronous proxy (`fence.mbarrier_init`). A [`Stmt::Barrier`] must follow before
    /// another thread or a copy uses it.
    MbarrierInit {
        /// The mbarrier initialized.
        bar: MBarrier,
        /// The arrivals that complete each phase.
        count: u32,
        /// A boolean register: the threads where it holds initialize; `None`: every thread.
        pred: Option<Reg>,
    },
    /// Where `pred` holds: one arrival on `bar`, which also raises the bytes its current
    /// phase expects by `bytes` (`mbarrier.arrive.expect_tx`).
    MbarrierArriveExpectTx {
        /// The mbarrier arrived on.
        bar: MBarrier,
        /// The transaction bytes the current phase also waits for (the copies' bytes).
        bytes: u32,
        /// A boolean register: the threads where it holds arrive; `None`: every thread.
        pred: Option<Reg>,
    },
    /// Waits until the phase of `bar` with parity `parity` (an i32 register, 0 or 1) has
    /// completed (a loop on `mbarrier.try_wait.parity`); the bytes the copies of that phase
    /// delivered are then visible to the thread. Every thread that reads them waits.
    MbarrierWait {
        /// The mbarrier waited on.
        bar: MBarrier,
        /// The parity of the phase waited for: an i32 register, 0 or 1.
        parity: Reg,
    },
    /// Where `pred` holds: one arrival on `bar` (`mbarrier.arrive`), no bytes expected: how
    /// the consumers of a warp-specialized loop hand a stage back to the producer.
    MbarrierArrive {
        /// The mbarrier arrived on.
        bar: MBarrier,
        /// A boolean register: the threads where it holds arrive; `None`: every thread.
        pred: Option<Reg>,
    },
    /// Warp specialization: the program's first `num_warps` warps run `consumer`, its
    /// `producer_warps` (a warpgroup after them, [`ThreadKernel::producer_warps`]) run
    /// `producer`. The two sides run at once and meet only through mbarriers, so neither
    /// contains a [`Stmt::Barrier`] (which waits for every thread of the program); the
    /// consumers wait for each other with [`Stmt::NamedBarrier`]. It is the last statement
    /// of the kernel's body (in a persistent kernel each side walks the tiles itself), so a
    /// side that is done has nothing left to run.
    Specialized {
        /// What the producer warpgroup ([`ThreadKernel::producer_warps`] warps after the
        /// consumers) runs.
        producer: Vec<Stmt>,
        /// What the first `num_warps` warps run.
        consumer: Vec<Stmt>,
    },
    /// A barrier of the first `threads` threads of the program (a multiple of the warp
    /// size), numbered `id` (1 to 15; 0 is [`Stmt::Barrier`]'s): PTX's `bar.sync id,
    /// threads`. What [`Stmt::Barrier`] is to the consumers of a [`Stmt::Specialized`].
    NamedBarrier {
        /// The barrier's number, 1 to 15.
        id: u32,
        /// The threads that meet there: a positive multiple of the warp size, at most the
        /// program's threads.
        threads: u32,
    },
    /// One step of consumer warpgroups taking turns at the tensor cores (FlashAttention-3's
    /// ping-pong): named barrier `id` (an i32 register, 2 to 15: the warpgroup's own or the
    /// next one's), `threads` threads taking part, where `pred` holds (the same in each
    /// warp). `wait`: PTX's `bar.sync` (wait for this warpgroup's turn); otherwise
    /// `bar.arrive` (hand the turn on without waiting). They order the issue of matrix
    /// products only; nothing relies on them to order memory (the simulator, which runs the
    /// consumers in lockstep, takes them as no-ops).
    Turn {
        /// The named barrier's number: an i32 register, 2 to 15.
        id: Reg,
        /// The threads taking part: a positive multiple of the warp size, at most the
        /// program's threads.
        threads: u32,
        /// `bar.sync` (wait for the turn) where true, `bar.arrive` (hand it on) where false.
        wait: bool,
        /// A boolean register, the same in each warp: the warps where it holds take part;
        /// `None`: every warp that runs the statement.
        pred: Option<Reg>,
    },
    /// Where `pred` holds: writes `value` to element `index` of shared buffer `alloc` of the
    /// program of this program's cluster ranked `rank` (0 to [`ThreadKernel::cluster`]` - 1`,
    /// an i32 register): PTX's `mapa.shared::cluster` and `st.shared::cluster`. A
    /// [`Stmt::ClusterBarrier`] or [`Stmt::ClusterWait`] must come first (so that the
    /// receiver has started), and the receiver reads it after the next one. Since another program may write the
    /// buffer at any time before that barrier, its bytes are its own for the whole kernel.
    ClusterStore {
        /// The shared buffer written in the other program: an index into
        /// [`ThreadKernel::shared`].
        alloc: u32,
        /// The element index (not bytes) written: a 32- or 64-bit integer register.
        index: Reg,
        /// The receiving program's rank in the cluster, `0..cluster`: an i32 register.
        rank: Reg,
        /// The value written, of the buffer's element type.
        value: Reg,
        /// A boolean register: where it is false the thread stores nothing; `None`: always.
        pred: Option<Reg>,
    },
    /// Waits until every thread of every program of the cluster has arrived; shared-memory
    /// writes made before it, [`Stmt::ClusterStore`]s to other programs included, are seen
    /// after it: PTX's `barrier.cluster.arrive.release` and `barrier.cluster.wait.acquire`.
    ClusterBarrier,
    /// The first half of a [`Stmt::ClusterBarrier`] split in two: this thread has arrived
    /// (its shared-memory writes before it released); it goes on at once. Every thread
    /// runs one [`Stmt::ClusterWait`] after it before it arrives again or ends. Between the
    /// two halves the thread stores into no other program (those stores would not be
    /// ordered by this barrier), and the pair is no barrier of the program: the other
    /// threads of the program may be anywhere between their own arrive and wait.
    ClusterArrive,
    /// The second half of a split [`Stmt::ClusterBarrier`]: waits until every thread of
    /// every program of the cluster has run its [`Stmt::ClusterArrive`], and acquires what
    /// they released there. A program that arrives at its start and waits just before its
    /// first store into another program learns that every program has started without
    /// stopping for it (the others arrived long before).
    ClusterWait,
    /// The warpgroup's threads ask for `count` registers each (a multiple of 8, 24 to 256)
    /// from now on, PTX's `setmaxnreg.{inc,dec}.sync.aligned.u32`: a producer warpgroup
    /// gives registers up (`increase` false) for the consumers to take. Every thread of a
    /// warpgroup runs it together; a hint to the register allocator elsewhere.
    SetMaxRegisters {
        /// The registers per thread from now on: a multiple of 8, 24 to 256.
        count: u32,
        /// Whether the warpgroup takes registers (`.inc`) rather than gives them up (`.dec`).
        increase: bool,
    },
    /// Where `pred` holds: ends `bar`'s life as an mbarrier (`mbarrier.inval`), so that its
    /// bytes may hold other data; no copy may still be counting on it.
    MbarrierInval {
        /// The mbarrier invalidated.
        bar: MBarrier,
        /// A boolean register: the threads where it holds invalidate; `None`: every thread.
        pred: Option<Reg>,
    },
    /// Where `pred` holds: starts a copy of the box of tensor map `map` (an index into
    /// [`ThreadKernel::tensor_maps`]) whose first element is `(coords[0], coords[1])` at
    /// index `coords[2..]` of the map's outer dimensions (i32 registers, one per dimension
    /// of the map; elements outside the map read as zeros) into shared buffer `alloc` from
    /// element `dst` (on a multiple of 8 times the map's swizzle bytes, where the swizzle
    /// pattern of address bits repeats), laid out and swizzled as [`TensorMap`] says:
    /// PTX's `cp.async.bulk.tensor.{2-5}d` with `mbarrier::complete_tx::bytes`. Its bytes (the
    /// whole box) count towards `bar`'s current phase; the data is in shared memory once an
    /// [`Stmt::MbarrierWait`] on that phase returns, and not before. `coords[0]` times the
    /// element size must be a multiple of 16 (the hardware starts a box's rows on 16-byte
    /// boundaries and faults otherwise); the lowering proves it (`lower/tma_box.rs`).
    TmaLoad {
        /// The tensor map read through: an index into [`ThreadKernel::tensor_maps`].
        map: u32,
        /// The shared buffer written: an index into [`ThreadKernel::shared`], of the map's
        /// element type, starting on a 1024-byte boundary.
        alloc: u32,
        /// The element index (not bytes) in `alloc` where the box starts: an i32 register.
        dst: Reg,
        /// The box's first element in the view: `x`, `y`, then an index into each outer
        /// dimension; i32 registers, [`TensorMap::rank`] of them.
        coords: Vec<Reg>,
        /// The mbarrier whose current phase counts the box's bytes.
        bar: MBarrier,
        /// A boolean register: the threads where it holds start a copy; `None`: every thread.
        pred: Option<Reg>,
    },
    /// Where `pred` holds: starts a copy of a box of shared buffer `alloc`, from element `src`
    /// (laid out and swizzled as [`TensorMap`] says, as [`Stmt::TmaLoad`] leaves a box), to
    /// the box of tensor map `map` whose first element is at `coords` (`x`, `y`, then an
    /// index into each of the map's outer dimensions, as [`Stmt::TmaLoad`]'s); elements
    /// outside the map are not written. PTX's `cp.async.bulk.tensor.Nd.global.shared::cta`
    /// with `bulk_group` completion: the copy joins the thread's next [`Stmt::BulkCommit`]
    /// group, reads shared memory until a [`Stmt::BulkWaitRead`] covers that group, and
    /// sees only the writes made visible to the asynchronous proxy
    /// ([`Stmt::FenceProxyAsync`], then a barrier). `coords[0]` times the element size must
    /// be a multiple of 16, as for [`Stmt::TmaLoad`].
    TmaStore {
        /// The tensor map written through: an index into [`ThreadKernel::tensor_maps`].
        map: u32,
        /// The shared buffer read: an index into [`ThreadKernel::shared`], of the map's
        /// element type, starting on a 1024-byte boundary.
        alloc: u32,
        /// The element index (not bytes) in `alloc` where the box starts: an i32 register.
        src: Reg,
        /// The box's first element in the view, as [`Stmt::TmaLoad`]'s `coords`.
        coords: Vec<Reg>,
        /// A boolean register: the threads where it holds start a store; `None`: every
        /// thread.
        pred: Option<Reg>,
    },
    /// Where `pred` holds: closes the thread's [`Stmt::TmaStore`]s since the last commit into
    /// a group (`cp.async.bulk.commit_group`).
    BulkCommit {
        /// A boolean register: the threads where it holds commit; `None`: every thread.
        pred: Option<Reg>,
    },
    /// Where `pred` holds: waits until every committed group of the thread's
    /// [`Stmt::TmaStore`]s has read its source, so that buffer `alloc` may be written again
    /// (`cp.async.bulk.wait_group.read 0`). The global writes may still be in flight; they
    /// are complete when the program ends.
    BulkWaitRead {
        /// The shared buffer the stores read (an index into [`ThreadKernel::shared`]), which
        /// counts as in use here; the wait itself covers every group of the thread.
        alloc: u32,
        /// A boolean register: the threads where it holds wait; `None`: every thread.
        pred: Option<Reg>,
    },
    /// Warpgroup matrix multiply-add, PTX's `wgmma.mma_async.sync.aligned.m64nNk16.f32`
    /// with B in shared memory and A there or in registers ([`WgmmaA`]): `acc += a b` for a 64x16 `a`, a 16xN `b` (N =
    /// `n`, a multiple of 8 up to 256) and a 64xN f32 `acc`, per warpgroup (4 consecutive
    /// warps, every thread taking part). Warp `w` of the warpgroup holds rows `16w..16w+15`;
    /// lane `l` holds `acc[4j + 2h + e]` = row `16w + 8h + l / 4`, column `8j + 2 (l % 4) + e`:
    /// `mma.sync`'s m16n8 accumulator fragment, repeated along N.
    ///
    /// It is asynchronous: it starts when issued, after the warpgroup's
    /// [`Stmt::WgmmaFence`], joins the next [`Stmt::WgmmaCommit`] group, and its `acc` may be
    /// read or written again only after a [`Stmt::WgmmaWait`] that covers that group. The
    /// products of the 16-bit inputs are exact and the sums f32, in an order the hardware
    /// picks. Where `accumulate` is false it writes `acc = a * b` (the instruction's
    /// `scale-d` off): what `acc` held is not read, so it need not be set.
    Wgmma {
        /// This thread's part of the 64xN accumulator: `n / 2` f32 registers.
        acc: Vec<Reg>,
        /// The 64x16 A operand, f16 or bf16.
        a: WgmmaA,
        /// The 16xN B operand in shared memory, of A's element type.
        b: SmemMatrix,
        /// N: a multiple of 8, 8 to 256.
        n: u32,
        /// Whether `acc` is added to (`acc += a b`) rather than overwritten (`acc = a b`).
        accumulate: bool,
    },
    /// Orders the warpgroup's earlier register accesses before the wgmmas that follow
    /// (`wgmma.fence.sync.aligned`).
    WgmmaFence,
    /// Closes the group of the warpgroup's wgmmas issued since the last commit.
    WgmmaCommit,
    /// Waits until at most `pending` of the warpgroup's committed wgmma groups are still
    /// running, the newest ones; the others' accumulators are then written.
    WgmmaWait {
        /// How many of the newest committed groups may still be running.
        pending: u32,
    },
    /// Loads cooperative matrix `dst` from shared buffer `alloc` (whose elements are the
    /// matrix's): element `(r, c)` is at `index + r * stride + c` when `row_major`, at
    /// `index + c * stride + r` otherwise. `index` is uniform within the warp; every lane
    /// takes part (SPIR-V's `OpCooperativeMatrixLoadKHR`). `index` and `stride` are
    /// multiples of 16 bytes' worth of elements (Vulkan requires that alignment of a row's).
    /// A load may take stride 0, which repeats one row (or column): column-major, element
    /// `(r, c)` is then `index + r`, a vector broadcast along the rows.
    CoopLoad {
        /// The cooperative matrix loaded.
        dst: CoopReg,
        /// The shared buffer read: an index into [`ThreadKernel::shared`], of the matrix's
        /// element type.
        alloc: u32,
        /// The element index (not bytes) of element `(0, 0)`: a 32- or 64-bit integer
        /// register, uniform within the warp.
        index: Reg,
        /// Elements (not bytes) from one row (`row_major`) or column to the next: at least a
        /// row's (column's) length, or 0 for a broadcast.
        stride: u32,
        /// Whether rows (rather than columns) are contiguous in the buffer.
        row_major: bool,
    },
    /// Stores cooperative matrix `src` to shared buffer `alloc`, addressed as
    /// [`Stmt::CoopLoad`] (`OpCooperativeMatrixStoreKHR`).
    CoopStore {
        /// The cooperative matrix stored.
        src: CoopReg,
        /// The shared buffer written: an index into [`ThreadKernel::shared`], of the
        /// matrix's element type.
        alloc: u32,
        /// The element index (not bytes) of element `(0, 0)`, as [`Stmt::CoopLoad`]'s.
        index: Reg,
        /// Elements (not bytes) from one row or column to the next: at least a row's
        /// (column's) length (never 0).
        stride: u32,
        /// Whether rows (rather than columns) are contiguous in the buffer.
        row_major: bool,
    },
    /// `d = a b + c` on cooperative matrices of roles A, B and accumulator
    /// (`OpCooperativeMatrixMulAddKHR`); `d` may be `c`. The products of 16-bit inputs are
    /// exact and the sums f32, in an order the device picks (the simulator: `k` ascending,
    /// as the interpreter's `dot`).
    CoopMulAdd {
        /// The result: an accumulator of `c`'s shape and type.
        d: CoopReg,
        /// The left operand, of role A, `rows x k`.
        a: CoopReg,
        /// The right operand, of role B, `k x cols`, of `a`'s element type.
        b: CoopReg,
        /// The addend: an accumulator, `rows x cols`.
        c: CoopReg,
    },
    /// `d = a * b` element by element, on accumulator matrices of one shape and type (an
    /// f32 product per element, `OpFMul` on cooperative matrices); `d` may be `a` or `b`.
    /// With `b` loaded at stride 0 column-major from a vector (each row one value) it
    /// scales the rows of `a`, which is how a block's accumulator is rescaled in place.
    CoopMul {
        /// The product.
        d: CoopReg,
        /// The left factor.
        a: CoopReg,
        /// The right factor.
        b: CoopReg,
    },
    /// Sets cooperative matrix `dst` to zeros.
    CoopZero {
        /// The cooperative matrix cleared.
        dst: CoopReg,
    },
    /// Waits for every thread of the program; orders shared-memory accesses around it.
    Barrier,
    /// `if cond { then_body } else { else_body }`, uniform across the program's threads.
    If {
        /// A boolean register, the same in every thread of the program.
        cond: Reg,
        /// What runs where `cond` holds.
        then_body: Vec<Stmt>,
        /// What runs where it does not (often empty).
        else_body: Vec<Stmt>,
    },
    /// `device_print`: where `pred` holds, prints one line,
    /// `pid (x, y, z) idx (c0, c1) prefix: v0, v1`, with the thread's program ids, the
    /// element's coordinates `coords` (i32) and the values `values` (numbers). On CUDA
    /// through `vprintf`; backends that cannot print leave it out. The program ids are the
    /// launched program's, or `program` (i32 registers) where a persistent kernel's tile
    /// stands for it.
    Print {
        /// The text before the values (the block op's prefix).
        prefix: String,
        /// The element's coordinates in the block value: i32 registers.
        coords: Vec<Reg>,
        /// The values printed, one register each, of any type.
        values: Vec<Reg>,
        /// A boolean register: where it is false the thread prints nothing; `None`: always.
        pred: Option<Reg>,
        /// The program ids printed, as i32 registers, in place of the launched program's.
        program: Option<[Reg; 3]>,
    },
    /// `loop { cond_body; if !cond { break } body }`.
    While {
        /// What runs before each test of `cond` (and computes it).
        cond_body: Vec<Stmt>,
        /// A boolean register, the same in every thread of the program: the loop ends where
        /// it is false.
        cond: Reg,
        /// What runs in each iteration after the test.
        body: Vec<Stmt>,
    },
    /// Text for the reader of the generated code (names the block op a stretch came from).
    Comment(String),
}

/// A per-thread kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadKernel {
    /// The kernel's name (the block kernel's): the PTX entry's, and the SPIR-V entry
    /// point's once characters WGSL does not take are replaced.
    pub name: String,
    /// The parameters, in order (the block kernel's, then any the lowering adds); the
    /// `param` fields of statements and [`Expr::Param`] index them.
    pub params: Vec<ThreadParam>,
    /// Every register of the kernel and its type, indexed by [`Reg`].
    pub regs: Arena<RegData>,
    /// The shared buffers of a program; the `alloc` fields of statements index them.
    pub shared: Vec<SharedAlloc>,
    /// The cooperative matrices the statements name (see [`CoopMatrix`]).
    pub coop: Vec<CoopMatrix>,
    /// The tensor maps [`Stmt::TmaLoad`] reads through, passed after `params`.
    pub tensor_maps: Vec<TensorMap>,
    /// Threads per thread block: `(num_warps + producer_warps) * warp_size`, laid out along
    /// x; `num_warps` counts the consumer warps of every program of a block
    /// ([`BlockPrograms`]).
    pub num_warps: u32,
    /// Threads per warp (subgroup): a power of two; 32 for PTX, the device's fixed
    /// subgroup size for SPIR-V.
    pub warp_size: u32,
    /// Which shared buffers not in use at once share bytes (`shared_offsets`): any where the
    /// backend lays shared memory out as one block at those offsets (PTX), those of one
    /// element type where it declares an array per type (SPIR-V).
    pub reuse_shared: crate::target::SharedReuse,
    /// Shared buffers of the types a SPIR-V backend holds in words
    /// ([`ScalarType::held_in_words`]) take 4 bytes an element, as its workgroup arrays
    /// hold them ([`crate::target::Target::narrow_shared_in_words`]): what
    /// [`ThreadKernel::shared_bytes`] counts.
    pub narrow_shared_in_words: bool,
    /// Where the kernel walks several tiles per program (a persistent grid), how.
    pub persistent: Option<PersistentGrid>,
    /// Programs per thread-block cluster, consecutive along grid axis 0 (1: no cluster): the
    /// programs [`Stmt::ClusterStore`] and the cluster barriers ([`Stmt::ClusterBarrier`],
    /// [`Stmt::ClusterArrive`], [`Stmt::ClusterWait`]) reach. The launch must
    /// group them so (PTX's `.reqnctapercluster`).
    pub cluster: u32,
    /// Warps after the `num_warps` that run the producer side of a
    /// [`Stmt::Specialized`] (a warpgroup: 4), or 0.
    pub producer_warps: u32,
    /// Where a thread block runs several programs sharing one producer, how many (see
    /// [`BlockPrograms`]).
    pub block_programs: Option<BlockPrograms>,
    /// What the block kernel's `dot`s run on, as lowered (`None`: it has none, or the kernel
    /// was not lowered from one).
    pub dots: Option<DotPath>,
    /// The statements every thread runs, in order.
    pub body: Vec<Stmt>,
}

/// Shared buffers as arrays of one element type ([`ThreadKernel::shared_arrays`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SharedArrays {
    /// Each array's element type and length.
    pub arrays: Vec<(ScalarType, u32)>,
    /// Per shared buffer, its array and the index there of its first element.
    pub of_buffer: Vec<(usize, u32)>,
}

/// The instructions a kernel's `dot`s run on: what a user tuning a kernel wants to know
/// before reading its timings, since a block too large for the matrix units' staging in
/// shared memory runs on the FMA path instead (`lower::lower` falls back rather than fail).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DotPath {
    /// Warp-level MMAs (`mma.sync`).
    Mma,
    /// Warpgroup MMAs (`wgmma`).
    Wgmma,
    /// Cooperative matrices (`VK_KHR_cooperative_matrix`).
    CooperativeMatrix,
    /// Per-thread fused multiply-adds; `why` says why not the target's matrix units where
    /// it has some.
    Fma {
        /// Why the target's matrix units were not used (`None`: it has none).
        why: Option<String>,
    },
}

impl std::fmt::Display for DotPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DotPath::Mma => f.write_str("dots on mma.sync"),
            DotPath::Wgmma => f.write_str("dots on wgmma"),
            DotPath::CooperativeMatrix => f.write_str("dots on cooperative matrices"),
            DotPath::Fma { why: None } => f.write_str("dots on FMA"),
            DotPath::Fma { why: Some(why) } => write!(f, "dots on FMA ({why})"),
        }
    }
}

/// Several programs a thread block (`lower::block_programs`): the launch runs
/// `ceil(grid[0] / programs)` blocks along x ([`ThreadKernel::blocks`]), each of `programs`
/// groups of `num_warps / programs` consumer warps (one program each: `program_id(0)` =
/// `block * programs + group`) and the producer warpgroup of the [`Stmt::Specialized`]
/// they share; the program grid's x comes in the i32 scalar parameter `grid_x_param`
/// (after the kernel's own), and the programs past it store nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockPrograms {
    /// Programs per thread block: at least 2, dividing `num_warps`.
    pub programs: u32,
    /// The i32 scalar parameter holding the program grid's x: an index into
    /// [`ThreadKernel::params`].
    pub grid_x_param: u32,
}

impl BlockPrograms {
    /// The thread blocks a launch of program grid `grid` runs.
    pub fn blocks(&self, grid: [u32; 3]) -> [u32; 3] {
        [grid[0].div_ceil(self.programs.max(1)), grid[1], grid[2]]
    }
}

/// How a persistent kernel walks its tiles: the logical grid comes in three `i32` scalar
/// parameters (after the kernel's own), the launch runs as many programs as the device
/// holds at once (`Special::ProgramId(0)` and `Special::NumPrograms(0)` are then the
/// launched ones), and the body's last statement, a `While`, runs one tile per iteration,
/// ending each with a barrier; or, in a warp-specialized kernel, the last statement is the
/// [`Stmt::Specialized`] whose sides each end with such a loop (without the barrier). The
/// statements before it run once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PersistentGrid {
    /// The parameters holding the logical grid's size along x, y and z.
    pub grid_params: [u32; 3],
}

impl Stmt {
    /// Calls `f` on each shared buffer this statement names (not those of the statements
    /// nested in it): its memory, a `wgmma`'s operands, a TMA copy's buffer and mbarrier.
    pub fn shared_buffers(&self, f: &mut impl FnMut(u32)) {
        match self {
            Stmt::Load {
                mem: Memory::Shared { alloc },
                ..
            }
            | Stmt::Store {
                mem: Memory::Shared { alloc },
                ..
            }
            | Stmt::LdMatrix { alloc, .. }
            | Stmt::AsyncCopy { alloc, .. }
            | Stmt::ClusterStore { alloc, .. }
            | Stmt::TmaStore { alloc, .. }
            | Stmt::BulkWaitRead { alloc, .. }
            | Stmt::CoopLoad { alloc, .. }
            | Stmt::CoopStore { alloc, .. } => f(*alloc),
            Stmt::TmaLoad { alloc, bar, .. } => {
                f(*alloc);
                f(bar.alloc);
            }
            Stmt::MbarrierInit { bar, .. }
            | Stmt::MbarrierArriveExpectTx { bar, .. }
            | Stmt::MbarrierWait { bar, .. }
            | Stmt::MbarrierArrive { bar, .. }
            | Stmt::MbarrierInval { bar, .. } => f(bar.alloc),
            Stmt::Wgmma { a, b, .. } => {
                if let WgmmaA::Shared(m) = a {
                    f(m.alloc);
                }
                f(b.alloc);
            }
            _ => {}
        }
    }
}

impl ThreadKernel {
    /// The thread blocks a launch of program grid `grid` runs: `grid` itself, except where a
    /// block runs several programs ([`BlockPrograms`]).
    pub fn blocks(&self, grid: [u32; 3]) -> [u32; 3] {
        self.block_programs.map_or(grid, |b| b.blocks(grid))
    }
    /// Threads of one thread block (one program, or several: [`BlockPrograms`]), saturating
    /// at `u32::MAX` ([`verify`] allows at most [`MAX_THREADS`]).
    pub fn threads(&self) -> u32 {
        self.num_warps
            .saturating_add(self.producer_warps)
            .saturating_mul(self.warp_size)
    }
    /// Bytes of shared memory the kernel uses, saturating at `u32::MAX` ([`verify`] rejects
    /// kernels whose shared memory does not fit a `u32`).
    ///
    /// The buffers are laid out as [`ThreadKernel::shared_offsets`] says; where one needs a
    /// boundary coarser than the 16 bytes a launch's dynamic shared memory is sure to start
    /// on, the backend rounds the start up at run time and this includes the slack.
    ///
    /// Where the backend holds narrow types in words ([`ThreadKernel::narrow_shared_in_words`],
    /// whose buffers are one array per type: [`ThreadKernel::shared_arrays`]), the arrays'
    /// bytes with those types in words.
    pub fn shared_bytes(&self) -> u32 {
        if self.narrow_shared_in_words && self.shared.iter().any(|a| a.elem.held_in_words()) {
            return self
                .shared_arrays()
                .arrays
                .iter()
                .map(|&(elem, len)| {
                    let size = if elem.held_in_words() {
                        4
                    } else {
                        elem.size_bytes() as u32
                    };
                    len.saturating_mul(size).div_ceil(16).saturating_mul(16)
                })
                .fold(0u32, u32::saturating_add);
        }
        let end = self
            .shared
            .iter()
            .zip(self.shared_offsets())
            .map(|(a, o)| o.saturating_add(a.bytes()))
            .max()
            .unwrap_or(0);
        let slack = self.shared_align().saturating_sub(16);
        end.div_ceil(16).saturating_mul(16).saturating_add(slack)
    }
    /// The byte offset of each shared buffer from the (aligned) start of shared memory,
    /// each on its own `align` boundary; buffers never in use between the same two
    /// barriers may share bytes (see `shared.rs`).
    pub fn shared_offsets(&self) -> Vec<u32> {
        shared::offsets(self, self.reuse_shared)
    }
    /// How a backend whose shared buffers cannot alias across types (SPIR-V's workgroup
    /// variables) declares them: arrays, as element type and length, and per buffer its
    /// array and first element there. Under [`SharedReuse::SameType`] one array per element
    /// type, in which its buffers lie at [`ThreadKernel::shared_offsets`] (counted from the
    /// array's start); otherwise one array per buffer.
    ///
    /// [`SharedReuse::SameType`]: crate::target::SharedReuse::SameType
    pub fn shared_arrays(&self) -> SharedArrays {
        let mut out = SharedArrays::default();
        if self.reuse_shared != crate::target::SharedReuse::SameType {
            for (i, a) in self.shared.iter().enumerate() {
                out.arrays.push((a.elem, a.len));
                out.of_buffer.push((i, 0));
            }
            return out;
        }
        let p = shared::placement(self, crate::target::SharedReuse::SameType);
        out.arrays = p
            .arrays
            .iter()
            .map(|&(elem, bytes, _)| (elem, bytes / elem.size_bytes() as u32))
            .collect();
        out.of_buffer = self
            .shared
            .iter()
            .zip(p.array.iter().zip(&p.at))
            .map(|(a, (&array, &at))| (array, at / a.elem.size_bytes() as u32))
            .collect();
        out
    }
    /// The coarsest boundary a shared buffer needs (16 when there is none).
    pub fn shared_align(&self) -> u32 {
        self.shared.iter().map(|a| a.align).max().unwrap_or(16).max(16)
    }
    /// The type of register `r`, which must be one of this kernel's `regs`.
    pub fn reg_type(&self, r: Reg) -> ScalarType {
        self.regs[r].ty
    }
    /// Calls `f` on every statement, depth first, in order.
    pub fn walk(&self, f: &mut impl FnMut(&Stmt)) {
        walk_stmts(&self.body, f)
    }
    /// Calls `f` on every statement, depth first, in order, to change it (how tests make a
    /// kernel wrong on purpose, to see that the simulator notices).
    pub fn walk_mut(&mut self, f: &mut impl FnMut(&mut Stmt)) {
        walk_mut(&mut self.body, f)
    }
}

fn walk_mut(stmts: &mut [Stmt], f: &mut impl FnMut(&mut Stmt)) {
    for s in stmts {
        f(s);
        match s {
            Stmt::If {
                then_body, else_body, ..
            } => {
                walk_mut(then_body, f);
                walk_mut(else_body, f);
            }
            Stmt::While { cond_body, body, .. } => {
                walk_mut(cond_body, f);
                walk_mut(body, f);
            }
            Stmt::Specialized { producer, consumer } => {
                walk_mut(producer, f);
                walk_mut(consumer, f);
            }
            _ => {}
        }
    }
}

/// Calls `f` on `stmts` and on every statement list nested in them (an `If`'s branches, a
/// `While`'s condition and body, a `Specialized`'s sides), outermost first: for analyses
/// that look at neighbouring statements.
pub fn walk_lists(stmts: &[Stmt], f: &mut impl FnMut(&[Stmt])) {
    f(stmts);
    for s in stmts {
        match s {
            Stmt::If {
                then_body, else_body, ..
            } => {
                walk_lists(then_body, f);
                walk_lists(else_body, f);
            }
            Stmt::While { cond_body, body, .. } => {
                walk_lists(cond_body, f);
                walk_lists(body, f);
            }
            Stmt::Specialized { producer, consumer } => {
                walk_lists(producer, f);
                walk_lists(consumer, f);
            }
            _ => {}
        }
    }
}

/// [`walk_stmts`], with each statement mutable.
pub fn walk_stmts_mut(stmts: &mut [Stmt], f: &mut impl FnMut(&mut Stmt)) {
    walk_mut(stmts, f)
}

/// Calls `f` on each of `stmts` and every statement nested in them, in program order (as
/// [`ThreadKernel::walk`] on a part of a kernel's body).
pub fn walk_stmts(stmts: &[Stmt], f: &mut impl FnMut(&Stmt)) {
    for s in stmts {
        f(s);
        match s {
            Stmt::If {
                then_body, else_body, ..
            } => {
                walk_stmts(then_body, f);
                walk_stmts(else_body, f);
            }
            Stmt::While { cond_body, body, .. } => {
                walk_stmts(cond_body, f);
                walk_stmts(body, f);
            }
            Stmt::Specialized { producer, consumer } => {
                walk_stmts(producer, f);
                walk_stmts(consumer, f);
            }
            _ => {}
        }
    }
}

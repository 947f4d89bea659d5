//! Software pipelining of the loads that feed `dot` on the tensor cores, as Triton's
//! pipeliner: in a `for` loop, a load whose only use is as an operand of such a `dot`
//! becomes asynchronous copies (`cp.async`) straight into a ring of `num_stages` swizzled
//! shared-memory tiles, `A = num_stages - 1` iterations ahead of the `dot` that reads them
//! (`A = num_stages - 2` when that `dot` runs on warpgroup MMAs left in flight across the
//! back edge: the buffer being refilled was then read two iterations back).
//!
//! ```text
//! before the loop:  for s in 0..A: copies of iteration s into stage s; commit
//! iteration i:      wait until iteration i's group is complete
//!                   (fence.proxy.async where a wgmma reads the copies); barrier
//!                   copies of iteration i+A into stage (i+A) % S; commit
//!                   the body, its `dot` reading stage i % S (`ldmatrix`, or wgmma
//!                   descriptors; then wgmma.wait_group 1 in flight, else 0)
//! after the loop:   wait for all groups (and the last wgmmas); barrier, after which the
//!                   ring's shared memory may be reused
//! ```
//!
//! The copies of a later iteration need its pointers and masks: the instructions of the body
//! that compute them (the load's *slice*: index arithmetic, pointer increments) are lowered
//! a second time with the loop variable `S-1` steps ahead and with copies of the loop-carried
//! values they read, which the ahead slice advances itself (so those carried values must be
//! computed from the slice alone: `a_ptrs += BLOCK_K * stride_ak` is). Copies of iterations
//! past the end, and masked-off elements, read nothing and fill zeros: `cp.async`'s
//! zero-fill form, which equals the masked load when its `other` is 0.
//!
//! On a target without asynchronous copies whose `dot`s run on cooperative matrices
//! (Vulkan), the same pipeline runs through registers, with two stages in shared memory (one
//! where two do not fit, below) and `A = num_stages - 1` sets of prefetch registers (at most
//! 2): the loads of iteration `i + A` go into set `i % A` during iteration `i`, before its
//! `dot`, so that their latency hides behind `A` iterations of multiply-adds, and iteration
//! `i` begins by storing set `i % A` into its stage (zeros where masked, as the copies' zero
//! fill), then one barrier:
//!
//! ```text
//! before the loop:  loads of iterations 0..A into sets 0..A
//! iteration i:      store set i % A into stage i % 2; barrier
//!                   loads of iteration i+A into set i % A
//!                   the body, its `dot` reading stage i % 2
//! ```
//!
//! The loads into prefetch registers are predicated by their masks and by the iteration
//! being before the end. Where the masks say when they hold in every element
//! (`mask_bound.rs`), the loop runs the trips whose prefetches all hold first, in a loop of
//! their own whose loads are unpredicated
//! ([`Lowerer::prefetch_holds`](super::Lowerer::prefetch_holds), `control.rs`), and the
//! other trips issue theirs behind one branch on the same condition: NVIDIA's Vulkan
//! driver keeps a branch or predicate per masked load, and the tutorial's matmul ran 10.6%
//! faster at 4096³ (H200) with its unmasked trips on their own.
//!
//! Where two stages do not fit shared memory beside the accumulator's exchange (128 x 256 x
//! 32 in Vulkan's 48 KiB) but one does, the one stage is refilled between two barriers: each
//! iteration first waits until every warp has read it in the last one, then stores, then
//! waits again. Hand-written first (`benches/matmul-wgsl/handwritten.py`, `hs1k32`), this
//! ran 128 x 256 x 32 at 4096³ in 0.59 ms where per-iteration staging without prefetch took
//! 0.92 (H200, `docs/performance.md`).
//!
//! With `num_stages` 1 (`A = 0`) the loads of iteration `i` go into the one set at its top,
//! right before they are stored: no load is in flight at a barrier. (What that costs against
//! loads ahead tells whether NVIDIA's driver waits at a barrier for loads in flight.)
//!
//! (Stage `i % 2` was last read in iteration `i - 2`, before iteration `i - 1`'s barrier.)
//! Registers cannot be indexed at run time, and a select or copy between sets would wait
//! for the loads in flight in the other, so with two sets the loop body is lowered twice a
//! trip, each copy naming its set, and an odd last iteration runs after the loop
//! (`control.rs`). Measured on an H100 through NVIDIA's driver, two sets made the tutorial's
//! matmul up to 6% faster than one (the chosen block 1.8%), and the driver's compile 2.5
//! times slower (`docs/performance.md`).
//!
//! A loop that asks for it (`for_range_staged`, `Op::For::num_stages`, Triton's
//! `tl.range(..., num_stages=)`) also pipelines, where the target has asynchronous copies,
//! its loads that feed no `dot` ("own copies"): each thread copies the elements it would
//! have loaded into slots of its own in the ring (vector `v` of thread `t` at
//! `(v * threads + t) * width`, so that a warp's slots are consecutive) and, once its own
//! group is complete, reads them back into the load's layout. No thread reads another's
//! slots, so neither the read nor the refill of a stage waits at a barrier: a load in
//! registers would be waited for at the body's first barrier (a barrier orders the memory
//! accesses before it), where a copy in flight is not. The loop's step may then be any
//! value, not only a positive constant (a persistent walk over rows steps by
//! `num_programs`), and `num_stages` there also sets the depth of the `dot` operands'
//! pipeline. A load such a loop makes alike in every iteration (the layer norm's weight
//! and bias, loaded beside each row) is copied once, before the loop, into slots of one
//! stage that every iteration reads back: held in registers across the loop instead, it
//! costs registers, and with them programs a multiprocessor.
//!
//! Since no thread reads another's slots, a loop whose pipelined loads are all own copies
//! refills the stage it has just read (`Target::refill_after_read`, on by default): its
//! copies of iteration `i + A` are lowered at the iteration's top as above but emitted after
//! the first instruction of the body that uses a value read back (`PendingRefill`), which
//! cannot run before the thread's reads of its slots have returned. The ring then holds
//! `A = num_stages - 1` stages, not `num_stages`, with the copies as far ahead: what lets
//! the cluster softmax's walk hold a share of 32768 f32 columns and its next row's copy
//! (128 KB a stage) in one multiprocessor's shared memory, or two programs of 16384.
//!
//! ```text
//! iteration i:      wait until iteration i's group is complete
//!                   the body: its own copies read back from stage i % A; after the first
//!                   use of them, copies of iteration i+A into stage i % A; commit
//! ```
//!
//! A load is pipelined when all of this holds; otherwise it stays a load in registers and the
//! `dot` stages it itself (`mma.rs`, `coop.rs`). Each access must move 4, 8 or 16 bytes
//! (what `cp.async` copies: 2 to 8 16-bit values, 1 to 4 f32 ones of a tf32 `dot`): a
//! ragged K whose mask the analysis cannot prove constant over a vector falls back.
//!
//! The files, in the order of a loop's lowering: `plan.rs` decides the pipeline before the
//! loop (with `dot_operands.rs`, `own_copies.rs`, `slice.rs` and `in_flight.rs`, which say
//! which loads qualify and what they need); `state.rs` sets up its buffers and issues the
//! first copies before the loop, and waits for the last ones after it; `iteration.rs` is
//! the top of each iteration, `copies.rs` the copies of a later one, `ring.rs` the stage
//! counters; `prefetch.rs` is the path through registers, `refill.rs` the refill of the
//! stage just read.

mod copies;
mod dot_operands;
mod in_flight;
mod iteration;
mod own_copies;
mod plan;
mod prefetch;
mod refill;
mod ring;
mod slice;
mod state;

pub(crate) use own_copies::OwnRead;
pub(crate) use plan::{PipelinePlan, PipelinedLoad};
pub(crate) use refill::PendingRefill;
pub(crate) use state::PipelineState;

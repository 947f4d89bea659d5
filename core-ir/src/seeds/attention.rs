//! The forward pass of fused attention (FlashAttention-2), as Triton's fused attention
//! tutorial: each program takes `block_m` queries of one head, walks the keys and values in
//! blocks of `block_n` with an online softmax (running row maximum and sum, in base 2), and
//! never writes the `N_CTX x N_CTX` scores to memory. Causal attention walks the blocks
//! below the diagonal without a mask, then the diagonal ones with it (the tutorial's two
//! stages), or all of them with the mask ([`AttentionMeta::split_diagonal`]); non-causal attention walks all blocks once, the keys past `N_CTX` masked off by
//! a per-key bias (the tutorial takes lengths that are multiples of the blocks only).

use crate::{BuildError, Kernel, KernelBuilder, ScalarType, Value};

/// The meta-parameters of [`attention_forward`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AttentionMeta {
    /// Queries per program (a power of two, at least 16).
    pub block_m: u32,
    /// Keys per iteration (a power of two, at least 16, dividing `block_m` when causal).
    pub block_n: u32,
    /// The head dimension (the tutorial's `HEAD_DIM`: 16 to 256, a power of two).
    pub head_dim: u32,
    /// Each query attends to the keys at or before its own position only.
    pub causal: bool,
    /// Causal attention walks the key blocks below the diagonal apart from those on it,
    /// without a mask (the tutorial's two stages), rather than all with the mask. Each walk
    /// has its own two dots, and each dot its own shared memory: the split needs twice the
    /// shared memory (too much for some devices' smallest blocks at head dimension 128).
    pub split_diagonal: bool,
    /// The element type of Q, K, V and the output: f16, as in the tutorial (the one the
    /// tests cover; `dot` takes bf16 and f32 too).
    pub dtype: ScalarType,
    /// The walk over whole key blocks from the first (all of them but the ragged last one
    /// without `causal`, those below the diagonal with it) rotated by one block, as
    /// FlashAttention-3's intra-warpgroup overlap: step `j` computes `Q K_jᵀ`, then adds
    /// block `j - 1`'s `P V` (its probabilities and rescale carried from step `j - 1`, its
    /// values read one block behind, masked off before the first), then runs block `j`'s
    /// softmax; the last block's `P V` follows the walk. On warpgroup MMAs the `P V` of one
    /// block then runs while the softmax of the next computes (the walk's last `dot` stays
    /// in flight, see the lowering's pipeline). The same results as the tutorial's order.
    pub rotate: bool,
    /// The rotated walk's last values ([`AttentionMeta::rotate`]) loaded before the walk,
    /// not after it: the lowering stages them in shared memory of their own before the loop
    /// (its `hoist`), so that their load's latency overlaps the queries' and the walk's
    /// first copies instead of standing between the walk and its last `P V`, at the cost of
    /// a `block_n x head_dim` buffer live across the walk. Without `rotate` there is no such
    /// load and the builder refuses it.
    pub last_values_ahead: bool,
    /// `N_CTX` is a multiple of `block_n`: non-causal attention walks whole key blocks only,
    /// with no walk for a ragged last block (its pipeline, copies and barriers are set up
    /// even where it has no step). The host code sets it from the problem, as Triton
    /// specializes a kernel on its arguments' divisibility; launched with another `N_CTX`,
    /// the kernel's `device_assert` fails in the bounds-checked mode and the interpreter.
    pub whole_key_blocks: bool,
    /// Causal programs start longest first: the grid's first axis is the heads and its
    /// second the query blocks from the last (whose walks are the longest) to the first
    /// ([`AttentionMeta::grid`]). A GPU starts a grid's programs in order of their linear
    /// index, so the last to start, which set how long the grid's tail lasts, are then the
    /// shortest (FlashAttention-3's longest-processing-time-first order). Without `causal`
    /// every program walks the same keys and the builder refuses it.
    pub longest_first: bool,
    /// With [`AttentionMeta::longest_first`], how many heads are ordered together (0: all of
    /// them). The programs then run a group of heads at a time, longest first within the
    /// group, its heads taking turns (the last group holds what is left), so that the
    /// programs running at once read the keys and values of a few heads, which the L2 cache
    /// can hold, rather than of as many heads as there are programs: without groups, each
    /// program running beside the others reads another head's, from memory. The tutorial's
    /// host code sizes a group to the device's L2 cache.
    pub group_heads: u32,
}

impl AttentionMeta {
    /// The tutorial's fp16 attention with `block_m x block_n` blocks (causal attention in
    /// its two stages).
    pub fn fp16(block_m: u32, block_n: u32, head_dim: u32, causal: bool) -> AttentionMeta {
        AttentionMeta {
            block_m,
            block_n,
            head_dim,
            causal,
            split_diagonal: true,
            dtype: ScalarType::F16,
            rotate: false,
            last_values_ahead: false,
            whole_key_blocks: false,
            longest_first: false,
            group_heads: 0,
        }
    }

    /// The launch's grid for `batch x heads` heads of `n_ctx` positions:
    /// `(cdiv(n_ctx, block_m), batch * heads)`, or with [`AttentionMeta::longest_first`]
    /// `(batch * heads, cdiv(n_ctx, block_m))`.
    pub fn grid(&self, batch: u32, heads: u32, n_ctx: u32) -> [u32; 3] {
        let (blocks, heads) = (n_ctx.div_ceil(self.block_m), batch * heads);
        if self.longest_first {
            [heads, blocks, 1]
        } else {
            [blocks, heads, 1]
        }
    }
}

/// `1 / ln 2`: scores are scaled by it once, so that the softmax runs on `exp2`.
const LOG2_E: f32 = std::f32::consts::LOG2_E;

/// The parameters of [`attention_forward`], in order.
struct Params<'b> {
    q: Value<'b>,
    k: Value<'b>,
    v: Value<'b>,
    sm_scale: Value<'b>,
    m: Value<'b>,
    out: Value<'b>,
    /// `[z, h, m, k]` strides of Q, K, V and Out.
    strides: [[Value<'b>; 4]; 4],
    h: Value<'b>,
    n_ctx: Value<'b>,
}

fn params(k: &KernelBuilder, dtype: ScalarType) -> Params<'_> {
    let q = k.arg_ptr("Q", dtype);
    let kk = k.arg_ptr("K", dtype);
    let v = k.arg_ptr("V", dtype);
    let sm_scale = k.arg_scalar("sm_scale", ScalarType::F32);
    let m = k.arg_ptr("M", ScalarType::F32);
    let out = k.arg_ptr("Out", dtype);
    let stride = |t: &str, axes: [&str; 4]| axes.map(|a| k.arg_i32(&format!("stride_{t}{a}")));
    let strides = [
        stride("q", ["z", "h", "m", "k"]),
        stride("k", ["z", "h", "n", "k"]),
        stride("v", ["z", "h", "k", "n"]),
        stride("o", ["z", "h", "m", "n"]),
    ];
    let _z = k.arg_i32("Z");
    let h = k.arg_i32("H");
    let n_ctx = k.arg_i32("N_CTX");
    Params {
        q,
        k: kk,
        v,
        sm_scale,
        m,
        out,
        strides,
        h,
        n_ctx,
    }
}

/// Which scores one walk over key blocks masks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Whole blocks that every query of the program sees: no mask.
    Full,
    /// Blocks on the diagonal: a query sees the keys at or before it.
    Diagonal,
    /// Any block, possibly past `N_CTX`: the keys before `N_CTX`.
    Ragged,
}

/// What one walk over key blocks needs from the program.
struct Walk<'b> {
    q: Value<'b>,
    k_base: Value<'b>,
    v_base: Value<'b>,
    offs_m: Value<'b>,
    offs_n: Value<'b>,
    offs_d: Value<'b>,
    sk: [Value<'b>; 4],
    sv: [Value<'b>; 4],
    qk_scale: Value<'b>,
    n_ctx: Value<'b>,
    block_n: i32,
    dtype: ScalarType,
}

impl<'b> Walk<'b> {
    /// `_attn_fwd_inner`: the keys and values from `lo` to `hi`, one block at a time,
    /// updating the accumulator, the row sums and the row maxima (`state`, in that order).
    fn inner(
        &self,
        k: &'b KernelBuilder,
        state: [Value<'b>; 3],
        lo: Value<'b>,
        hi: Value<'b>,
        stage: Stage,
    ) -> [Value<'b>; 3] {
        let Walk {
            q,
            k_base,
            v_base,
            offs_m,
            offs_n,
            offs_d,
            sk,
            sv,
            qk_scale,
            n_ctx,
            block_n: bn,
            dtype,
        } = *self;
        let k_ptrs = k_base + offs_d.expand_dims(1) * sk[3] + (lo + offs_n).expand_dims(0) * sk[2];
        let v_ptrs = v_base + (lo + offs_n).expand_dims(1) * sv[2] + offs_d.expand_dims(0) * sv[3];
        let init = [state[0], state[1], state[2], k_ptrs, v_ptrs];
        let out = k.for_range(lo, hi, bn, &init, |start_n, carried| {
            let (acc, l_i, m_i, k_ptrs, v_ptrs) = (carried[0], carried[1], carried[2], carried[3], carried[4]);
            let cols = start_n + offs_n;
            let (kt, v) = if stage == Stage::Full {
                (k.load(k_ptrs), k.load(v_ptrs))
            } else {
                let keys_in = cols.lt(n_ctx);
                (
                    k.load_masked(k_ptrs, keys_in.expand_dims(0), 0.0),
                    k.load_masked(v_ptrs, keys_in.expand_dims(1), 0.0),
                )
            };
            let qk = k.dot(q, kt);
            let (m_ij, qk) = match stage {
                Stage::Full => {
                    let m_ij = m_i.maximum(qk.max(1) * qk_scale);
                    // One fused multiply-add a score, as Triton's compiler contracts
                    // `qk * qk_scale - m_ij[:, None]`.
                    (m_ij, qk.fma(qk_scale, -m_ij.expand_dims(1)))
                }
                Stage::Diagonal => {
                    let seen = offs_m.expand_dims(1).ge(cols.expand_dims(0));
                    // As the tutorial: a large negative score, not -inf, so that no row
                    // computes -inf - -inf (every row sees a key in its first block).
                    let qk = qk.fma(qk_scale, k.where_(seen, 0.0, -1.0e6));
                    let m_ij = m_i.maximum(qk.max(1));
                    (m_ij, qk - m_ij.expand_dims(1))
                }
                Stage::Ragged => {
                    // A bias per key rather than a select per score: one add each.
                    let bias = k.where_(cols.lt(n_ctx), 0.0f32, -1.0e6f32);
                    let qk = qk.fma(qk_scale, bias.expand_dims(0));
                    let m_ij = m_i.maximum(qk.max(1));
                    (m_ij, qk - m_ij.expand_dims(1))
                }
            };
            let p = qk.exp2();
            let l_ij = p.sum(1);
            let alpha = (m_i - m_ij).exp2();
            let l_i = l_i.fma(alpha, l_ij);
            let acc = acc * alpha.expand_dims(1);
            let acc = k.dot_acc(p.to(dtype), v, acc);
            vec![acc, l_i, m_ij, k_ptrs + sk[2] * bn, v_ptrs + sv[2] * bn]
        });
        [out[0], out[1], out[2]]
    }

    /// [`inner`](Self::inner) over whole blocks from `lo` to `hi` (`Stage::Full`), rotated
    /// by one block ([`AttentionMeta::rotate`]).
    /// With `ahead`, the last block's values are loaded before the walk
    /// ([`AttentionMeta::last_values_ahead`]).
    fn rotated(
        &self,
        k: &'b KernelBuilder,
        state: [Value<'b>; 3],
        (lo, hi): (Value<'b>, Value<'b>),
        ahead: bool,
    ) -> [Value<'b>; 3] {
        let Walk {
            q,
            k_base,
            v_base,
            offs_n,
            offs_d,
            sk,
            sv,
            qk_scale,
            block_n: bn,
            dtype,
            ..
        } = *self;
        let [block_m, block_n] = [q.shape()[0], bn as u32];
        // The values of the block before: from `lo - block_n`, the rows before `lo` masked
        // off (zeros, with zero probabilities, the first step adds nothing).
        let prev_rows = lo - bn + offs_n;
        let k_ptrs = k_base + offs_d.expand_dims(1) * sk[3] + (lo + offs_n).expand_dims(0) * sk[2];
        let v_ptrs = v_base + prev_rows.expand_dims(1) * sv[2] + offs_d.expand_dims(0) * sv[3];
        let p0 = k.zeros(&[block_m, block_n], dtype);
        let alpha0 = k.full(&[block_m], 1.0, ScalarType::F32);
        // The last block's values (none where the walk had no step: its rows are then
        // before `lo`, masked off, and `P` zero). Its pointers are computed afresh rather
        // than taken from the walk: a warp-specialized walk's consumers would otherwise
        // carry the walk's V pointers through every step for this one load (registers a
        // program of three a block does not have).
        let last_values = || {
            let last_rows = hi - bn + offs_n;
            let v_last_ptrs = v_base + last_rows.expand_dims(1) * sv[2] + offs_d.expand_dims(0) * sv[3];
            k.load_masked(v_last_ptrs, last_rows.ge(lo).expand_dims(1), 0.0)
        };
        let v_ahead = ahead.then(last_values);
        let init = [state[0], state[1], state[2], k_ptrs, v_ptrs, p0, alpha0];
        let out = k.for_range(lo, hi, bn, &init, |start_n, c| {
            let (acc, l_i, m_i, k_ptrs, v_ptrs, p_prev, alpha_prev) = (c[0], c[1], c[2], c[3], c[4], c[5], c[6]);
            // The accumulator is rescaled before this step's MMAs are issued: between the
            // two (`Q K_j^T` in flight), `ptxas` waits for the scores before it lets the
            // rescale touch registers an MMA last wrote.
            let acc = acc * alpha_prev.expand_dims(1);
            let qk = k.dot(q, k.load(k_ptrs));
            let rows = start_n - bn + offs_n;
            let v_prev = k.load_masked(v_ptrs, rows.ge(lo).expand_dims(1), 0.0);
            let acc = k.dot_acc(p_prev, v_prev, acc);
            let m_ij = m_i.maximum(qk.max(1) * qk_scale);
            let p = qk.fma(qk_scale, -m_ij.expand_dims(1)).exp2();
            let alpha = (m_i - m_ij).exp2();
            let l_i = l_i.fma(alpha, p.sum(1));
            vec![
                acc,
                l_i,
                m_ij,
                k_ptrs + sk[2] * bn,
                v_ptrs + sv[2] * bn,
                p.to(dtype),
                alpha,
            ]
        });
        let v_last = v_ahead.unwrap_or_else(last_values);
        let acc = k.dot_acc(out[5], v_last, out[0] * out[6].expand_dims(1));
        [acc, out[1], out[2]]
    }
}

/// `_attn_fwd`: `Out = softmax(Q K^T sm_scale) V` per head for Q, K, V of shape `[Z, H,
/// N_CTX, HEAD_DIM]` given by strides, with `M = max + log2(sum)` of each query's scores
/// (in base 2, for the backward pass) in `M` (`[Z * H, N_CTX]`, f32). Parameters: `Q, K,
/// V` (`dtype`), `sm_scale` (f32), `M` (f32), `Out` (`dtype`), the strides of Q (`z, h, m,
/// k`), K (`z, h, n, k`), V (`z, h, k, n`) and Out (`z, h, m, n`), `Z, H, N_CTX` (i32).
/// Grid: [`AttentionMeta::grid`].
#[track_caller]
pub fn attention_forward(meta: &AttentionMeta) -> Result<Kernel, BuildError> {
    // (The caller's location taken here: a closure does not inherit `#[track_caller]`.)
    let loc = crate::ir::SourceLoc::caller();
    let refused = |message: String| BuildError {
        kernel: "_attn_fwd".into(),
        diagnostics: vec![crate::error::Diagnostic {
            op: "attention_forward".into(),
            loc,
            message,
        }],
    };
    if meta.causal && meta.split_diagonal && (meta.block_n == 0 || meta.block_m % meta.block_n != 0) {
        return Err(refused(format!(
            "causal attention walks the diagonal apart in whole key blocks: block_n must divide block_m, got block_m \
             {} and block_n {}",
            meta.block_m, meta.block_n
        )));
    }
    if meta.longest_first && !meta.causal {
        return Err(refused(
            "longest_first orders causal programs by the length of their walks: without causal every program walks \
             the same keys"
                .into(),
        ));
    }
    if meta.last_values_ahead && !meta.rotate {
        return Err(refused(
            "last_values_ahead loads the rotated walk's last values before it: without rotate the walk has no such load"
                .into(),
        ));
    }
    if meta.group_heads > 0 && !meta.longest_first {
        return Err(refused(format!(
            "group_heads orders the programs of longest_first by groups of heads: without longest_first the programs \
             keep the tutorial's order, got group_heads {}",
            meta.group_heads
        )));
    }
    Kernel::build("_attn_fwd", |k| program(k, meta))
}

/// The body of [`attention_forward`].
fn program<'b>(k: &'b KernelBuilder, meta: &AttentionMeta) {
    let AttentionMeta {
        block_m,
        block_n,
        head_dim,
        causal,
        split_diagonal,
        dtype,
        rotate,
        last_values_ahead,
        whole_key_blocks,
        longest_first,
        group_heads,
    } = *meta;
    let (bm, bn) = (block_m as i32, block_n as i32);
    let p = params(k, dtype);
    let [sq, sk, sv, so] = p.strides;
    let (start_m, off_hz) = if longest_first && group_heads > 0 {
        // Program `i` of the grid's order is the `r`-th of its group of heads: query block
        // `r / heads_in_group` from the last, of the group's `r % heads_in_group`-th head.
        let (heads, blocks) = (k.num_programs(0), k.num_programs(1));
        let group = group_heads as i32;
        let i = k.program_id(0) + k.program_id(1) * heads;
        let span = blocks * group;
        let g = i / span;
        let r = i - g * span;
        let in_group = k.minimum(heads - g * group, group);
        (blocks - r / in_group - 1, g * group + r % in_group)
    } else if longest_first {
        (k.num_programs(1) - k.program_id(1) - 1, k.program_id(0))
    } else {
        (k.program_id(0), k.program_id(1))
    };
    let off_z = off_hz / p.h;
    let off_h = off_hz % p.h;
    let head = |s: [Value<'b>; 4]| off_z * s[0] + off_h * s[1];

    let offs_m = start_m * bm + k.arange(0, bm);
    let offs_n = k.arange(0, bn);
    let offs_d = k.arange(0, head_dim as i32);
    let rows_in = offs_m.expand_dims(1).lt(p.n_ctx);
    let q_ptrs = p.q + head(sq) + offs_m.expand_dims(1) * sq[2] + offs_d.expand_dims(0) * sq[3];
    let q = k.load_masked(q_ptrs, rows_in, 0.0);
    let m_i = k.full(&[block_m], f32::NEG_INFINITY, ScalarType::F32);
    let l_i = k.full(&[block_m], 1.0, ScalarType::F32);
    let acc = k.zeros(&[block_m, head_dim], ScalarType::F32);
    let qk_scale = p.sm_scale * LOG2_E;
    let k_base = p.k + head(sk);
    let v_base = p.v + head(sv);

    let walk = Walk {
        q,
        k_base,
        v_base,
        offs_m,
        offs_n,
        offs_d,
        sk,
        sv,
        qk_scale,
        n_ctx: p.n_ctx,
        block_n: bn,
        dtype,
    };
    let inner = |state, lo, hi, stage| {
        if rotate && stage == Stage::Full {
            walk.rotated(k, state, (lo, hi), last_values_ahead)
        } else {
            walk.inner(k, state, lo, hi, stage)
        }
    };
    let state = [acc, l_i, m_i];
    let zero = k.scalar(0, ScalarType::I32);
    let state = if causal && split_diagonal {
        // Below the diagonal, then on it (`block_n` divides `block_m`).
        let diagonal = start_m * bm;
        let state = inner(state, zero, diagonal, Stage::Full);
        let end = ((start_m + 1) * bm).minimum(p.n_ctx);
        inner(state, diagonal, end, Stage::Diagonal)
    } else if causal {
        inner(state, zero, ((start_m + 1) * bm).minimum(p.n_ctx), Stage::Diagonal)
    } else {
        // Whole blocks of keys without a mask (each score one `fma` before its `exp2`, no
        // bias or subtraction), then the ragged last block, if any.
        let whole = p.n_ctx / bn * bn;
        let state = inner(state, zero, whole, Stage::Full);
        if whole_key_blocks {
            k.device_assert(whole.eq(p.n_ctx), "N_CTX is a multiple of block_n (whole_key_blocks)");
            state
        } else {
            inner(state, whole, p.n_ctx, Stage::Ragged)
        }
    };
    let [acc, l_i, m_i] = state;
    let m_i = m_i + l_i.log2();
    let acc = acc / l_i.expand_dims(1);
    k.store_masked(p.m + off_hz * p.n_ctx + offs_m, m_i, offs_m.lt(p.n_ctx));
    let o_ptrs = p.out + head(so) + offs_m.expand_dims(1) * so[2] + offs_d.expand_dims(0) * so[3];
    k.store_masked(o_ptrs, acc.to(dtype), rows_in);
}

use crate::{BuildError, DotOptions, DotPrecision, Kernel, KernelBuilder, Padding, ScalarType, Value};

/// An activation fused into the matmul's epilogue (the tutorial's `ACTIVATION`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Activation {
    /// `where(x >= 0, x, 0.01 * x)`.
    LeakyRelu,
}

impl Activation {
    fn apply<'b>(self, x: Value<'b>) -> Value<'b> {
        match self {
            Activation::LeakyRelu => x.builder().where_(x.ge(0.0), x, x * 0.01),
        }
    }
}

/// The meta-parameters of [`matmul`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatmulMeta {
    /// Rows of C each program computes (the tutorial's `BLOCK_SIZE_M`): a power of two, at
    /// least 16.
    pub block_m: u32,
    /// Columns of C each program computes (`BLOCK_SIZE_N`): a power of two, at least 16.
    pub block_n: u32,
    /// Elements of the K dimension each loop iteration multiplies (`BLOCK_SIZE_K`): a power
    /// of two, at least 16.
    pub block_k: u32,
    /// Rows of program blocks grouped together for L2 reuse.
    pub group_m: u32,
    /// The activation applied to the f32 accumulator before it is converted and stored;
    /// `None` for none.
    pub activation: Option<Activation>,
    /// Element type of A and B (f16, bf16 or f32).
    pub input: ScalarType,
    /// Element type of C (the f32 accumulator is converted to it).
    pub output: ScalarType,
    /// How the `dot` multiplies f32 inputs (Triton's `input_precision`). `Tf32` and
    /// `Tf32x3` are for f32 inputs only (the kernel does not build with it otherwise: f16 and bf16 products are
    /// exact already).
    pub input_precision: DotPrecision,
    /// fp8 inputs: how many elements of K Hopper's fp8 MMAs add in their own (narrower)
    /// accumulator before the f32 one (Triton's `max_num_imprecise_acc`, see
    /// [`DotOptions`]); `None` leaves the whole K to them, as the tutorial does.
    pub max_num_imprecise_acc: Option<u32>,
}

impl MatmulMeta {
    /// The tutorial's fp16 configuration with 64x64x32 blocks.
    pub fn fp16(block_m: u32, block_n: u32, block_k: u32) -> MatmulMeta {
        MatmulMeta {
            block_m,
            block_n,
            block_k,
            group_m: 8,
            activation: None,
            input: ScalarType::F16,
            output: ScalarType::F16,
            input_precision: DotPrecision::Ieee,
            max_num_imprecise_acc: None,
        }
    }
    /// The options of the kernel's `dot`.
    fn dot_options(&self) -> DotOptions {
        DotOptions {
            input_precision: self.input_precision,
            max_num_imprecise_acc: self.max_num_imprecise_acc,
        }
    }
    /// The f32 accumulator with the activation (if any) applied.
    fn activated<'b>(&self, acc: Value<'b>) -> Value<'b> {
        self.activation.map_or(acc, |act| act.apply(acc))
    }
}

/// Number of programs for an `m x n` output.
pub fn matmul_grid(meta: &MatmulMeta, m: u32, n: u32) -> u32 {
    m.div_ceil(meta.block_m) * n.div_ceil(meta.block_n)
}

/// The scalar arguments of [`matmul`] (`M, N, K` and the six strides) for contiguous
/// row-major A (`m x k`), B (`k x n`) and C (`m x n`).
pub fn matmul_row_major_args(m: usize, n: usize, k: usize) -> [i32; 9] {
    let (m, n, k) = (m as i32, n as i32, k as i32);
    [m, n, k, k, 1, n, 1, n, 1]
}

/// The matmul kernels' parameters, declared in their order: `a_ptr, b_ptr` (`input`),
/// `c_ptr` (`output`), `M, N, K` and the six strides (i32).
struct MatmulArgs<'b> {
    a_ptr: Value<'b>,
    b_ptr: Value<'b>,
    c_ptr: Value<'b>,
    m: Value<'b>,
    n: Value<'b>,
    kk: Value<'b>,
    stride_am: Value<'b>,
    stride_ak: Value<'b>,
    stride_bk: Value<'b>,
    stride_bn: Value<'b>,
    stride_cm: Value<'b>,
    stride_cn: Value<'b>,
}

impl<'b> MatmulArgs<'b> {
    fn declare(k: &'b KernelBuilder, input: ScalarType, output: ScalarType) -> MatmulArgs<'b> {
        let a_ptr = k.arg_ptr("a_ptr", input);
        let b_ptr = k.arg_ptr("b_ptr", input);
        let c_ptr = k.arg_ptr("c_ptr", output);
        let (m, n, kk) = (k.arg_i32("M"), k.arg_i32("N"), k.arg_i32("K"));
        let (stride_am, stride_ak) = (k.arg_i32("stride_am"), k.arg_i32("stride_ak"));
        let (stride_bk, stride_bn) = (k.arg_i32("stride_bk"), k.arg_i32("stride_bn"));
        let (stride_cm, stride_cn) = (k.arg_i32("stride_cm"), k.arg_i32("stride_cn"));
        MatmulArgs {
            a_ptr,
            b_ptr,
            c_ptr,
            m,
            n,
            kk,
            stride_am,
            stride_ak,
            stride_bk,
            stride_bn,
            stride_cm,
            stride_cn,
        }
    }
}

/// This program's block of C, `(pid_m, pid_n)`, in the tutorial's grouped ordering: the
/// programs walk `group_m` block rows column by column, so that those running together
/// share rows of A and columns of B in L2.
fn grouped_program<'b>(
    k: &'b KernelBuilder,
    (m, n): (Value<'b>, Value<'b>),
    (bm, bn): (i32, i32),
    group_m: u32,
) -> (Value<'b>, Value<'b>) {
    let pid = k.program_id(0);
    let num_pid_m = k.cdiv(m, bm);
    let num_pid_n = k.cdiv(n, bn);
    let num_pid_in_group = num_pid_n * group_m;
    let group_id = pid / num_pid_in_group;
    let first_pid_m = group_id * group_m;
    let group_size_m = (num_pid_m - first_pid_m).minimum(group_m as i32);
    let pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m;
    let pid_n = (pid % num_pid_in_group) / group_size_m;
    (pid_m, pid_n)
}

/// `C = activation(A @ B)` for row- or column-major A (`M x K`) and B (`K x N`) given by
/// strides, with grouped program ordering, as the matmul tutorial. Ragged edges are masked:
/// rows and columns out of range wrap (`% M`, `% N`) for the loads and are masked at the
/// store; the K tail is masked with zeros. Parameters: `a_ptr, b_ptr, c_ptr, M, N, K,
/// stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn`.
pub fn matmul(meta: &MatmulMeta) -> Result<Kernel, BuildError> {
    let (bm, bn, bk) = (meta.block_m as i32, meta.block_n as i32, meta.block_k as i32);
    Kernel::build("matmul_kernel", |k| {
        let p = MatmulArgs::declare(k, meta.input, meta.output);
        let (pid_m, pid_n) = grouped_program(k, (p.m, p.n), (bm, bn), meta.group_m);

        let offs_am = (pid_m * bm + k.arange(0, bm)) % p.m;
        let offs_bn = (pid_n * bn + k.arange(0, bn)) % p.n;
        let offs_k = k.arange(0, bk);
        let a_ptrs = p.a_ptr + (offs_am.expand_dims(1) * p.stride_am + offs_k.expand_dims(0) * p.stride_ak);
        let b_ptrs = p.b_ptr + (offs_k.expand_dims(1) * p.stride_bk + offs_bn.expand_dims(0) * p.stride_bn);

        let acc = k.zeros(&[meta.block_m, meta.block_n], ScalarType::F32);
        let steps = k.cdiv(p.kk, bk);
        let out = k.for_range(0, steps, 1, &[acc, a_ptrs, b_ptrs], |step, carried| {
            let (acc, a_ptrs, b_ptrs) = (carried[0], carried[1], carried[2]);
            let k_left = p.kk - step * bk;
            let a = k.load_masked(a_ptrs, offs_k.expand_dims(0).lt(k_left), 0.0);
            let b = k.load_masked(b_ptrs, offs_k.expand_dims(1).lt(k_left), 0.0);
            let acc = k.dot_with_options(a, b, acc, meta.dot_options());
            vec![acc, a_ptrs + p.stride_ak * bk, b_ptrs + p.stride_bk * bk]
        });
        let c = meta.activated(out[0]).to(meta.output);

        let offs_cm = pid_m * bm + k.arange(0, bm);
        let offs_cn = pid_n * bn + k.arange(0, bn);
        let c_ptrs = p.c_ptr + offs_cm.expand_dims(1) * p.stride_cm + offs_cn.expand_dims(0) * p.stride_cn;
        let c_mask = offs_cm.expand_dims(1).lt(p.m) & offs_cn.expand_dims(0).lt(p.n);
        k.store_masked(c_ptrs, c, c_mask);
    })
}

/// [`matmul`] written with block pointers, as Triton's block-pointer form of the tutorial
/// (`tl.make_block_ptr` for A and B, advanced along K each iteration, loads checked on both
/// dimensions with zero padding; C stored through a block pointer checked on both): the same
/// parameters, grid, ordering and results (bit for bit where the accumulation order is the
/// same). Where [`matmul`] wraps rows and columns past the edges (`% M`, `% N`) so that its
/// loads need masks only along K, these mask the edges.
pub fn matmul_block_ptr(meta: &MatmulMeta) -> Result<Kernel, BuildError> {
    let (bm, bn, bk) = (meta.block_m as i32, meta.block_n as i32, meta.block_k as i32);
    Kernel::build("matmul_kernel_block_ptr", |k| {
        let p = MatmulArgs::declare(k, meta.input, meta.output);
        let (pid_m, pid_n) = grouped_program(k, (p.m, p.n), (bm, bn), meta.group_m);
        let (a, b) = ((p.stride_am, p.stride_ak), (p.stride_bk, p.stride_bn));
        let (block_m, block_n, block_k) = (meta.block_m, meta.block_n, meta.block_k);
        let a_block = k.make_block_ptr(p.a_ptr, (p.m, p.kk), a, (pid_m * bm, 0), &[block_m, block_k], &[1, 0]);
        let b_block = k.make_block_ptr(p.b_ptr, (p.kk, p.n), b, (0, pid_n * bn), &[block_k, block_n], &[1, 0]);
        let acc = k.zeros(&[block_m, block_n], ScalarType::F32);
        let out = k.for_range(0, p.kk, bk, &[acc], |k_off, carried| {
            let a = k.load_block(&a_block.advance((0, k_off)), &[0, 1], Padding::Zero);
            let b = k.load_block(&b_block.advance((k_off, 0)), &[0, 1], Padding::Zero);
            vec![k.dot_with_options(a, b, carried[0], meta.dot_options())]
        });
        let acc = meta.activated(out[0]);
        let c = (p.stride_cm, p.stride_cn);
        let c_block = k.make_block_ptr(
            p.c_ptr,
            (p.m, p.n),
            c,
            (pid_m * bm, pid_n * bn),
            &[block_m, block_n],
            &[1, 0],
        );
        k.store_block(&c_block, acc.to(meta.output), &[0, 1]);
    })
}

/// The matmul configurations the tutorial's host code tries, as `(BLOCK_M, BLOCK_N,
/// BLOCK_K, num_stages, num_warps)` with `GROUP_M` 8: the seed's `@triton.autotune` list
/// (the first ten, `BLOCK_K` 32), the fp16 ones later versions of the tutorial added
/// (`BLOCK_K` 64), and four of rutile's (the last four).
pub const MATMUL_CONFIGS: [(u32, u32, u32, u32, u32); 18] = [
    (128, 256, 32, 3, 8),
    (256, 128, 32, 3, 8),
    (256, 64, 32, 4, 4),
    (64, 256, 32, 4, 4),
    (128, 128, 32, 4, 4),
    (128, 64, 32, 4, 4),
    (64, 128, 32, 4, 4),
    (128, 32, 32, 4, 4),
    (64, 32, 32, 5, 2),
    (32, 64, 32, 5, 2),
    (128, 256, 64, 3, 8),
    (128, 64, 64, 4, 4),
    (64, 128, 64, 4, 4),
    (128, 32, 64, 4, 4),
    // Not the tutorial's: 128x128 blocks on 8 warps, whose 64x32 warp tiles need about half
    // the registers of 4 warps' 64x64, so that two programs of 8 warps share a
    // multiprocessor (4 warps a scheduler instead of 2 to cover `mma.sync`'s latency).
    (128, 128, 32, 4, 8),
    // Nor these: on Hopper's warpgroup MMAs, a fourth stage lets the copies run two
    // iterations ahead while one group of MMAs stays in flight (the hand-written study's
    // best schedule, `benches/cuda/wgmma_hand.cu`; 128x256x64 fits four stages because the
    // epilogue reuses the ring's shared memory).
    (128, 128, 64, 4, 8),
    (256, 128, 64, 3, 8),
    (128, 256, 64, 4, 8),
];

/// How many of [`MATMUL_CONFIGS`] are the seed's own list.
pub const SEED_MATMUL_CONFIGS: usize = 10;

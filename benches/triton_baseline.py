"""Baselines for docs/performance.md, measured on the same GPU in the same session as
rutile's benchmark: torch's device-to-device copy, Triton's and torch's vector add and
fused softmax (the tutorials' kernels), and the tiled transpose of rutile's seed (an
8192 x 8192 f32 matrix in 64 x 64 and 32 x 32 tiles at 4 and 8 warps) next to torch's
`x.t().contiguous()`, the seeded dropout (f32, p = 0.5) and the layer norm forward pass
(fp16, M = 4096, the tutorial's kernel and heuristics) next to torch's, and the fused
attention forward pass (fp16, 4 x 32 heads, head dim 64 and 128, causal and not: a Triton
kernel of the tutorial's algorithm, autotuned, beside torch's `scaled_dot_product_attention`
through each backend it has, with cuBLAS's 4096^3 fp16 matmul as rutile's benchmark
reports it), and the matmul tutorial's fp8 run at 4096^3 (its kernel, autotuned over
Triton's fp8 configurations, on E5M2 and E4M3 operands with B column-major as the tutorial
passes it, f16 out; E4M3 also with its sums promoted into f32 every 128 elements of K,
`max_num_imprecise_acc=128`) beside cuBLASLt's fp8 matmul through `torch._scaled_mm` (E4M3, unit
scales, with and without its fast accumulation) and cuBLAS's fp16 one, and `tl.dot_scaled`
in the same matmul kernel as rutile's dot_scaled study (bf16 by mxfp4, mxfp8 by mxfp8),
and the matmul tutorial's kernel on f32 operands and output at input precisions ieee, tf32
and tf32x3 beside torch's f32 matmul with and without TF32 (rutile's f32 matmul study),
median of device-timed launches.

    python3 benches/triton_baseline.py [--flush read|copy]
                                       [--only vector_add,softmax,transpose,dropout,layer_norm,attention,fp8_matmul,dot_scaled,f32_matmul]

`--flush copy` (the default, as rutile's benchmark) is triton.testing.do_bench itself (it
zeroes a 256 MB buffer before each launch, leaving the L2 cache dirty); `--flush read`
empties the cache by reading such a buffer instead (as `benchmark -- --flush read`).
`--only` runs the named sections only (the copy ceiling is always measured), as the
benchmark's `--only`.
"""
import sys
import torch
import triton
import triton.language as tl
from triton.testing import do_bench


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * in_stride + cols, mask=cols < n_cols, other=-float("inf"))
    z = x - tl.max(x, axis=0)
    num = tl.exp(z)
    tl.store(out_ptr + row * out_stride + cols, num / tl.sum(num, axis=0), mask=cols < n_cols)


@triton.jit
def transpose_kernel(x_ptr, out_ptr, m, n, stride_xm, stride_om, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < m) & (rn[None, :] < n)
    x = tl.load(x_ptr + rm[:, None] * stride_xm + rn[None, :], mask=mask)
    tl.store(out_ptr + rn[None, :] * stride_om + rm[:, None], x, mask=mask)


@triton.jit
def seeded_dropout_kernel(x_ptr, out_ptr, n, p, seed, BLOCK: tl.constexpr):
    # The tutorial's seeded dropout: one Philox draw per element from (seed, offset).
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    keep = tl.rand(seed, offs) > p
    tl.store(out_ptr + offs, tl.where(keep, x / (1 - p), 0.0), mask=mask)


@triton.jit
def layer_norm_fwd_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride, n, eps, BLOCK: tl.constexpr):
    # The tutorial's fused forward pass: the row walked three times (mean, variance, output).
    row = tl.program_id(0)
    x_ptr += row * stride
    y_ptr += row * stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, n, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + cols, mask=cols < n, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, n, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + cols, mask=cols < n, other=0.0).to(tl.float32)
        x = tl.where(cols < n, x - mean, 0.0)
        acc += x * x
    rstd = 1 / tl.sqrt(tl.sum(acc, axis=0) / n + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    for off in range(0, n, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < n
        w = tl.load(w_ptr + cols, mask=mask)
        b = tl.load(b_ptr + cols, mask=mask)
        x = tl.load(x_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + cols, (x - mean) * rstd * w + b, mask=mask)


# The fused attention tutorial's algorithm: one program per BLOCK_M query rows of one head,
# walking the keys in BLOCK_N blocks with an online softmax in base 2. Causal programs walk
# the blocks left of the diagonal unmasked, then the diagonal's blocks masked (the
# tutorial's two stages, so BLOCK_N must divide BLOCK_M). Lengths are whole multiples of
# BLOCK_M, as in its benchmark.
@triton.jit
def attention_walk(acc, l_i, m_i, q, k_ptr, v_ptr, base, rows, lo, hi, scale,
                   HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
    cols = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, HEAD_DIM)
    for start_n in range(lo, hi, BLOCK_N):
        keys = start_n + cols
        kt = tl.load(k_ptr + base + keys[None, :] * HEAD_DIM + dims[:, None])
        qk = tl.dot(q, kt) * scale
        if MASKED:
            qk = tl.where(rows[:, None] >= keys[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + base + keys[:, None] * HEAD_DIM + dims[None, :])
        acc = tl.dot(p.to(tl.float16), v, acc * alpha[:, None])
        m_i = m_new
    return acc, l_i, m_i


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_stages=s, num_warps=w)
        for bm, bn, s, w in [(128, 64, 3, 4), (128, 64, 4, 8), (128, 128, 3, 8), (128, 32, 4, 4), (64, 64, 4, 4), (64, 32, 3, 4)]
    ],
    key=["n_ctx", "HEAD_DIM", "CAUSAL"],
)
@triton.jit
def attention_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, sm_scale, n_ctx,
                         HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    base = tl.program_id(1).to(tl.int64) * n_ctx * HEAD_DIM
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + base + rows[:, None] * HEAD_DIM + dims[None, :])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    scale = sm_scale * 1.4426950408889634
    end_unmasked = start_m * BLOCK_M if CAUSAL else n_ctx
    acc, l_i, m_i = attention_walk(acc, l_i, m_i, q, k_ptr, v_ptr, base, rows, 0, end_unmasked, scale,
                                   HEAD_DIM, BLOCK_N, False)
    if CAUSAL:
        acc, l_i, m_i = attention_walk(acc, l_i, m_i, q, k_ptr, v_ptr, base, rows, start_m * BLOCK_M,
                                       (start_m + 1) * BLOCK_M, scale, HEAD_DIM, BLOCK_N, True)
    tl.store(o_ptr + base + rows[:, None] * HEAD_DIM + dims[None, :], (acc / l_i[:, None]).to(tl.float16))


def fp8_configs():
    # The tutorial's fp8 configurations (BLOCK_K 128) and a few around them.
    shapes = [(128, 256, 128, 3, 8), (256, 128, 128, 3, 8), (128, 128, 128, 4, 8), (128, 256, 64, 4, 8),
              (128, 128, 128, 3, 4), (64, 256, 128, 4, 4), (128, 64, 128, 4, 4)]
    return [triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8}, num_stages=s, num_warps=w)
            for m, n, k, s, w in shapes]


@triton.jit
def matmul_body(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  MAX_IMPRECISE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PRECISION: tl.constexpr = None):
    # The matmul tutorial's kernel (MAX_IMPRECISE: tl.dot's max_num_imprecise_acc, None in
    # the tutorial; PRECISION its input_precision for f32 operands), C in c_ptr's type.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_pid_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % group) % size_m)
    pid_n = (pid % group) // size_m
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc, max_num_imprecise_acc=MAX_IMPRECISE, input_precision=PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


matmul_kernel = triton.autotune(configs=fp8_configs(), key=["M", "N", "K"])(matmul_body)
# Triton refuses a max_num_imprecise_acc above the dot's K: the 128-wide K blocks only.
matmul_kernel_128 = triton.autotune(configs=[c for c in fp8_configs() if c.kwargs["BLOCK_K"] >= 128],
                                    key=["M", "N", "K"])(matmul_body)


f32_matmul_kernel = triton.autotune(
    configs=[triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8}, num_stages=s, num_warps=w)
             for m, n, k, s, w in [(128, 128, 32, 3, 8), (128, 128, 32, 4, 4), (128, 256, 32, 3, 8),
                                   (64, 128, 32, 4, 4), (128, 64, 32, 4, 4), (64, 64, 32, 4, 4)]],
    key=["M", "N", "K", "PRECISION"])(matmul_body)


FLUSH = sys.argv[sys.argv.index("--flush") + 1] if "--flush" in sys.argv else "copy"
SECTIONS = ("vector_add", "softmax", "transpose", "dropout", "layer_norm", "attention", "fp8_matmul", "dot_scaled",
            "f32_matmul")
ONLY = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else list(SECTIONS)
if not set(ONLY) <= set(SECTIONS):
    sys.exit(f"--only takes sections from {', '.join(SECTIONS)} separated by commas, got {ONLY}")
_cache = torch.empty(64 << 20, dtype=torch.float32, device="cuda").uniform_()


def bench(fn):
    """Median ms of 100 launches after warm-up, the L2 emptied before each."""
    if FLUSH == "copy":
        return do_bench(fn, return_mode="median")
    for _ in range(5):
        fn()
    times = []
    for _ in range(100):
        _cache.sum()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def gbps(nbytes, ms):
    return nbytes / (ms * 1e-3) / 1e9


def main():
    print("device:", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__, "flush", FLUSH)
    n = 1 << 28
    a = torch.rand(n, device="cuda")
    b = torch.empty_like(a)
    ms = bench(lambda: b.copy_(a))
    ceiling = gbps(8 * n, ms)
    print(f"copy ceiling (torch copy_ of {n} f32): {ceiling:.0f} GB/s")
    del a, b
    if "vector_add" in ONLY:
        bench_vector_add()
    if "softmax" in ONLY:
        bench_softmax()
    if "transpose" in ONLY:
        bench_transpose(ceiling)
    if "dropout" in ONLY:
        bench_dropout(ceiling)
    if "layer_norm" in ONLY:
        bench_layer_norm(ceiling)
    if "attention" in ONLY:
        bench_attention()
    if "fp8_matmul" in ONLY:
        bench_fp8_matmul()
    if "dot_scaled" in ONLY:
        bench_dot_scaled()
    if "f32_matmul" in ONLY:
        bench_f32_matmul()


def bench_dropout(ceiling):
    print("seeded dropout f32, p = 0.5: size, triton GB/s (of the copy ceiling), torch GB/s")
    for log in range(20, 29, 2):
        n = 1 << log
        x = torch.randn(n, device="cuda")
        out = torch.empty_like(x)
        t = bench(lambda: seeded_dropout_kernel[(triton.cdiv(n, 1024),)](x, out, n, 0.5, 123, BLOCK=1024))
        tt = bench(lambda: torch.nn.functional.dropout(x, 0.5, training=True))
        g = gbps(8 * n, t)
        print(f"  2^{log}: {g:.0f} ({100 * g / ceiling:.1f}%) {gbps(8 * n, tt):.0f}")


def bench_layer_norm(ceiling):
    m = 4096
    print(f"layer norm forward fp16 M={m}: N, triton GB/s (of the copy ceiling), torch GB/s")
    for ncols in [2048, 4096, 8192, 16384]:
        x = (-2.3 + 0.5 * torch.randn(m, ncols, device="cuda")).half()
        w = torch.rand(ncols, device="cuda").half()
        b = torch.rand(ncols, device="cuda").half()
        y = torch.empty_like(x)
        mean = torch.empty(m, device="cuda")
        rstd = torch.empty(m, device="cuda")
        block = min(65536 // x.element_size(), triton.next_power_of_2(ncols))
        warps = min(max(block // 256, 1), 8)

        def launch():
            layer_norm_fwd_kernel[(m,)](x, y, w, b, mean, rstd, x.stride(0), ncols, 1e-5, BLOCK=block, num_warps=warps)

        launch()
        want = torch.nn.functional.layer_norm(x.float(), (ncols,), w.float(), b.float(), 1e-5)
        assert torch.allclose(y.float(), want, atol=1e-2), f"triton layer norm {ncols} is wrong"
        t = bench(launch)
        tt = bench(lambda: torch.nn.functional.layer_norm(x, (ncols,), w, b, 1e-5))
        g = gbps(4 * m * ncols, t)
        print(f"  {ncols}: {g:.0f} ({100 * g / ceiling:.1f}%) {gbps(4 * m * ncols, tt):.0f}")


def bench_vector_add():
    print("vector add f32: size, triton GB/s, torch GB/s")
    for log in range(12, 29):
        n = 1 << log
        x, y = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
        out = torch.empty_like(x)
        t = bench(lambda: add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024))
        tt = bench(lambda: torch.add(x, y, out=out))
        print(f"  2^{log}: {gbps(12 * n, t):.0f} {gbps(12 * n, tt):.0f}")


def bench_softmax():
    print("softmax f32 M=4096: N, triton GB/s, torch GB/s")
    m = 4096
    for ncols in [256, 512, 1024, 2048, 4096, 8192, 16384]:
        x = torch.randn(m, ncols, device="cuda")
        y = torch.empty_like(x)
        block = triton.next_power_of_2(ncols)
        warps = 16 if block >= 4096 else 8 if block >= 2048 else 4
        t = bench(lambda: softmax_kernel[(m,)](y, x, x.stride(0), y.stride(0), m, ncols, BLOCK=block, num_warps=warps))
        tt = bench(lambda: torch.softmax(x, dim=-1))
        print(f"  {ncols}: {gbps(8 * m * ncols, t):.0f} {gbps(8 * m * ncols, tt):.0f}")


def bench_transpose(ceiling):
    m = n = 8192
    nbytes = 8 * m * n
    print(f"transpose f32 {m}x{n}: tiles, num_warps, GB/s (of the copy ceiling)")
    x = torch.rand(m, n, device="cuda")
    out = torch.empty(n, m, device="cuda")
    want = x.t().contiguous()
    for bm, bn in [(64, 64), (32, 32)]:
        for warps in [4, 8]:
            grid = (triton.cdiv(m, bm), triton.cdiv(n, bn))

            def launch():
                transpose_kernel[grid](x, out, m, n, x.stride(0), out.stride(0), BLOCK_M=bm, BLOCK_N=bn, num_warps=warps)

            out.fill_(float("nan"))
            launch()
            assert torch.equal(out, want), f"triton transpose {bm}x{bn} w{warps} is wrong"
            g = gbps(nbytes, bench(launch))
            print(f"  triton {bm}x{bn} w{warps}: {g:.0f} ({100 * g / ceiling:.1f}%)")
    g = gbps(nbytes, bench(lambda: x.t().contiguous()))
    print(f"  torch x.t().contiguous(): {g:.0f} ({100 * g / ceiling:.1f}%)")


def bench_attention():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    cublas = 2 * 4096**3 / (bench(lambda: a @ b) * 1e-3) / 1e12
    print(f"fused attention forward fp16, 4 x 32 heads: TFLOPS (of cuBLAS's 4096^3 fp16 matmul, {cublas:.1f})")
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
    z, h = 4, 32
    for head_dim in [64, 128]:
        for causal in [False, True]:
            for n_ctx in [1024, 2048, 4096, 8192, 16384]:
                q, k, v = (torch.randn(z, h, n_ctx, head_dim, device="cuda", dtype=torch.float16) for _ in range(3))
                o = torch.empty_like(q)
                scale = head_dim**-0.5

                def launch():
                    grid = lambda meta: (triton.cdiv(n_ctx, meta["BLOCK_M"]), z * h)
                    attention_fwd_kernel[grid](q, k, v, o, scale, n_ctx, HEAD_DIM=head_dim, CAUSAL=causal)

                launch()
                if n_ctx == 1024:
                    want = torch.nn.functional.scaled_dot_product_attention(q[:1, :2].float(), k[:1, :2].float(), v[:1, :2].float(), is_causal=causal)
                    err = (o[:1, :2].float() - want).abs().max().item()
                    assert err < 2e-2, f"triton attention d{head_dim} causal={causal} is off by {err}"
                flops = 4 * z * h * n_ctx * n_ctx * head_dim * (0.5 if causal else 1.0)

                def share(ms):
                    t = flops / (ms * 1e-3) / 1e12
                    return f"{t:.1f} ({100 * t / cublas:.1f}%)"

                line = f"  d{head_dim} {'causal' if causal else 'non-causal'} {n_ctx}: triton {share(bench(launch))}"
                for name, backend in backends:
                    try:
                        with sdpa_kernel(backend):
                            sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
                            sdpa()
                            line += f", torch {name} {share(bench(sdpa))}"
                    except RuntimeError as e:
                        line += f", torch {name} unavailable ({str(e).splitlines()[0][:60]})"
                print(line, flush=True)


def matmul_baseline(n):
    """TFLOPS of a time in ms at n^3, two random f16 n x n operands, and cuBLAS's fp16
    matmul of them in TFLOPS (the matmul sections' baseline)."""
    flops = 2 * n**3
    tflops = lambda ms: flops / (ms * 1e-3) / 1e12
    a16 = torch.rand(n, n, device="cuda", dtype=torch.float16) * 2 - 1
    b16 = torch.rand(n, n, device="cuda", dtype=torch.float16) * 2 - 1
    return tflops, a16, b16, tflops(bench(lambda: a16 @ b16))


def bench_f32_matmul():
    n = 4096
    tflops, _, _, cublas = matmul_baseline(n)
    a = torch.rand(n, n, device="cuda") * 2 - 1
    b = torch.rand(n, n, device="cuda") * 2 - 1
    exact = a[:16].double() @ b.double()
    error = lambda c: ((c[:16].double() - exact).norm() / exact.norm()).item()
    print(f"matmul f32 at {n}^3, f32 out: TFLOPS (of cuBLAS's fp16 matmul, {cublas:.1f}), relative error")
    line = "  torch"
    for allow in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = allow
        t = tflops(bench(lambda: a @ b))
        line += f", {'tf32' if allow else 'ieee'} {t:.1f} ({100 * t / cublas:.1f}%) error {error(a @ b):.1e}"
    torch.backends.cuda.matmul.allow_tf32 = False
    print(line, flush=True)
    c = torch.empty(n, n, device="cuda")
    for precision in ("ieee", "tf32", "tf32x3"):
        def launch():
            grid = lambda meta: (triton.cdiv(n, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)
            f32_matmul_kernel[grid](a, b, c, n, n, n, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                    c.stride(0), c.stride(1), MAX_IMPRECISE=None, PRECISION=precision)

        launch()
        err = error(c)
        t = tflops(bench(launch))
        print(f"  {precision}: triton {t:.1f} ({100 * t / cublas:.1f}%) error {err:.1e} "
              f"[{f32_matmul_kernel.best_config}]", flush=True)


def bench_fp8_matmul():
    n = 4096
    tflops, a16, b16, cublas = matmul_baseline(n)
    print(f"matmul fp8 at {n}^3, f16 out, B column-major: TFLOPS (of cuBLAS's fp16 matmul, {cublas:.1f})")
    # (e4m3 at 128: its sums promoted into f32 every 128 elements of K, max_num_imprecise_acc.)
    for dtype, name, limit in [(torch.float8_e5m2, "e5m2", None), (torch.float8_e4m3fn, "e4m3", None),
                               (torch.float8_e4m3fn, "e4m3, max_num_imprecise_acc=128", 128)]:
        a, b = a16.to(dtype), b16.to(dtype).T.contiguous().T  # B column-major, as the tutorial's b.T
        c = torch.empty(n, n, device="cuda", dtype=torch.float16)

        kernel = matmul_kernel if limit is None else matmul_kernel_128

        def launch():
            grid = lambda meta: (triton.cdiv(n, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)
            kernel[grid](a, b, c, n, n, n, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                         c.stride(0), c.stride(1), MAX_IMPRECISE=limit)

        launch()
        exact = a[:16].float() @ b.float()
        err = ((c[:16].float() - exact).norm() / exact.norm()).item()
        assert err < 2e-3, f"triton fp8 {name} matmul is off by {err}"
        t = tflops(bench(launch))
        line = f"  {name}: triton {t:.1f} ({100 * t / cublas:.1f}%) [{kernel.best_config}]"
        if dtype == torch.float8_e4m3fn and limit is None:
            one = torch.ones((), device="cuda")
            scaled = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.float16)
            got = scaled()
            err = ((got[:16].float() - exact).norm() / exact.norm()).item()
            assert err < 2e-3, f"torch._scaled_mm is off by {err}"
            s = tflops(bench(scaled))
            line += f", cuBLASLt fp8 (torch._scaled_mm) {s:.1f} ({100 * s / cublas:.1f}%)"
            # Its fast accumulation: the tensor cores' own fp8 accumulator across K, as
            # Triton's default on sm_90 and rutile's fp8 dot.
            fast = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.float16, use_fast_accum=True)
            err = ((fast()[:16].float() - exact).norm() / exact.norm()).item()
            assert err < 2e-3, f"torch._scaled_mm with fast accumulation is off by {err}"
            s = tflops(bench(fast))
            line += f", with fast accumulation {s:.1f} ({100 * s / cublas:.1f}%)"
        print(line, flush=True)


@triton.autotune(configs=[triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k}, num_stages=s, num_warps=w)
                          for m, n, k, w, s in [(128, 128, 128, 8, 3), (128, 128, 64, 8, 3), (128, 256, 64, 8, 3),
                                                (64, 128, 128, 4, 3), (128, 64, 128, 4, 3), (64, 64, 64, 4, 2)]],
                 key=["M", "N", "K", "LHS", "RHS"])
@triton.jit
def scaled_matmul_kernel(a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, M, N, K, LHS: tl.constexpr, RHS: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # rutile's dot_scaled study kernel: A [M, K] row-major, B [N, K] K-contiguous (fp4 two a
    # byte), E8M0 scales [M, K/32] and [N, K/32]; sizes multiples of the blocks.
    GROUP_M: tl.constexpr = 8
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    first_m = pid // (num_n * GROUP_M) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (num_n * GROUP_M)) % size_m
    pid_n = (pid % (num_n * GROUP_M)) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    A_K: tl.constexpr = BLOCK_K // 2 if LHS == "e2m1" else BLOCK_K
    B_K: tl.constexpr = BLOCK_K // 2 if RHS == "e2m1" else BLOCK_K
    a_row = K // 2 if LHS == "e2m1" else K
    b_col = K // 2 if RHS == "e2m1" else K
    g = tl.arange(0, BLOCK_K // 32)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for step in range(0, K // BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * a_row + (step * A_K + tl.arange(0, A_K))[None, :])
        b = tl.load(b_ptr + (step * B_K + tl.arange(0, B_K))[:, None] + rn[None, :] * b_col)
        sb = tl.load(sb_ptr + rn[:, None] * (K // 32) + (step * (BLOCK_K // 32) + g)[None, :])
        if LHS == "bf16":
            acc = tl.dot_scaled(a, None, LHS, b, sb, RHS, acc)
        else:
            sa = tl.load(sa_ptr + rm[:, None] * (K // 32) + (step * (BLOCK_K // 32) + g)[None, :])
            acc = tl.dot_scaled(a, sa, LHS, b, sb, RHS, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


def bench_dot_scaled():
    n = 4096
    tflops, _, _, cublas = matmul_baseline(n)
    print(f"dot_scaled matmul at {n}^3, f16 out, B K-contiguous: TFLOPS (cuBLAS's fp16 matmul {cublas:.1f})")
    for lhs, rhs, name in [("bf16", "e2m1", "bf16 x mxfp4"), ("e4m3", "e4m3", "mxfp8 x mxfp8")]:
        gen = torch.Generator(device="cuda").manual_seed(7)
        sa = torch.randint(122, 133, (n, n // 32), device="cuda", dtype=torch.uint8, generator=gen)
        sb = torch.randint(122, 133, (n, n // 32), device="cuda", dtype=torch.uint8, generator=gen)
        if lhs == "bf16":
            a = (torch.rand(n, n, device="cuda") * 2 - 1).to(torch.bfloat16)
        else:
            a = (torch.rand(n, n, device="cuda") * 2 - 1).to(torch.float8_e4m3fn).view(torch.uint8)
        if rhs == "e2m1":
            b = torch.randint(0, 256, (n, n // 2), device="cuda", dtype=torch.uint8, generator=gen)
        else:
            b = (torch.rand(n, n, device="cuda") * 2 - 1).to(torch.float8_e4m3fn).view(torch.uint8)
        c = torch.empty(n, n, device="cuda", dtype=torch.float16)

        def launch():
            grid = lambda meta: (triton.cdiv(n, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)
            scaled_matmul_kernel[grid](a, b, sa, sb, c, n, n, n, LHS=lhs, RHS=rhs)

        def values(x, fmt, scale):
            # The operand's values times its scales, [rows, K] in f64.
            if fmt == "bf16":
                v = x.double()
            elif fmt == "e2m1":
                table = torch.tensor([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6],
                                     device="cuda", dtype=torch.float64)
                v = torch.stack([table[(x & 15).long()], table[(x >> 4).long()]], dim=-1).reshape(x.shape[0], -1)
            else:
                v = x.view(torch.float8_e4m3fn).double()
            if scale is not None:
                v = v * torch.exp2(scale.double() - 127).repeat_interleave(32, dim=1)
            return v

        try:
            launch()
            want = values(a[:8], lhs, None if lhs == "bf16" else sa[:8]) @ values(b, rhs, sb).T
            err = ((c[:8].double() - want).norm() / want.norm()).item()
            assert err < 2e-3, f"triton dot_scaled {name} is off by {err}"
            t = tflops(bench(launch))
            print(f"  {name}: triton {t:.1f} ({100 * t / cublas:.1f}%) [{scaled_matmul_kernel.best_config}]", flush=True)
        except Exception as e:  # the emulation's limits on this GPU, reported
            print(f"  {name}: triton failed: {str(e).splitlines()[-1][:200]}", flush=True)


if __name__ == "__main__":
    main()

// The harness the hand-written GEMM studies share: error-checking macros, cuBLAS as the
// reference and the baseline (`cublasGemmEx`, fp16 in and out, f32 compute, itself
// spot-checked against a double-precision host product), random fills, the relative
// Frobenius comparison, L2-flushed event timing, and the table every study prints.
//
// A study builds its `Entry`s (one kernel instantiation each: the form, its configuration,
// threads, dynamic shared memory and block tile) and hands them to `run_gemm_harness`.
#pragma once

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#define CUDA_CHECK(x)                                                                  \
  do {                                                                                 \
    cudaError_t err_ = (x);                                                            \
    if (err_ != cudaSuccess) {                                                         \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #x,                \
              cudaGetErrorString(err_));                                               \
      exit(2);                                                                         \
    }                                                                                  \
  } while (0)
#define CUBLAS_CHECK(x)                                                                \
  do {                                                                                 \
    cublasStatus_t st_ = (x);                                                          \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #x,                \
              cublasGetStatusString(st_));                                             \
      exit(2);                                                                         \
    }                                                                                  \
  } while (0)
// After every launch: launch errors now, and (through the sync where one follows) faults.
#define LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())


// The first row and column of C that program `pid` computes, in Triton's grouped order:
// GROUP_M rows of BM x BN blocks are walked column by column, so that programs running
// together share A rows and B columns in L2.
struct TileOrigin {
  int m0, n0;
};
template <int BM, int BN, int GROUP_M = 8>
__device__ __forceinline__ TileOrigin grouped_tile(int pid, int M, int N) {
  const int num_pid_m = (M + BM - 1) / BM, num_pid_n = (N + BN - 1) / BN;
  const int num_pid_in_group = GROUP_M * num_pid_n;
  const int first_pid_m = (pid / num_pid_in_group) * GROUP_M;
  const int group_size_m = min(num_pid_m - first_pid_m, GROUP_M);
  const int pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m;
  const int pid_n = (pid % num_pid_in_group) / group_size_m;
  return {pid_m * BM, pid_n * BN};
}

// cuBLAS is column-major: row-major C = A B is column-major C^T = B^T A^T, i.e. an
// (N x K) by (K x M) product of the buffers as they are, with leading dimensions N, K, N.
static inline void cublas_gemm(cublasHandle_t h, const __half* A, const __half* B, __half* C, int M,
                        int N, int K) {
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, B, CUDA_R_16F, N, A,
                            CUDA_R_16F, K, &beta, C, CUDA_R_16F, N, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
}

// Uniform in [-1, 1) from a hash of the index: random values, not a zero or constant fill,
// which would hide a misplaced fragment element.
__global__ void fill_uniform(__half* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    uint64_t z = i + seed * 0x9E3779B97F4A7C15ull;  // splitmix64
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    p[i] = __float2half(2.0f * u - 1.0f);
  }
}

// sums[0] += sum (c - ref)^2, sums[1] += sum ref^2, max_bits = max |c - ref| as float bits
// (a NaN anywhere, say from an element left poisoned, makes both the sum and the max NaN).
__global__ void compare(const __half* c, const __half* ref, size_t n, double* sums,
                        unsigned* max_bits) {
  double d2 = 0, r2 = 0;
  float mx = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    const float x = __half2float(c[i]), y = __half2float(ref[i]), d = fabsf(x - y);
    d2 += (double)d * d;
    r2 += (double)y * y;
    if (!(d <= mx)) mx = d;  // keeps a NaN once seen
  }
  for (int o = 16; o; o >>= 1) {
    d2 += __shfl_xor_sync(~0u, d2, o);
    r2 += __shfl_xor_sync(~0u, r2, o);
    const float m = __shfl_xor_sync(~0u, mx, o);
    if (!(m <= mx)) mx = m;
  }
  if (threadIdx.x % 32 == 0) {
    atomicAdd(&sums[0], d2);
    atomicAdd(&sums[1], r2);
    atomicMax(max_bits, __float_as_uint(mx));  // non-negative floats order as their bits
  }
}

struct Error {
  double rel = 0;
  float max_abs = 0;
  bool ok() const { return rel <= 1e-2; }  // false for NaN
};

static inline Error compare_outputs(const __half* c, const __half* ref, size_t n, double* d_sums,
                             unsigned* d_max) {
  CUDA_CHECK(cudaMemset(d_sums, 0, 2 * sizeof(double)));
  CUDA_CHECK(cudaMemset(d_max, 0, sizeof(unsigned)));
  compare<<<1024, 256>>>(c, ref, n, d_sums, d_max);
  LAUNCH_CHECK();
  double sums[2];
  unsigned bits;
  CUDA_CHECK(cudaMemcpy(sums, d_sums, sizeof sums, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(&bits, d_max, sizeof bits, cudaMemcpyDeviceToHost));
  Error e;
  e.rel = std::sqrt(sums[0] / sums[1]);
  memcpy(&e.max_abs, &bits, sizeof bits);
  return e;
}

// cuBLAS against a double-precision host product at sampled entries (corners included).
static inline Error spot_check_cublas(const __half* dA, const __half* dB, const __half* dC, int M,
                               int N, int K) {
  std::vector<__half> A((size_t)M * K), B((size_t)K * N), C((size_t)M * N);
  CUDA_CHECK(cudaMemcpy(A.data(), dA, A.size() * sizeof(__half), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(B.data(), dB, B.size() * sizeof(__half), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(C.data(), dC, C.size() * sizeof(__half), cudaMemcpyDeviceToHost));
  uint64_t s = 12345;
  auto next = [&](int bound) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int>((s >> 33) % static_cast<uint64_t>(bound));
  };
  double d2 = 0, r2 = 0;
  Error e;
  for (int sample = 0; sample < 512; ++sample) {
    const int i = sample == 0 ? 0 : sample == 1 ? M - 1 : next(M);
    const int j = sample == 0 ? 0 : sample == 1 ? N - 1 : next(N);
    double ref = 0;
    for (int k = 0; k < K; ++k)
      ref += (double)__half2float(A[(size_t)i * K + k]) * __half2float(B[(size_t)k * N + j]);
    const double d = std::fabs(__half2float(C[(size_t)i * N + j]) - ref);
    d2 += d * d;
    r2 += ref * ref;
    if (!(d <= e.max_abs)) e.max_abs = (float)d;
  }
  e.rel = std::sqrt(d2 / r2);
  return e;
}

struct Timer {
  cudaEvent_t start, stop;
  void* flush_src = nullptr;
  void* flush_dst = nullptr;
  size_t flush_bytes = 0;
  Timer() {
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    const char* f = getenv("MMA_FLUSH_L2");
    if (!f || atoi(f) != 0) {
      flush_bytes = 256ull << 20;  // several times the H100's 50 MB L2
      CUDA_CHECK(cudaMalloc(&flush_src, flush_bytes));
      CUDA_CHECK(cudaMalloc(&flush_dst, flush_bytes));
      CUDA_CHECK(cudaMemset(flush_src, 0, flush_bytes));
    }
  }
  // Median time of one launch in milliseconds.
  template <class F>
  double median_ms(F run, int warmup = 3, int reps = 25) {
    for (int i = 0; i < warmup; ++i) run();
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> ms(reps);
    for (int i = 0; i < reps; ++i) {
      if (flush_bytes)
        CUDA_CHECK(cudaMemcpyAsync(flush_dst, flush_src, flush_bytes, cudaMemcpyDeviceToDevice));
      CUDA_CHECK(cudaEventRecord(start));
      run();
      CUDA_CHECK(cudaEventRecord(stop));
      CUDA_CHECK(cudaEventSynchronize(stop));
      CUDA_CHECK(cudaEventElapsedTime(&ms[i], start, stop));
    }
    std::sort(ms.begin(), ms.end());
    return reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);
  }
};

struct Shape {
  int M, N, K;
  std::string name() const {
    char b[48];
    if (M == N && N == K) snprintf(b, sizeof b, "%d", M);
    else snprintf(b, sizeof b, "%dx%dx%d", M, N, K);
    return b;
  }
};

struct Buffers {
  __half *A = nullptr, *B = nullptr, *C = nullptr, *ref = nullptr;
  Buffers(const Shape& s, uint64_t seed) {
    const size_t a = (size_t)s.M * s.K, b = (size_t)s.K * s.N, c = (size_t)s.M * s.N;
    CUDA_CHECK(cudaMalloc(&A, a * sizeof(__half)));
    CUDA_CHECK(cudaMalloc(&B, b * sizeof(__half)));
    CUDA_CHECK(cudaMalloc(&C, c * sizeof(__half)));
    CUDA_CHECK(cudaMalloc(&ref, c * sizeof(__half)));
    fill_uniform<<<1024, 256>>>(A, a, seed);
    LAUNCH_CHECK();
    fill_uniform<<<1024, 256>>>(B, b, seed + 1);
    LAUNCH_CHECK();
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  ~Buffers() {
    CUDA_CHECK(cudaFree(A));
    CUDA_CHECK(cudaFree(B));
    CUDA_CHECK(cudaFree(C));
    CUDA_CHECK(cudaFree(ref));
  }
};

// 0xFFFF in every half: a NaN, so an element the kernel does not write fails the check.
static inline void poison(__half* p, size_t n) { CUDA_CHECK(cudaMemset(p, 0xFF, n * sizeof(__half))); }
using GemmKernel = void (*)(const __half*, const __half*, __half*, int, int, int);

// How to launch a kernel whose parameters or grid are not GemmKernel's (TMA descriptors
// built on the host, a persistent grid): given the buffers and the shape, it launches.
using GemmLaunch = std::function<void(const __half*, const __half*, __half*, int, int, int)>;

struct Entry {
  const char* variant;  // which form of the kernel (a column of the table)
  std::string config;
  GemmKernel kernel;    // launched on one block per BM x BN tile; null where `custom` is set
  int threads, smem, bm, bn;
  // Optional, for kernels of another signature: the kernel (for the resource table) and
  // its launcher, which is used instead of `kernel` where set.
  const void* func = nullptr;
  GemmLaunch custom = nullptr;
  const void* attr_func() const {
    return func ? func : reinterpret_cast<const void*>(kernel);
  }
};

static inline void launch(const Entry& e, const __half* A, const __half* B, __half* C, int M, int N,
                   int K) {
  if (M < 1 || N % 8 != 0 || K % 8 != 0 || N < 8 || K < 8) {
    fprintf(stderr, "unsupported shape %d x %d x %d: N and K must be positive multiples of 8\n",
            M, N, K);
    exit(2);
  }
  if (e.custom) {
    e.custom(A, B, C, M, N, K);
    LAUNCH_CHECK();
    return;
  }
  const int grid = ((M + e.bm - 1) / e.bm) * ((N + e.bn - 1) / e.bn);
  e.kernel<<<grid, e.threads, e.smem>>>(A, B, C, M, N, K);
  LAUNCH_CHECK();
}

// Prints each kernel's resources, checks every entry against cuBLAS on small ragged shapes
// and on the timed ones, and times them beside cuBLAS. Returns the process's exit status:
// 0, or 1 when a check failed.
// `extra` shapes are timed after the standard ones (a study's own, e.g. a large ragged one).
inline int run_gemm_harness(const std::vector<Entry>& entries, cublasHandle_t handle,
                            const std::vector<Shape>& extra = {}) {
  // What the hardware made of each instantiation (ptxas -v gives the same registers and
  // spills; dynamic shared memory is only known here).
  printf("\n%-11s %-26s %5s %8s %10s %12s\n", "variant", "config", "regs", "local B",
         "dyn smem B", "blocks/SM");
  for (const Entry& e : entries) {
    cudaFuncAttributes fa;
    CUDA_CHECK(cudaFuncGetAttributes(&fa, e.attr_func()));
    int blocks = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, e.attr_func(),
                                                             e.threads, e.smem));
    printf("%-11s %-26s %5d %8zu %10d %12d\n", e.variant, e.config.c_str(),
           fa.numRegs, fa.localSizeBytes, e.smem, blocks);
  }

  double *d_sums;
  unsigned* d_max;
  CUDA_CHECK(cudaMalloc(&d_sums, 2 * sizeof(double)));
  CUDA_CHECK(cudaMalloc(&d_max, sizeof(unsigned)));
  int failures = 0;

  // Poison, run, compare with cuBLAS's output in b.ref.
  auto check = [&](const Entry& e, const Shape& s, const Buffers& b) {
    poison(b.C, (size_t)s.M * s.N);
    launch(e, b.A, b.B, b.C, s.M, s.N, s.K);
    CUDA_CHECK(cudaDeviceSynchronize());
    const Error err = compare_outputs(b.C, b.ref, (size_t)s.M * s.N, d_sums, d_max);
    if (!err.ok()) {
      ++failures;
      fprintf(stderr, "FAILED: %s %s at %s: relative Frobenius error %.3e (max |error| %g)\n",
              e.variant, e.config.c_str(), s.name().c_str(), err.rel,
              err.max_abs);
    }
    return err;
  };
  auto reference = [&](const Shape& s, const Buffers& b) {
    poison(b.ref, (size_t)s.M * s.N);
    cublas_gemm(handle, b.A, b.B, b.ref, s.M, s.N, s.K);
    CUDA_CHECK(cudaDeviceSynchronize());
    const Error err = spot_check_cublas(b.A, b.B, b.ref, s.M, s.N, s.K);
    if (!err.ok()) {
      ++failures;
      fprintf(stderr, "FAILED: cuBLAS at %s against the host: relative error %.3e\n",
              s.name().c_str(), err.rel);
    }
    return err;
  };

  // Correctness only, on shapes smaller than a block, with fewer K steps than stages, and
  // ragged in every dimension.
  const Shape small[] = {{1, 8, 8}, {37, 72, 24}, {200, 264, 40}, {129, 136, 520}};
  for (const Shape& s : small) {
    Buffers b(s, 7);
    reference(s, b);
    for (const Entry& e : entries) check(e, s, b);
  }
  printf("\nsmall shapes checked (%s)\n", failures ? "FAILURES above" : "all pass");

  std::vector<Shape> shapes = {{1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096},
                               {8192, 8192, 8192}, {1000, 3000, 136}};
  shapes.insert(shapes.end(), extra.begin(), extra.end());
  Timer timer;
  printf("\ntimes: median of 25 after 3 warm-up launches, L2 %s before each\n\n",
         timer.flush_bytes ? "emptied" : "not emptied");
  printf("%-14s %-11s %-26s %9s %9s %11s %10s\n", "size", "variant", "config", "TFLOPS",
         "% cuBLAS", "rel err", "max |err|");
  for (const Shape& s : shapes) {
    Buffers b(s, 1);
    const double flop = 2.0 * s.M * s.N * s.K;
    const Error cerr = reference(s, b);
    const double cublas_ms = timer.median_ms([&] {
      cublas_gemm(handle, b.A, b.B, b.ref, s.M, s.N, s.K);
    });
    const double cublas_tflops = flop / (cublas_ms * 1e-3) / 1e12;
    printf("%-14s %-11s %-26s %9.1f %9.1f %11.2e %10.3g%s\n", s.name().c_str(), "cuBLAS",
           "cublasGemmEx", cublas_tflops, 100.0, cerr.rel, cerr.max_abs,
           cerr.ok() ? "  (vs host, sampled)" : "  FAIL");
    // The timed runs wrote into the reference too: recompute and re-check it, so that the
    // checks below compare against an output that was itself checked.
    reference(s, b);
    for (const Entry& e : entries) {
      const Error err = check(e, s, b);
      const double ms = timer.median_ms([&] { launch(e, b.A, b.B, b.C, s.M, s.N, s.K); });
      const double tflops = flop / (ms * 1e-3) / 1e12;
      printf("%-14s %-11s %-26s %9.1f %9.1f %11.2e %10.3g%s\n", s.name().c_str(),
             e.variant, e.config.c_str(), tflops, 100.0 * tflops / cublas_tflops,
             err.rel, err.max_abs, err.ok() ? "" : "  FAIL");
    }
    fflush(stdout);
  }

  CUDA_CHECK(cudaFree(d_sums));
  CUDA_CHECK(cudaFree(d_max));
  if (failures) {
    fprintf(stderr, "\n%d check(s) FAILED\n", failures);
    return 1;
  }
  printf("\nall checks passed (relative Frobenius error <= 1e-2)\n");
  return 0;
}

// fp16 GEMM on Hopper's warpgroup MMA (`wgmma.mma_async`), written by hand: the target of
// rutile's sm_90 `dot` lowering, and what each piece of it is worth beside cuBLAS and beside
// the `mma.sync` study (mma_sync_hand.cu), whose harness, shapes and checks it shares.
//
//   C[M,N] = A[M,K] @ B[K,N]   A, B row-major fp16; f32 accumulation; C row-major fp16
//
// The operands go global -> shared through the same `cp.async` ring as the mma.sync study's
// `cp_async` variant, but into the layouts wgmma reads through matrix descriptors:
//   A  K-major (its rows run along K): BM rows of BK = 64 halves, 128 bytes, 16-byte chunk c
//      of row r stored at chunk c ^ (r % 8) (the 128-byte swizzle; the same as Triton's
//      swizzled shared layout for 128-byte rows). Descriptor: stride byte offset 1024 (eight
//      rows), leading byte offset unused; a k16 step is 32 bytes further along the rows.
//   B  N-major (its rows run along N, imm-trans-b = 1): BN / 64 column blocks of 64 halves
//      (128 bytes), each BK rows of K, with the same swizzle by k % 8. Descriptor: leading
//      byte offset = one column block (BK * 128 bytes), stride byte offset 1024 (eight rows
//      of K); a k16 step is 16 rows, 2048 bytes, further.
// Every tile starts 1024-byte aligned, so the swizzle that the copies write (by row index)
// is the one wgmma applies (by address bits).
//
// Each warpgroup (4 warps) owns BM / WARPGROUPS rows of the block tile, one m64nBNk16 per
// 64 rows and k16 step. Two schedules, a template parameter:
//   WAIT = 0  after the k-step's wgmmas, `wgmma.wait_group 0`: the MMAs of a block step
//             overlap only the copies in flight; copies run S - 1 steps ahead.
//   WAIT = 1  `wgmma.wait_group 1`: the MMAs of step k still run while step k + 1's barrier,
//             copies and MMAs are issued; copies run S - 2 steps ahead, since a buffer is
//             refilled only after the barrier that follows every warpgroup's wait for the
//             MMAs that read it.
// `cp.async` writes shared memory through the generic proxy and wgmma reads it through the
// async proxy, so each thread fences (`fence.proxy.async.shared::cta`) after its copies land
// and before the barrier that publishes them.
//
// The accumulator fragment of m64nNk16 (PTX ISA, "Matrix Fragments for wgmma.mma_async.
// m64nNk16"): warp w of the warpgroup holds rows 16w..16w+15; lane l holds, for each n8
// column block j, d[4j], d[4j+1] = D[16w + l/4][8j + 2(l%4) + {0, 1}] and d[4j+2], d[4j+3]
// the same columns 8 rows further: mma.sync's m16n8 accumulator, repeated along N.
//
//   bash benches/cuda/wgmma_hand.sh     # builds with nvcc for sm_90a (ptxas -v), then runs
#include "gemm_harness.cuh"
#include "ptx_copy.cuh"
#include "ptx_wgmma.cuh"

// ---------------------------------------------------------------------------------------
// Configuration and shared layouts
// ---------------------------------------------------------------------------------------
template <int BM_, int BN_, int WARPGROUPS_, int STAGES_, int WAIT_>
struct Config {
  static constexpr int BM = BM_, BN = BN_, BK = 64;
  static constexpr int WARPGROUPS = WARPGROUPS_, STAGES = STAGES_, WAIT = WAIT_;
  static constexpr int THREADS = 128 * WARPGROUPS;
  static constexpr int WG_M = BM / WARPGROUPS;  // rows of C per warpgroup
  static constexpr int MREP = WG_M / 64;         // m64 wgmmas per warpgroup and k16 step
  static constexpr int ACC = BN / 2;             // f32 accumulators a thread, per m64
  static constexpr int AHEAD = WAIT == 0 ? STAGES - 1 : STAGES - 2;  // copies ahead
  static constexpr int A_BYTES = BM * 128, B_BYTES = BK * BN * 2;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
  // Dynamic shared memory is only 16-byte aligned: 1 KB of slack to align the ring.
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 1024;
  static constexpr int A_ITERS = BM * 8 / THREADS, B_ITERS = BK * (BN / 8) / THREADS;
  static_assert(WG_M % 64 == 0, "a warpgroup's rows are whole m64 tiles");
  static_assert(BN == 128 || BN == 256, "one wgmma spans the block's columns");
  static_assert(AHEAD >= 1, "a ring needs a buffer being filled and one being read");
  static_assert(BM * 8 % THREADS == 0 && BK * (BN / 8) % THREADS == 0,
                "each thread copies a whole number of chunks of each tile");
};

// Byte offset of 16-byte chunk `c` (8 halves) of row `r` of the A tile, and of the chunk
// holding B[k][8 n8 .. 8 n8 + 7] in the B tile.
__device__ __forceinline__ uint32_t a_offset(int r, int c) { return r * 128 + ((c ^ (r % 8)) * 16); }
template <class Cfg>
__device__ __forceinline__ uint32_t b_offset(int k, int n8) {
  return ((n8 / 8) * Cfg::BK + k) * 128 + (((n8 % 8) ^ (k % 8)) * 16);
}

template <class Cfg>
__device__ __forceinline__ void issue_copies(const __half* A, const __half* B, int M, int N,
                                             int K, int m0, int n0, int k0, int tid,
                                             uint32_t stage) {
#pragma unroll
  for (int j = 0; j < Cfg::A_ITERS; ++j) {
    const int i = tid + j * Cfg::THREADS, r = i / 8, c = i % 8;
    const int gm = m0 + r, gk = k0 + c * 8;
    const bool valid = gm < M && gk < K;
    ptx::cp_async_16(stage + a_offset(r, c), valid ? A + (size_t)gm * K + gk : A, valid);
  }
#pragma unroll
  for (int j = 0; j < Cfg::B_ITERS; ++j) {
    const int i = tid + j * Cfg::THREADS, k = i / (Cfg::BN / 8), n8 = i % (Cfg::BN / 8);
    const int gk = k0 + k, gn = n0 + n8 * 8;
    const bool valid = gk < K && gn < N;
    ptx::cp_async_16(stage + Cfg::A_BYTES + b_offset<Cfg>(k, n8),
                     valid ? B + (size_t)gk * N + gn : B, valid);
  }
}

template <class Cfg>
__device__ __forceinline__ void wgmma_block_step(float (&acc)[Cfg::MREP][Cfg::ACC],
                                                 uint32_t stage, int wg) {
#pragma unroll
  for (int ks = 0; ks < Cfg::BK / 16; ++ks) {
    const uint64_t db = ptx::matrix_desc(stage + Cfg::A_BYTES + ks * 16 * 128, Cfg::BK * 128, 1024);
#pragma unroll
    for (int r = 0; r < Cfg::MREP; ++r) {
      const uint64_t da = ptx::matrix_desc(stage + (wg * Cfg::WG_M + r * 64) * 128 + ks * 32, 16, 1024);
      if constexpr (Cfg::BN == 256) ptx::wgmma_m64n256k16(acc[r], da, db);
      else ptx::wgmma_m64n128k16(acc[r], da, db);
    }
  }
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS)
    wgmma_gemm(const __half* A, const __half* B, __half* C, int M, int N, int K) {
  extern __shared__ unsigned char smem[];
  const uint32_t ring = (ptx::shared_addr(smem) + 1023) & ~1023u;

  // Grouped program order (Triton's matmul tutorial).
  const auto [m0, n0] = grouped_tile<Cfg::BM, Cfg::BN>(blockIdx.x, M, N);

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, wg = warp / 4;
  float acc[Cfg::MREP][Cfg::ACC];
#pragma unroll
  for (int r = 0; r < Cfg::MREP; ++r)
#pragma unroll
    for (int i = 0; i < Cfg::ACC; ++i) acc[r][i] = 0.0f;

  const int k_tiles = (K + Cfg::BK - 1) / Cfg::BK;
  // Prologue: steps 0..AHEAD-1 in flight, a group committed for each even when empty, so
  // that "step kt has landed" is always "at most AHEAD - 1 groups pending" below.
#pragma unroll
  for (int s = 0; s < Cfg::AHEAD; ++s) {
    if (s < k_tiles)
      issue_copies<Cfg>(A, B, M, N, K, m0, n0, s * Cfg::BK, tid, ring + s * Cfg::STAGE_BYTES);
    ptx::cp_async_commit();
  }
  for (int kt = 0; kt < k_tiles; ++kt) {
    ptx::cp_async_wait<Cfg::AHEAD - 1>();
    ptx::fence_proxy_async();
    __syncthreads();
    const int next = kt + Cfg::AHEAD;
    if (next < k_tiles)
      issue_copies<Cfg>(A, B, M, N, K, m0, n0, next * Cfg::BK, tid,
                        ring + (next % Cfg::STAGES) * Cfg::STAGE_BYTES);
    ptx::cp_async_commit();
#pragma unroll
    for (int r = 0; r < Cfg::MREP; ++r) fence_registers(acc[r]);
    ptx::wgmma_fence();
    wgmma_block_step<Cfg>(acc, ring + (kt % Cfg::STAGES) * Cfg::STAGE_BYTES, wg);
    ptx::wgmma_commit();
    ptx::wgmma_wait<Cfg::WAIT>();
#pragma unroll
    for (int r = 0; r < Cfg::MREP; ++r) fence_registers(acc[r]);
  }
  ptx::wgmma_wait<0>();
#pragma unroll
  for (int r = 0; r < Cfg::MREP; ++r) fence_registers(acc[r]);
  ptx::cp_async_wait<0>();  // only empty groups remain; leave nothing in flight

  // Epilogue straight from the fragments, as in the mma.sync study.
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int r = 0; r < Cfg::MREP; ++r) {
    const int row = m0 + wg * Cfg::WG_M + r * 64 + (warp % 4) * 16 + g;
#pragma unroll
    for (int j = 0; j < Cfg::BN / 8; ++j) {
      const int col = n0 + j * 8 + 2 * t;
      if (col >= N) continue;
      if (row < M)
        *reinterpret_cast<__half2*>(C + (size_t)row * N + col) =
            __floats2half2_rn(acc[r][4 * j], acc[r][4 * j + 1]);
      if (row + 8 < M)
        *reinterpret_cast<__half2*>(C + (size_t)(row + 8) * N + col) =
            __floats2half2_rn(acc[r][4 * j + 2], acc[r][4 * j + 3]);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Instantiations
// ---------------------------------------------------------------------------------------
template <class Cfg>
Entry make_entry() {
  char name[64];
  snprintf(name, sizeof name, "%dx%dx%d %dwg %dst", Cfg::BM, Cfg::BN, Cfg::BK, Cfg::WARPGROUPS,
           Cfg::STAGES);
  Entry e{Cfg::WAIT == 0 ? "wait0" : "wait1", name, wgmma_gemm<Cfg>, Cfg::THREADS,
          Cfg::SMEM_BYTES, Cfg::BM, Cfg::BN};
  CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(e.kernel),
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, e.smem));
  return e;
}

int main() {
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  printf("device: %s (sm_%d%d, %d SMs, %zu KB shared per block opt-in)\n", prop.name,
         prop.major, prop.minor, prop.multiProcessorCount, prop.sharedMemPerBlockOptin / 1024);
  if (prop.major != 9) {
    fprintf(stderr, "wgmma needs sm_90a (Hopper)\n");
    return 2;
  }
  cublasHandle_t handle;
  CUBLAS_CHECK(cublasCreate(&handle));
  int cublas_version = 0;
  CUBLAS_CHECK(cublasGetVersion(handle, &cublas_version));
  printf("cuBLAS %d\n", cublas_version);

  // (BM, BN, warpgroups, stages, wait): the tutorial's 128x256x64 at 8 warps and 128x128x64,
  // on one warpgroup (two m64 wgmmas a step) and on two.
  std::vector<Entry> entries = {
      make_entry<Config<128, 256, 2, 3, 0>>(), make_entry<Config<128, 128, 1, 4, 0>>(),
      make_entry<Config<128, 128, 2, 4, 0>>(), make_entry<Config<256, 128, 2, 3, 0>>(),
      make_entry<Config<128, 256, 2, 4, 1>>(), make_entry<Config<128, 128, 1, 5, 1>>(),
      make_entry<Config<128, 128, 2, 5, 1>>(), make_entry<Config<256, 128, 2, 4, 1>>(),
  };
  const int status = run_gemm_harness(entries, handle);
  CUBLAS_CHECK(cublasDestroy(handle));
  return status;
}

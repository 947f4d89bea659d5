// fp16 GEMM on Hopper with the Tensor Memory Accelerator (TMA), mbarriers, warp
// specialization and a persistent grid, written by hand: what each piece is worth beside
// cuBLAS and beside the `cp.async`-fed wgmma study (wgmma_hand.cu), whose harness, shapes,
// checks, wgmma wrappers and shared layouts it shares.
//
//   C[M,N] = A[M,K] @ B[K,N]   A, B row-major fp16; f32 accumulation; C row-major fp16
//
// Shared layouts: those of wgmma_hand.cu, so that its matrix descriptors read them as they are.
//   A  BM rows of BK = 64 halves (128 bytes), 16-byte chunk c of row r at chunk c ^ (r % 8).
//      One TMA box {64 (K), BM (M)} of the A tensor map with CU_TENSOR_MAP_SWIZZLE_128B
//      writes exactly this: TMA's 128-byte swizzle XORs the chunk index (address bits 4-6)
//      with the 128-byte row index within the 1024-byte pattern (bits 7-9), and every stage
//      starts 1024-byte aligned.
//   B  BN / 64 column blocks, each BK rows (K) of 64 halves (N, 128 bytes) with the same
//      swizzle by k % 8. Each column block is one TMA box {64 (N), 64 (K)} of the B tensor map.
// TMA zero-fills what lies outside the tensor (the ragged edges in M, N and K), and counts the
// whole box toward the barrier's transaction bytes either way, so every stage expects the
// same byte count. Stores of C stay masked.
//
// Synchronization: each ring stage has a "full" mbarrier (one arrival: the producer's
// `mbarrier.arrive.expect_tx` with the stage's bytes; the TMA copies complete the
// transaction count) and an "empty" mbarrier (one arrival per consumer thread, made once
// `wgmma.wait_group` has proved that the MMAs reading the stage are complete). Waits are
// `mbarrier.try_wait.parity` on the phase a use of the stage belongs to: use u = step / STAGES
// of stage step % STAGES waits for phase parity u & 1 of "full", and the producer's refill
// for phase parity (u & 1) ^ 1 of "empty" (which a fresh barrier reports complete, so the
// first pass over the ring does not wait). TMA writes and wgmma reads are both async-proxy
// accesses ordered by the mbarriers, so no proxy fence is needed (unlike cp.async's
// generic-proxy writes in wgmma_hand).
//
// Forms (template parameter, one run times all):
//   tma         2 warpgroups, both consume; thread 0 also issues the TMA copies, STAGES - 2
//               steps ahead (one wgmma group stays in flight, so the stage of step k - 1 is
//               released only during step k; refilling it for step k + STAGES - 1 at the top
//               of step k would wait on thread 0's own release).
//   tma_rows8   tma with A in BM / 8 boxes of 8 rows, one lane of warp 0 each: what the
//               boxes rutile's compiler issues for its reordered A tiles cost.
//   ws          warp-specialized: warpgroup 0 produces (one thread issues TMA, the
//               warpgroup gives registers back with `setmaxnreg.dec` to 40), warpgroups 1
//               and 2 consume (`setmaxnreg.inc` to 232), each 64 (or 128) rows of the tile;
//               copies run a whole ring (STAGES steps) ahead.
//   ws_persist  ws on a persistent grid (one block per SM): each block walks tiles
//               blockIdx.x, blockIdx.x + gridDim.x, ... in the grouped order (GROUP_M 8), the
//               producer running on into the next tile's K loop while the consumers run
//               the epilogue. ws is the same kernel on one block per tile.
// Consumers in ws and ws_persist share one BM x BN tile (CUTLASS's "cooperative" schedule).
//
//   bash benches/cuda/wgmma_tma_hand.sh     # builds with nvcc for sm_90a (ptxas -v), then runs

#include <memory>

#include "gemm_harness.cuh"
#include "ptx_copy.cuh"
#include "ptx_tma.cuh"
#include "ptx_wgmma.cuh"

// ---------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------
enum Form { TMA = 0, WS = 1, WS_PERSIST = 2, TMA_ROWS8 = 3 };

template <int BM_, int BN_, int STAGES_, Form FORM_>
struct Config {
  static constexpr int BM = BM_, BN = BN_, BK = 64, STAGES = STAGES_;
  static constexpr Form FORM = FORM_;
  static constexpr bool SPECIALIZED = FORM == WS || FORM == WS_PERSIST;
  // Rows per TMA box of A: the whole tile, or 8 (tma_rows8: the boxes rutile's compiler
  // issues for an A tile whose 8-row groups it reorders).
  static constexpr int A_BOX_ROWS = FORM == TMA_ROWS8 ? 8 : BM;
  static constexpr int CONSUMERS = 2;  // consumer warpgroups
  static constexpr int CONSUMER_THREADS = 128 * CONSUMERS;
  static constexpr int THREADS = CONSUMER_THREADS + (SPECIALIZED ? 128 : 0);
  static constexpr int WG_M = BM / CONSUMERS;  // rows of C per consumer warpgroup
  static constexpr int MREP = WG_M / 64;       // m64 wgmmas per warpgroup and k16 step
  static constexpr int ACC = BN / 2;           // f32 accumulators a thread, per m64
  // Steps the copies run ahead of the MMAs (see the header).
  static constexpr int AHEAD = SPECIALIZED ? STAGES : STAGES - 2;
  static constexpr int A_BYTES = BM * BK * 2, B_BYTES = BK * BN * 2;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;  // also the transaction bytes
  // Dynamic shared memory is only 16-byte aligned: 1 KB of slack to align the ring.
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 1024;
  static_assert(WG_M % 64 == 0, "a warpgroup's rows are whole m64 tiles");
  static_assert(BM <= 256, "one TMA box (at most 256 rows) per A tile");
  static_assert(BN == 128 || BN == 256, "one wgmma spans the block's columns");
  static_assert(AHEAD >= 1, "a ring needs a stage being filled and one being read");
  static_assert(A_BYTES % 1024 == 0 && B_BYTES % 1024 == 0,
                "every box starts on a 1024-byte swizzle pattern");
  static_assert(SMEM_BYTES + 2 * STAGES * 8 <= 227 * 1024, "fits the opt-in shared memory");
};

// The ring in shared memory and its barriers, as 32-bit shared addresses.
template <class Cfg>
struct Ring {
  uint32_t base, bars;  // stages; full barriers then empty barriers
  __device__ uint32_t stage(int s) const { return base + s * Cfg::STAGE_BYTES; }
  __device__ uint32_t full(int s) const { return bars + s * 8; }
  __device__ uint32_t empty(int s) const { return bars + (Cfg::STAGES + s) * 8; }
};

// Barrier set-up by one thread, published to all by the __syncthreads that follows.
template <class Cfg>
__device__ __forceinline__ void init_ring(const Ring<Cfg>& ring, const CUtensorMap* map_a,
                                          const CUtensorMap* map_b) {
  if (threadIdx.x == 0) {
    ptx::prefetch_tensormap(map_a);
    ptx::prefetch_tensormap(map_b);
#pragma unroll
    for (int s = 0; s < Cfg::STAGES; ++s) {
      ptx::mbar_init(ring.full(s), 1);
      ptx::mbar_init(ring.empty(s), Cfg::CONSUMER_THREADS);
    }
    ptx::fence_mbarrier_init();
  }
  __syncthreads();
}

// Producer: step `step` of this block's sequence (k step kt of the tile at m0, n0) into
// stage step % STAGES, once the consumers have released that stage's previous use.
template <class Cfg>
__device__ __forceinline__ void produce(const Ring<Cfg>& ring, const CUtensorMap* map_a,
                                        const CUtensorMap* map_b, int step, int kt, int m0,
                                        int n0) {
  const int s = step % Cfg::STAGES;
  const uint32_t use = static_cast<uint32_t>(step / Cfg::STAGES);
  ptx::mbar_wait(ring.empty(s), (use & 1) ^ 1);
  ptx::mbar_arrive_expect_tx(ring.full(s), Cfg::STAGE_BYTES);
  const int k0 = kt * Cfg::BK;
  ptx::tma_load_2d(ring.stage(s), map_a, ring.full(s), k0, m0);
#pragma unroll
  for (int j = 0; j < Cfg::BN / 64; ++j)
    ptx::tma_load_2d(ring.stage(s) + Cfg::A_BYTES + j * Cfg::BK * 128, map_b, ring.full(s),
                     n0 + 64 * j, k0);
}

// produce, with A in BM / 8 boxes of 8 rows and every box issued by its own lane of warp 0
// (one instruction for all), as rutile's compiler issues them; called by all of warp 0.
template <class Cfg>
__device__ __forceinline__ void produce_rows8(const Ring<Cfg>& ring, const CUtensorMap* map_a,
                                              const CUtensorMap* map_b, int step, int kt, int m0,
                                              int n0) {
  const int s = step % Cfg::STAGES, lane = threadIdx.x % 32;
  const uint32_t use = static_cast<uint32_t>(step / Cfg::STAGES);
  ptx::mbar_wait(ring.empty(s), (use & 1) ^ 1);
  if (lane == 0) ptx::mbar_arrive_expect_tx(ring.full(s), Cfg::STAGE_BYTES);
  __syncwarp();
  const int k0 = kt * Cfg::BK;
  if (lane < Cfg::BM / 8)
    ptx::tma_load_2d(ring.stage(s) + lane * 8 * 128, map_a, ring.full(s), k0, m0 + 8 * lane);
  if (lane < Cfg::BN / 64)
    ptx::tma_load_2d(ring.stage(s) + Cfg::A_BYTES + lane * Cfg::BK * 128, map_b, ring.full(s),
                     n0 + 64 * lane, k0);
}

// One block step of consumer warpgroup `cw`'s MMAs on stage `stage` (descriptors as in
// wgmma_hand.cu).
template <class Cfg>
__device__ __forceinline__ void wgmma_block_step(float (&acc)[Cfg::MREP][Cfg::ACC],
                                                 uint32_t stage, int cw) {
#pragma unroll
  for (int ks = 0; ks < Cfg::BK / 16; ++ks) {
    const uint64_t db =
        ptx::matrix_desc(stage + Cfg::A_BYTES + ks * 16 * 128, Cfg::BK * 128, 1024);
#pragma unroll
    for (int r = 0; r < Cfg::MREP; ++r) {
      const uint64_t da =
          ptx::matrix_desc(stage + (cw * Cfg::WG_M + r * 64) * 128 + ks * 32, 16, 1024);
      if constexpr (Cfg::BN == 256) ptx::wgmma_m64n256k16(acc[r], da, db);
      else ptx::wgmma_m64n128k16(acc[r], da, db);
    }
  }
}

// Consumer: waits for step `step`'s stage, issues its MMAs, keeps one group in flight, and
// releases the stage of step - 1 (whose MMAs the wait has just proved complete).
template <class Cfg>
__device__ __forceinline__ void consume(const Ring<Cfg>& ring, float (&acc)[Cfg::MREP][Cfg::ACC],
                                        int step, bool release_previous, int cw) {
  const int s = step % Cfg::STAGES;
  ptx::mbar_wait(ring.full(s), static_cast<uint32_t>(step / Cfg::STAGES) & 1);
  __syncwarp();  // the wgmma instructions below are .aligned: the warp converged
#pragma unroll
  for (int r = 0; r < Cfg::MREP; ++r) fence_registers(acc[r]);
  ptx::wgmma_fence();
  wgmma_block_step<Cfg>(acc, ring.stage(s), cw);
  ptx::wgmma_commit();
  ptx::wgmma_wait<1>();
#pragma unroll
  for (int r = 0; r < Cfg::MREP; ++r) fence_registers(acc[r]);
  if (release_previous) ptx::mbar_arrive(ring.empty((step + Cfg::STAGES - 1) % Cfg::STAGES));
}

template <class Cfg>
__device__ __forceinline__ void zero(float (&acc)[Cfg::MREP][Cfg::ACC]) {
#pragma unroll
  for (int r = 0; r < Cfg::MREP; ++r)
#pragma unroll
    for (int i = 0; i < Cfg::ACC; ++i) acc[r][i] = 0.0f;
}

// Straight from the fragments, masked at the edges, as in wgmma_hand.cu. `t128` is the
// thread's index within its consumer warpgroup.
template <class Cfg>
__device__ __forceinline__ void store_tile(const float (&acc)[Cfg::MREP][Cfg::ACC], __half* C,
                                           int M, int N, int m0, int n0, int cw, int t128) {
  const int warp = t128 / 32, lane = t128 % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int r = 0; r < Cfg::MREP; ++r) {
    const int row = m0 + cw * Cfg::WG_M + r * 64 + warp * 16 + g;
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
// Kernels
// ---------------------------------------------------------------------------------------

// tma: every warpgroup consumes; thread 0 also produces.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS)
    gemm_tma(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
             __half* C, int M, int N, int K) {
  extern __shared__ unsigned char smem[];
  __shared__ __align__(8) uint64_t bars[2 * Cfg::STAGES];
  const Ring<Cfg> ring{(ptx::shared_addr(smem) + 1023) & ~1023u, ptx::shared_addr(bars)};
  init_ring(ring, &map_a, &map_b);

  const auto [m0, n0] = grouped_tile<Cfg::BM, Cfg::BN>(blockIdx.x, M, N);
  const int tid = threadIdx.x, cw = tid / 128;
  const int k_tiles = (K + Cfg::BK - 1) / Cfg::BK;
  float acc[Cfg::MREP][Cfg::ACC];
  zero<Cfg>(acc);

  constexpr bool ROWS8 = Cfg::FORM == TMA_ROWS8;
  if (ROWS8 ? tid < 32 : tid == 0)
    for (int s = 0; s < Cfg::AHEAD && s < k_tiles; ++s) {
      if constexpr (ROWS8) produce_rows8(ring, &map_a, &map_b, s, s, m0, n0);
      else produce(ring, &map_a, &map_b, s, s, m0, n0);
    }
  for (int kt = 0; kt < k_tiles; ++kt) {
    // Stage of step kt + AHEAD last held step kt - 2, released during step kt - 1.
    if (kt + Cfg::AHEAD < k_tiles) {
      if constexpr (ROWS8) {
        if (tid < 32) produce_rows8(ring, &map_a, &map_b, kt + Cfg::AHEAD, kt + Cfg::AHEAD, m0, n0);
      } else if (tid == 0) {
        produce(ring, &map_a, &map_b, kt + Cfg::AHEAD, kt + Cfg::AHEAD, m0, n0);
      }
    }
    consume(ring, acc, kt, kt > 0, cw);
  }
  ptx::wgmma_wait<0>();
#pragma unroll
  for (int r = 0; r < Cfg::MREP; ++r) fence_registers(acc[r]);
  store_tile<Cfg>(acc, C, M, N, m0, n0, cw, tid % 128);
}

// ws and ws_persist: warpgroup 0 produces, warpgroups 1 and 2 consume; block b takes tiles
// b, b + gridDim.x, ... (one tile where the grid has a block per tile).
template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, 1)
    gemm_ws(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
            __half* C, int M, int N, int K) {
  extern __shared__ unsigned char smem[];
  __shared__ __align__(8) uint64_t bars[2 * Cfg::STAGES];
  const Ring<Cfg> ring{(ptx::shared_addr(smem) + 1023) & ~1023u, ptx::shared_addr(bars)};
  init_ring(ring, &map_a, &map_b);

  const int tid = threadIdx.x, wg = tid / 128;
  const int k_tiles = (K + Cfg::BK - 1) / Cfg::BK;
  const int tiles = ((M + Cfg::BM - 1) / Cfg::BM) * ((N + Cfg::BN - 1) / Cfg::BN);

  if (wg == 0) {
    // 128 x 40 + 256 x 232 = 64512 of the SM's 65536 registers.
    ptx::setmaxnreg_dec<40>();
    if (tid == 0) {
      int step = 0;
      for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const auto [m0, n0] = grouped_tile<Cfg::BM, Cfg::BN>(tile, M, N);
        for (int kt = 0; kt < k_tiles; ++kt, ++step)
          produce(ring, &map_a, &map_b, step, kt, m0, n0);
      }
    }
    // Nothing waits on the producer's exit: the copies it issued complete on the "full"
    // barriers, which the consumers wait for before the block can finish.
    return;
  }

  ptx::setmaxnreg_inc<232>();
  const int cw = wg - 1;
  float acc[Cfg::MREP][Cfg::ACC];
  int step = 0;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const auto [m0, n0] = grouped_tile<Cfg::BM, Cfg::BN>(tile, M, N);
    zero<Cfg>(acc);
    for (int kt = 0; kt < k_tiles; ++kt, ++step) consume(ring, acc, step, kt > 0, cw);
    ptx::wgmma_wait<0>();
#pragma unroll
    for (int r = 0; r < Cfg::MREP; ++r) fence_registers(acc[r]);
    // The tile's last stage: released before the epilogue, so that the producer can refill
    // it for the next tile while the stores run.
    ptx::mbar_arrive(ring.empty((step - 1) % Cfg::STAGES));
    store_tile<Cfg>(acc, C, M, N, m0, n0, cw, tid % 128);
  }
}

// ---------------------------------------------------------------------------------------
// Host: tensor maps and launchers
// ---------------------------------------------------------------------------------------
using TmaKernel = void (*)(CUtensorMap, CUtensorMap, __half*, int, int, int);

// The maps of the last buffers and shape launched, kept so that the timed launches pay for
// the encoding only once.
struct MapCache {
  const __half *A = nullptr, *B = nullptr;
  int M = 0, N = 0, K = 0;
  CUtensorMap map_a, map_b;
};

static int sm_count() {
  int dev = 0, n = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
  return n;
}

template <class Cfg>
Entry make_entry() {
  TmaKernel kernel;
  if constexpr (Cfg::SPECIALIZED) kernel = gemm_ws<Cfg>;
  else kernel = gemm_tma<Cfg>;
  CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::SMEM_BYTES));
  char name[64];
  snprintf(name, sizeof name, "%dx%dx%d %s %dst", Cfg::BM, Cfg::BN, Cfg::BK,
           Cfg::SPECIALIZED ? "1+2wg" : "2wg", Cfg::STAGES);
  const char* variant = Cfg::FORM == TMA         ? "tma"
                        : Cfg::FORM == TMA_ROWS8 ? "tma_rows8"
                        : Cfg::FORM == WS        ? "ws"
                                                 : "ws_persist";
  auto cache = std::make_shared<MapCache>();
  const int sms = sm_count();
  GemmLaunch launch = [kernel, cache, sms](const __half* A, const __half* B, __half* C, int M,
                                           int N, int K) {
    if (cache->A != A || cache->B != B || cache->M != M || cache->N != N || cache->K != K) {
      cache->map_a = make_map(A, M, K, Cfg::A_BOX_ROWS);  // A tile: BM rows of 64 (K)
      cache->map_b = make_map(B, K, N, Cfg::BK);   // B column block: 64 rows (K) of 64 (N)
      cache->A = A, cache->B = B, cache->M = M, cache->N = N, cache->K = K;
    }
    const int tiles = ((M + Cfg::BM - 1) / Cfg::BM) * ((N + Cfg::BN - 1) / Cfg::BN);
    const int grid = Cfg::FORM == WS_PERSIST ? std::min(tiles, sms) : tiles;
    kernel<<<grid, Cfg::THREADS, Cfg::SMEM_BYTES>>>(cache->map_a, cache->map_b, C, M, N, K);
  };
  Entry e{variant, name, nullptr, Cfg::THREADS, Cfg::SMEM_BYTES, Cfg::BM, Cfg::BN};
  e.func = reinterpret_cast<const void*>(kernel);
  e.custom = launch;
  return e;
}

template <Form F>
void add_form(std::vector<Entry>& entries) {
  entries.push_back(make_entry<Config<128, 256, 3, F>>());
  entries.push_back(make_entry<Config<128, 256, 4, F>>());
  entries.push_back(make_entry<Config<128, 128, 4, F>>());
  entries.push_back(make_entry<Config<128, 128, 5, F>>());
  entries.push_back(make_entry<Config<256, 128, 3, F>>());
  entries.push_back(make_entry<Config<256, 128, 4, F>>());
}

int main() {
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  printf("device: %s (sm_%d%d, %d SMs, %zu KB shared per block opt-in)\n", prop.name,
         prop.major, prop.minor, prop.multiProcessorCount, prop.sharedMemPerBlockOptin / 1024);
  if (prop.major != 9) {
    fprintf(stderr, "TMA with wgmma needs sm_90a (Hopper)\n");
    return 2;
  }
  cublasHandle_t handle;
  CUBLAS_CHECK(cublasCreate(&handle));
  int cublas_version = 0;
  CUBLAS_CHECK(cublasGetVersion(handle, &cublas_version));
  printf("cuBLAS %d\n", cublas_version);

  // (BM, BN, stages) for each form: 128x256x64 at 3 and 4 stages, 128x128x64 at 4 and 5,
  // 256x128x64 at 3 and 4.
  std::vector<Entry> entries;
  add_form<TMA>(entries);
  add_form<TMA_ROWS8>(entries);
  if (!getenv("TMA_ONLY")) {
    add_form<WS>(entries);
    add_form<WS_PERSIST>(entries);
  }
  // Ragged in every dimension at a size worth timing (4000 = 31.25 x 128, 62.5 k steps).
  const int status = run_gemm_harness(entries, handle, {{4000, 4000, 4000}});
  CUBLAS_CHECK(cublasDestroy(handle));
  return status;
}

// fp16 GEMM on the tensor cores with the pre-Hopper instructions (`mma.sync`, `ldmatrix`,
// `cp.async`), written by hand: the target that rutile's `dot` lowering is to learn to emit,
// one piece at a time, and the price of each piece beside cuBLAS.
//
//   C[M,N] = A[M,K] @ B[K,N]   A, B row-major fp16; f32 accumulation; C row-major fp16
//
// Three variants, each a template parameter of one kernel, so that each piece is measured on
// its own:
//   naive_smem  operands staged through registers (16-byte global loads, 16-byte shared
//               stores) into rows padded by 16 bytes; fragments read with plain 32-bit (A)
//               and 16-bit (B) shared loads; two barriers per K step; nothing pipelined.
//               This is what rutile emits today (docs/performance.md, "Matmul on the tensor
//               cores").
//   ldmatrix    the same staging into XOR-swizzled tiles (Triton's swizzled shared layout:
//               16-byte chunk ^ (row / per_phase) % max_phase), fragments read with
//               `ldmatrix.x4` (A) and `ldmatrix.x4.trans` (B, contiguous along N).
//   cp_async    the swizzled tiles in a ring of NUM_STAGES buffers filled by 16-byte
//               `cp.async.cg` copies (zero-filled through src-size 0 where masked), one
//               barrier per K step, the copies for step k+S-1 issued before the MMAs of step
//               k (the schedule of Triton's software pipeliner).
// Each on four block configurations of Triton's matmul tutorial (BMxBNxBK, warps, stages): 128x128x32/4/4, 128x256x64/8/3, 64x256x32/4/4, 128x128x64/8/3,
// warps laid out over the block tile as Triton's mma layout lays them (WARPS_M x WARPS_N),
// programs in the tutorial's grouped order (GROUP_M = 8).
//
// Shapes: M is arbitrary; K and N must be multiples of 8 (every global access is a 16-byte
// vector of 8 halves, so a row must start 16-byte aligned and a vector is either wholly
// inside the matrix or wholly outside it). Ragged edges are masked: loads outside the matrix
// give zeros, stores outside it are skipped.
//
// The harness fills A and B with uniform values in [-1, 1), checks every variant and
// configuration against cuBLAS (`cublasGemmEx`, fp16 in and out, f32 compute; cuBLAS itself
// spot-checked against a double-precision host product) by the relative Frobenius error of
// the whole output (failing above 1e-2; the output is poisoned with NaN before each checked
// run), first on small shapes (smaller than a block, fewer K steps than stages), then times
// each with CUDA events: 3 warm-up launches, median of 25, the L2 emptied before each timed
// launch by a 256 MiB device-to-device copy (as rutile's own benchmark does; MMA_FLUSH_L2=0
// turns it off), at M = N = K in {1024, 2048, 4096, 8192} and at 1000 x 3000 x 136 (ragged
// against every block in M, N and K; K = 77 is not a multiple of 8, 136 is). It prints one
// table: size, variant, configuration, TFLOPS, % of cuBLAS, relative and max errors. Exit
// status 1 if any check failed.
//
//   bash benches/cuda/mma_sync_hand.sh     # builds with nvcc for sm_90 (ptxas -v), then runs
#include "gemm_harness.cuh"
#include "ptx_copy.cuh"

// ---------------------------------------------------------------------------------------
// Inline PTX: the fragment loads and the MMA (the copies are in ptx_copy.cuh).
// ---------------------------------------------------------------------------------------
namespace ptx {

// Four 8x8 b16 matrices: lanes 8i..8i+7 give the 16-byte row addresses of matrix i, and
// register i receives matrix i with lane l holding row l/4, columns 2(l%4) and 2(l%4)+1.
// Volatile with a memory clobber so that it is never moved across the barriers and
// `cp.async.wait_group`s that order it after the writes it reads.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// The same, each matrix transposed: lane l holds rows 2(l%4) and 2(l%4)+1 of column l/4,
// which is the `.col` B fragment when the rows in memory run along K.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// d = a b + d for a 16x16 (row) by 16x8 (col) f16 product in f32. Not volatile: it only
// touches registers, so the compiler may schedule it freely.
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace ptx

// ---------------------------------------------------------------------------------------
// Configuration and shared layouts
// ---------------------------------------------------------------------------------------
enum Variant { NAIVE_SMEM = 0, LDMATRIX = 1, CP_ASYNC = 2 };
static const char* const VARIANT_NAMES[] = {"naive_smem", "ldmatrix", "cp_async"};

template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int STAGES_>
struct Config {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;
  static constexpr int WARPS_M = WARPS_M_, WARPS_N = WARPS_N_, STAGES = STAGES_;
  static constexpr int WARPS = WARPS_M * WARPS_N, THREADS = 32 * WARPS;
  static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;  // one warp's tile of C
  static constexpr int MT = WM / 16, NT = WN / 8;              // its m16n8 MMA tiles
  static constexpr int KSTEPS = BK / 16;                       // k16 steps per block step
  static_assert(BM % WARPS_M == 0 && BN % WARPS_N == 0, "warps must tile the block");
  static_assert(WM % 16 == 0 && WN % 16 == 0 && BK % 16 == 0,
                "warp tiles are whole m16 x n16 x k16 (ldmatrix.x4.trans covers two n8 tiles)");
};

// A tile of ROWS rows of ROW_BYTES bytes in shared memory, addressed by 16-byte chunk.
//   SWIZZLE: rows packed; chunk c of row r is stored at chunk c ^ ((r / PER_PHASE) % MAX_PHASE)
//            (Triton's swizzled shared layout for an fp16 mma operand: vec = 8 halves,
//            per_phase = max(1, 128 / row_bytes), max_phase = 8 / per_phase). The 8
//            rows 8i..8i+7 read at one logical chunk (an ldmatrix phase) land in 8
//            different 16-byte bank groups, and so do a quarter-warp's 16-byte stores.
//   padded:  rows ROW_BYTES + 16 apart, which shifts consecutive rows by 4 banks.
template <int ROWS, int ROW_BYTES, bool SWIZZLE>
struct SmemTile {
  static constexpr int CHUNKS = ROW_BYTES / 16;
  static constexpr int PER_PHASE = 128 / ROW_BYTES > 1 ? 128 / ROW_BYTES : 1;
  static constexpr int MAX_PHASE = 8 / PER_PHASE;
  static constexpr int STRIDE = SWIZZLE ? ROW_BYTES : ROW_BYTES + 16;
  static constexpr int BYTES = ROWS * STRIDE;
  static_assert(ROW_BYTES % 16 == 0 && (CHUNKS & (CHUNKS - 1)) == 0,
                "rows are a power-of-two number of 16-byte chunks");
  static_assert(MAX_PHASE <= CHUNKS, "the XOR stays inside the row");

  __device__ static __forceinline__ uint32_t offset(int row, int chunk) {
    if (SWIZZLE) chunk ^= (row / PER_PHASE) % MAX_PHASE;
    return static_cast<uint32_t>(row * STRIDE + chunk * 16);
  }
};

// Everything about one kernel instantiation that both the host and the device need.
template <int VARIANT, class Cfg>
struct Layout {
  static constexpr bool SWIZZLE = VARIANT != NAIVE_SMEM;
  using ATile = SmemTile<Cfg::BM, Cfg::BK * 2, SWIZZLE>;  // A[m][k], contiguous along K
  using BTile = SmemTile<Cfg::BK, Cfg::BN * 2, SWIZZLE>;  // B[k][n], contiguous along N
  // Only the cp.async variant pipelines; the others stage one K step at a time.
  static constexpr int STAGES = VARIANT == CP_ASYNC ? Cfg::STAGES : 1;
  static constexpr int STAGE_BYTES = ATile::BYTES + BTile::BYTES;
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES;
  // Global -> shared: 16-byte chunks spread over the threads, consecutive threads along a
  // row so that a warp's loads coalesce.
  static constexpr int A_CHUNKS = Cfg::BK / 8, B_CHUNKS = Cfg::BN / 8;  // per row
  static constexpr int A_ITERS = Cfg::BM * A_CHUNKS / Cfg::THREADS;
  static constexpr int B_ITERS = Cfg::BK * B_CHUNKS / Cfg::THREADS;
  static_assert(Cfg::BM * A_CHUNKS % Cfg::THREADS == 0 && Cfg::BK * B_CHUNKS % Cfg::THREADS == 0,
                "each thread copies a whole number of chunks of each tile");
  static_assert(VARIANT != CP_ASYNC || Cfg::STAGES >= 2, "a ring needs two buffers");
};

// ---------------------------------------------------------------------------------------
// Kernel pieces
// ---------------------------------------------------------------------------------------

// Where thread `tid`'s j-th chunk of each tile comes from and goes to, for the block step
// starting at k0. A chunk is 8 consecutive halves; with K and N multiples of 8 it is wholly
// inside or wholly outside the matrix.
template <int VARIANT, class Cfg>
struct TileCopy {
  using L = Layout<VARIANT, Cfg>;
  const __half* A;
  const __half* B;
  int M, N, K, m0, n0, tid;

  __device__ __forceinline__ void a_chunk(int j, int k0, const __half*& src, bool& valid,
                                          uint32_t& dst) const {
    const int i = tid + j * Cfg::THREADS, row = i / L::A_CHUNKS, chunk = i % L::A_CHUNKS;
    const int gm = m0 + row, gk = k0 + chunk * 8;
    valid = gm < M && gk < K;
    src = valid ? A + (size_t)gm * K + gk : A;
    dst = L::ATile::offset(row, chunk);
  }
  __device__ __forceinline__ void b_chunk(int j, int k0, const __half*& src, bool& valid,
                                          uint32_t& dst) const {
    const int i = tid + j * Cfg::THREADS, row = i / L::B_CHUNKS, chunk = i % L::B_CHUNKS;
    const int gk = k0 + row, gn = n0 + chunk * 8;
    valid = gk < K && gn < N;
    src = valid ? B + (size_t)gk * N + gn : B;
    dst = L::ATile::BYTES + L::BTile::offset(row, chunk);  // B follows A in a stage
  }

  // Register staging, step 1: 16-byte global loads (zeros where masked).
  __device__ __forceinline__ void load_regs(uint4 (&ra)[L::A_ITERS], uint4 (&rb)[L::B_ITERS],
                                            int k0) const {
#pragma unroll
    for (int j = 0; j < L::A_ITERS; ++j) {
      const __half* src; bool valid; uint32_t dst;
      a_chunk(j, k0, src, valid, dst);
      ra[j] = valid ? *reinterpret_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int j = 0; j < L::B_ITERS; ++j) {
      const __half* src; bool valid; uint32_t dst;
      b_chunk(j, k0, src, valid, dst);
      rb[j] = valid ? *reinterpret_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
    }
  }
  // Register staging, step 2: 16-byte shared stores into the stage at `stage`.
  __device__ __forceinline__ void store_smem(const uint4 (&ra)[L::A_ITERS],
                                             const uint4 (&rb)[L::B_ITERS],
                                             unsigned char* stage, int k0) const {
#pragma unroll
    for (int j = 0; j < L::A_ITERS; ++j) {
      const __half* src; bool valid; uint32_t dst;
      a_chunk(j, k0, src, valid, dst);
      *reinterpret_cast<uint4*>(stage + dst) = ra[j];
    }
#pragma unroll
    for (int j = 0; j < L::B_ITERS; ++j) {
      const __half* src; bool valid; uint32_t dst;
      b_chunk(j, k0, src, valid, dst);
      *reinterpret_cast<uint4*>(stage + dst) = rb[j];
    }
  }
  // cp.async: the same chunks straight into the stage whose shared address is `stage`.
  __device__ __forceinline__ void issue_cp_async(uint32_t stage, int k0) const {
#pragma unroll
    for (int j = 0; j < L::A_ITERS; ++j) {
      const __half* src; bool valid; uint32_t dst;
      a_chunk(j, k0, src, valid, dst);
      ptx::cp_async_16(stage + dst, src, valid);
    }
#pragma unroll
    for (int j = 0; j < L::B_ITERS; ++j) {
      const __half* src; bool valid; uint32_t dst;
      b_chunk(j, k0, src, valid, dst);
      ptx::cp_async_16(stage + dst, src, valid);
    }
  }
};

// One block step of MMAs on the stage at `stage` (generic pointer, for the plain loads) /
// `stage_addr` (its shared address, for ldmatrix). Fragment layouts of
// mma.m16n8k16.row.col with g = lane / 4, t = lane % 4 (PTX ISA, "Matrix Fragments for
// mma.m16n8k16 with floating point type"):
//   A (16x16): a[0] = A[g][2t, 2t+1]    a[1] = A[g+8][2t, 2t+1]
//              a[2] = A[g][2t+8, 2t+9]  a[3] = A[g+8][2t+8, 2t+9]
//   B (16x8):  b[0] = B[2t, 2t+1][g]    b[1] = B[2t+8, 2t+9][g]
//   C (16x8):  c[0], c[1] = C[g][2t, 2t+1]   c[2], c[3] = C[g+8][2t, 2t+1]
// (the lower-indexed element in the low half of each 32-bit register).
template <int VARIANT, class Cfg>
__device__ __forceinline__ void mma_block_step(float (&acc)[Cfg::MT][Cfg::NT][4],
                                               const unsigned char* stage, uint32_t stage_addr,
                                               int wm0, int wn0, int lane) {
  using L = Layout<VARIANT, Cfg>;
  using AT = typename L::ATile;
  using BT = typename L::BTile;
#pragma unroll
  for (int ks = 0; ks < Cfg::KSTEPS; ++ks) {
    uint32_t a[Cfg::MT][4], b[Cfg::NT][2];
    if constexpr (VARIANT == NAIVE_SMEM) {
      const int g = lane / 4, t = lane % 4;
#pragma unroll
      for (int mt = 0; mt < Cfg::MT; ++mt) {
        const unsigned char* p = stage + (wm0 + mt * 16 + g) * AT::STRIDE + (ks * 16 + 2 * t) * 2;
        a[mt][0] = *reinterpret_cast<const uint32_t*>(p);
        a[mt][1] = *reinterpret_cast<const uint32_t*>(p + 8 * AT::STRIDE);
        a[mt][2] = *reinterpret_cast<const uint32_t*>(p + 16);
        a[mt][3] = *reinterpret_cast<const uint32_t*>(p + 8 * AT::STRIDE + 16);
      }
      // B's fragment pairs run along K, across rows: two 16-bit loads per register.
#pragma unroll
      for (int nt = 0; nt < Cfg::NT; ++nt) {
        const unsigned char* p =
            stage + AT::BYTES + (ks * 16 + 2 * t) * BT::STRIDE + (wn0 + nt * 8 + g) * 2;
        auto h = [&](int dk) {
          return static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(p + dk * BT::STRIDE));
        };
        b[nt][0] = h(0) | (h(1) << 16);
        b[nt][1] = h(8) | (h(9) << 16);
      }
    } else {
      // A: one x4 per m16 tile. Lane l addresses row l % 16 at k-chunk l / 16, so matrices
      // 0..3 are (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15),
      // (rows 8-15, k 8-15): a[0..3] above.
#pragma unroll
      for (int mt = 0; mt < Cfg::MT; ++mt) {
        const int row = wm0 + mt * 16 + lane % 16, chunk = ks * 2 + lane / 16;
        ptx::ldmatrix_x4(a[mt], stage_addr + AT::offset(row, chunk));
      }
      // B: one x4.trans per pair of n8 tiles. Lane l addresses k-row l % 16 at n-chunk
      // l / 16, so matrices 0..3 are (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15),
      // (k 8-15, n 8-15), each transposed: b[0], b[1] of the first tile, then the second's.
#pragma unroll
      for (int np = 0; np < Cfg::NT / 2; ++np) {
        const int row = ks * 16 + lane % 16, chunk = (wn0 + np * 16) / 8 + lane / 16;
        uint32_t r[4];
        ptx::ldmatrix_x4_trans(r, stage_addr + AT::BYTES + BT::offset(row, chunk));
        b[2 * np][0] = r[0];
        b[2 * np][1] = r[1];
        b[2 * np + 1][0] = r[2];
        b[2 * np + 1][1] = r[3];
      }
    }
#pragma unroll
    for (int mt = 0; mt < Cfg::MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < Cfg::NT; ++nt) ptx::mma_m16n8k16(acc[mt][nt], a[mt], b[nt]);
  }
}

// No __restrict__: the operands are read with plain `ld.global` as rutile emits them, not
// through the non-coherent path that a restrict-qualified const pointer would allow.
template <int VARIANT, class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS)
    mma_sync_gemm(const __half* A, const __half* B, __half* C, int M, int N, int K) {
  using L = Layout<VARIANT, Cfg>;
  extern __shared__ __align__(128) unsigned char smem[];

  // Grouped program order (Triton's matmul tutorial).
  const auto [m0, n0] = grouped_tile<Cfg::BM, Cfg::BN>(blockIdx.x, M, N);

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  // Warps row-major over a WARPS_M x WARPS_N grid, each owning a WM x WN tile of C.
  const int wm0 = (warp / Cfg::WARPS_N) * Cfg::WM, wn0 = (warp % Cfg::WARPS_N) * Cfg::WN;

  const TileCopy<VARIANT, Cfg> copy{A, B, M, N, K, m0, n0, tid};
  float acc[Cfg::MT][Cfg::NT][4] = {};
  const int k_tiles = (K + Cfg::BK - 1) / Cfg::BK;
  const uint32_t smem_addr = ptx::shared_addr(smem);

  if constexpr (VARIANT == CP_ASYNC) {
    constexpr int S = L::STAGES;
    // Prologue: steps 0..S-2 in flight. A group is committed even when empty so that
    // "group kt is complete" is always "at most S-2 groups pending" below.
#pragma unroll
    for (int s = 0; s < S - 1; ++s) {
      if (s < k_tiles) copy.issue_cp_async(smem_addr + s * L::STAGE_BYTES, s * Cfg::BK);
      ptx::cp_async_commit();
    }
    int read_stage = 0, write_stage = S - 1;
    for (int kt = 0; kt < k_tiles; ++kt) {
      // This thread's copies for step kt have landed; the barrier makes everyone's visible
      // and also says every warp is done with step kt-1's buffer, the one refilled next.
      ptx::cp_async_wait<S - 2>();
      __syncthreads();
      const int next = kt + S - 1;
      if (next < k_tiles)
        copy.issue_cp_async(smem_addr + write_stage * L::STAGE_BYTES, next * Cfg::BK);
      ptx::cp_async_commit();
      mma_block_step<VARIANT, Cfg>(acc, smem + read_stage * L::STAGE_BYTES,
                                   smem_addr + read_stage * L::STAGE_BYTES, wm0, wn0, lane);
      read_stage = read_stage + 1 == S ? 0 : read_stage + 1;
      write_stage = write_stage + 1 == S ? 0 : write_stage + 1;
    }
    ptx::cp_async_wait<0>();  // only empty groups remain; leave nothing in flight
  } else {
    // Register-staged, one step at a time: load, store, barrier, MMAs, barrier.
    for (int kt = 0; kt < k_tiles; ++kt) {
      uint4 ra[L::A_ITERS], rb[L::B_ITERS];
      copy.load_regs(ra, rb, kt * Cfg::BK);
      copy.store_smem(ra, rb, smem, kt * Cfg::BK);
      __syncthreads();
      mma_block_step<VARIANT, Cfg>(acc, smem, smem_addr, wm0, wn0, lane);
      __syncthreads();
    }
  }

  // Epilogue straight from the accumulator fragments: each lane writes two halves (4 bytes)
  // per row, a quad of lanes 16 contiguous bytes (half a 32-byte sector per instruction).
  // Triton and rutile first convert the tile through shared memory to 16-byte stores; that
  // is left out here, where it is the same for every variant. N even keeps the pairs
  // aligned, and col < N then covers col + 1 as well.
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mt = 0; mt < Cfg::MT; ++mt) {
    const int row = m0 + wm0 + mt * 16 + g;
#pragma unroll
    for (int nt = 0; nt < Cfg::NT; ++nt) {
      const int col = n0 + wn0 + nt * 8 + 2 * t;
      if (col >= N) continue;
      if (row < M)
        *reinterpret_cast<__half2*>(C + (size_t)row * N + col) =
            __floats2half2_rn(acc[mt][nt][0], acc[mt][nt][1]);
      if (row + 8 < M)
        *reinterpret_cast<__half2*>(C + (size_t)(row + 8) * N + col) =
            __floats2half2_rn(acc[mt][nt][2], acc[mt][nt][3]);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Instantiations
// ---------------------------------------------------------------------------------------
template <int VARIANT, class Cfg>
Entry make_entry() {
  using L = Layout<VARIANT, Cfg>;
  char name[64];
  snprintf(name, sizeof name, "%dx%dx%d %dw(%dx%d) %dst", Cfg::BM, Cfg::BN, Cfg::BK, Cfg::WARPS,
           Cfg::WARPS_M, Cfg::WARPS_N, L::STAGES);
  Entry e{VARIANT_NAMES[VARIANT], name, mma_sync_gemm<VARIANT, Cfg>, Cfg::THREADS, L::SMEM_BYTES, Cfg::BM, Cfg::BN};
  if (e.smem > 48 * 1024)
    CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(e.kernel),
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, e.smem));
  return e;
}

// Triton's matmul tutorial configurations (BM, BN, BK, warps as Triton's mma layout lays
// them out, stages).
using Cfg128x128x32 = Config<128, 128, 32, 2, 2, 4>;
using Cfg128x256x64 = Config<128, 256, 64, 2, 4, 3>;
using Cfg64x256x32 = Config<64, 256, 32, 1, 4, 4>;
using Cfg128x128x64 = Config<128, 128, 64, 2, 4, 3>;

template <int VARIANT>
void add_variant(std::vector<Entry>& v) {
  v.push_back(make_entry<VARIANT, Cfg128x128x32>());
  v.push_back(make_entry<VARIANT, Cfg128x256x64>());
  v.push_back(make_entry<VARIANT, Cfg64x256x32>());
  v.push_back(make_entry<VARIANT, Cfg128x128x64>());
}

int main() {
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  printf("device: %s (sm_%d%d, %d SMs, %zu KB shared per block opt-in)\n", prop.name,
         prop.major, prop.minor, prop.multiProcessorCount, prop.sharedMemPerBlockOptin / 1024);
  if (prop.major < 8) {
    fprintf(stderr, "mma.sync.m16n8k16, ldmatrix and cp.async need sm_80 or later\n");
    return 2;
  }
  cublasHandle_t handle;
  CUBLAS_CHECK(cublasCreate(&handle));
  int cublas_version = 0;
  CUBLAS_CHECK(cublasGetVersion(handle, &cublas_version));
  printf("cuBLAS %d\n", cublas_version);

  std::vector<Entry> entries;
  add_variant<NAIVE_SMEM>(entries);
  add_variant<LDMATRIX>(entries);
  add_variant<CP_ASYNC>(entries);

  const int status = run_gemm_harness(entries, handle);
  CUBLAS_CHECK(cublasDestroy(handle));
  return status;
}

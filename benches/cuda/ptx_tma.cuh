// Inline PTX for the tensor memory accelerator (TMA) and what orders it, shared by the Hopper
// studies (wgmma_tma_hand.cu, attention_hand.cu): mbarriers, 2-D tensor copies, register
// reconfiguration, and the host's tensor-map encoding of row-major fp16 matrices.
#pragma once

#include <cuda.h>  // CUtensorMap and its enums; the encoder comes through the runtime, no -lcuda
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "gemm_harness.cuh"  // CUDA_CHECK

// ---------------------------------------------------------------------------------------
// Inline PTX: mbarriers, TMA, register reconfiguration.
// ---------------------------------------------------------------------------------------
namespace ptx {

// An mbarrier (8 bytes of shared memory) expecting `count` arrivals a phase.
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes the initializations visible to the other threads and to the async proxy (the TMA
// unit's complete_tx) before the barrier that publishes them.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival, and `bytes` more transaction bytes expected this phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// True once the phase of parity `parity` has completed (try_wait may also return false
// after a hardware time limit: callers loop).
__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.b32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}

// One box of a 2-D tensor map into shared memory at `dst` (1024-byte aligned for the
// 128-byte swizzle), its bytes counted on the mbarrier `bar`. c0 is the innermost
// (contiguous) coordinate, in elements; out-of-bounds elements are zero-filled.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                            int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}
// Fetches the descriptor (a __grid_constant__ parameter) ahead of the first copy.
__device__ __forceinline__ void prefetch_tensormap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// The executing warpgroup's per-thread register budget, lowered (a producer that needs few)
// or raised (consumers that hold the accumulators); all of a warpgroup executes it.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

}  // namespace ptx

// ---------------------------------------------------------------------------------------
// Host: tensor maps
// ---------------------------------------------------------------------------------------
using EncodeTiled = decltype(&cuTensorMapEncodeTiled);

// The driver's cuTensorMapEncodeTiled, looked up through the runtime (no -lcuda link).
static EncodeTiled encode_tiled() {
  static EncodeTiled fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                cudaEnableDefault, &q));
#else
    CUDA_CHECK(cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &p, cudaEnableDefault, &q));
#endif
    if (q != cudaDriverEntryPointSuccess || p == nullptr) {
      fprintf(stderr, "cuTensorMapEncodeTiled not found in the driver\n");
      exit(2);
    }
    return reinterpret_cast<EncodeTiled>(p);
  }();
  return fn;
}

// A row-major fp16 matrix of `rows` x `cols` read in boxes of box_rows x 64 halves (128
// bytes, the span of the 128-byte swizzle), zero-filled out of bounds.
static CUtensorMap make_map(const __half* p, int rows, int cols, int box_rows) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
  const cuuint64_t strides[1] = {(cuuint64_t)cols * sizeof(__half)};  // bytes, rows
  const cuuint32_t box[2] = {64, (cuuint32_t)box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode_tiled()(
      &map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, const_cast<__half*>(p), dims, strides, box,
      elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "cuTensorMapEncodeTiled failed (%d) for %d x %d, box %d x 64\n", (int)r,
            rows, cols, box_rows);
    exit(2);
  }
  return map;
}

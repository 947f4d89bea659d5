// cp.async in inline PTX, shared by the hand-written GEMM studies. Shared addresses are
// 32-bit `.shared` window offsets, global ones 64-bit `.global` addresses.
#pragma once

#include <cstdint>

namespace ptx {

__device__ __forceinline__ uint32_t shared_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1 (`.cg`). With src-size 0 nothing is read and the
// 16 shared bytes are zero-filled: the mask of a masked load. The source must still be an
// address the kernel may name, so a masked copy is given the matrix's base.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  const int src_size = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :
               : "r"(dst), "l"(__cvta_generic_to_global(src)), "r"(src_size)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Wait until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace ptx

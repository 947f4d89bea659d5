// Times `softmax_kernel` from PTX or cubin files with rutile's parameter layout (output,
// input, input row stride, output row stride, rows, columns) at 4096 x 1024 f32, 2 warps:
// rutile's generated kernel and a hand-written one (softmax_hand.cu) loaded and launched the
// same way, through the driver API, timed with CUDA events after a 256 MiB copy.
//
//   RUTILE_DUMP=dump cargo run --release --example benchmark   # writes rutile's PTX
//   nvcc -O3 -arch=sm_90 -cubin benches/cuda/softmax_hand.cu -o hand.cubin
//   nvcc -O3 -arch=sm_90 -o ptx_time benches/cuda/ptx_time.cu -lcuda
//   ./ptx_time RUTILE.ptx hand.cubin
//
// Environment: FLUSH_ALLOC_MB (size of each flush buffer, 256 by default; the flush copies
// 256 MiB of it), SMEM (dynamic shared bytes at launch, 16 as rutile's kernel asks), CARVE
// (CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, unset by default), WARPS (warps per
// program, 2 by default).
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cmath>
#include <string>
#include <fstream>
#include <sstream>
#include <cuda.h>
#include <cstdlib>
#include <cuda_runtime.h>
#define CK(x) do{CUresult e=(x); if(e){const char*m; cuGetErrorString(e,&m); printf("%s:%d %s\n",__FILE__,__LINE__,m); exit(1);} }while(0)
const int M = 4096, N = 1024;
int main(int argc, char** argv) {
  cudaFree(0);
  float *fa, *fb, *in, *out;
  size_t fl = getenv("FLUSH_ALLOC_MB") ? atoi(getenv("FLUSH_ALLOC_MB")) : 256; cudaMalloc(&fa, fl << 20); cudaMalloc(&fb, fl << 20); cudaMalloc(&in, M * N * 4); cudaMalloc(&out, M * N * 4); printf("flush buffers %zu MiB, in %p out %p\n", fl, in, out);
  std::vector<float> h(M * N); for (size_t i = 0; i < h.size(); i++) h[i] = sinf(i * 0.37f) * 3;
  cudaMemcpy(in, h.data(), M * N * 4, cudaMemcpyHostToDevice);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  int warps = getenv("WARPS") ? atoi(getenv("WARPS")) : 2; int smem = getenv("SMEM") ? atoi(getenv("SMEM")) : 16; int carve = getenv("CARVE") ? atoi(getenv("CARVE")) : -1; printf("dynamic smem %d carveout %d\n", smem, carve);
  for (int pass = 0; pass < 2; pass++)
  for (int a = 1; a < argc; a++) {
    std::ifstream f(argv[a]); std::stringstream ss; ss << f.rdbuf(); std::string ptx = ss.str();
    CUmodule mod; CK(cuModuleLoadData(&mod, ptx.c_str())); CUfunction fn; CK(cuModuleGetFunction(&fn, mod, "softmax_kernel"));
    if (carve >= 0) CK(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, carve));
    int regs; cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn);
    int s = N, nr = M; CUdeviceptr o = (CUdeviceptr)out, i = (CUdeviceptr)in;
    void* args[] = {&o, &i, &s, &s, &nr, &s};
    std::vector<float> t;
    for (int r = 0; r < 60; r++) {
      cudaMemcpyAsync(fb, fa, 256 << 20, cudaMemcpyDeviceToDevice);  // the flush
      cudaEventRecord(e0); CK(cuLaunchKernel(fn, M, 1, 1, 32 * warps, 1, 1, smem, 0, args, 0)); cudaEventRecord(e1); cudaEventSynchronize(e1);
      float ms; cudaEventElapsedTime(&ms, e0, e1); if (r >= 10) t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    std::vector<float> res(M * N); cudaMemcpy(res.data(), out, M * N * 4, cudaMemcpyDeviceToHost);
    double err = 0; for (int r = 0; r < M; r += 97) { double mx = -1e30, sm = 0; for (int c = 0; c < N; c++) mx = std::max(mx, (double)h[r*N+c]); for (int c = 0; c < N; c++) sm += exp(h[r*N+c]-mx); for (int c = 0; c < N; c++) err = std::max(err, fabs(res[r*N+c] - exp(h[r*N+c]-mx)/sm)); }
    double ms = t[t.size() / 2];
    int nb; cuOccupancyMaxActiveBlocksPerMultiprocessor(&nb, fn, 32 * warps, smem);
    printf("%-22s blocks/SM %d regs %d  %.2f us  %.0f GB/s  err %.1e\n", argv[a], nb, regs, ms * 1e3, 2.0 * M * N * 4 / (ms * 1e-3) / 1e9, err);
    cudaMemset(out, 0, M * N * 4);
    cuModuleUnload(mod);
  }
}

// Times `_seeded_dropout` from PTX files with rutile's parameter layout (x, output,
// n_elements, p, seed) at 2^26 and 2^28 f32 elements, 4 warps, a program per 1024
// elements, beside a device-to-device copy of the same bytes (the ceiling), each launch
// after a 256 MiB flush, timed with CUDA events (median of 40 after 5 warm-ups). Every
// file's output is compared bit for bit with the first file's.
//
//   RUTILE_PTX_DIR=$PWD cargo test --release -p rutile-ptx --test seeds seeded_dropout_takes
//   mv _seeded_dropout.ptx gen.ptx
//   python3 benches/cuda/dropout_variants.py gen.ptx        # writes the hand-edited forms
//   nvcc -O3 -arch=sm_90 -o dropout_time benches/cuda/dropout_time.cu -lcuda
//   ./dropout_time gen.ptx rcp.ptx sr.ptx both.ptx
#include <cstdio>
#include <vector>
#include <algorithm>
#include <string>
#include <fstream>
#include <sstream>
#include <cuda.h>
#include <cuda_runtime.h>
#define CK(x) do{CUresult e=(x); if(e){const char*m; cuGetErrorString(e,&m); printf("%s:%d %s\n",__FILE__,__LINE__,m); exit(1);} }while(0)

static float median(std::vector<float> t) { std::sort(t.begin(), t.end()); return t[t.size() / 2]; }

int main(int argc, char** argv) {
  cudaFree(0);
  const size_t flush = 256 << 20; void *fa, *fb; cudaMalloc(&fa, flush); cudaMalloc(&fb, flush);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  for (int log2n : {26, 28}) {
    const size_t n = size_t(1) << log2n;
    float *x, *out, *copy; cudaMalloc(&x, n * 4); cudaMalloc(&out, n * 4); cudaMalloc(&copy, n * 4);
    std::vector<float> h(n); uint32_t s = 12345;
    for (auto& v : h) { s = s * 1664525u + 1013904223u; v = ((s >> 8) * (1.0f / 16777216.0f)) * 4.0f - 2.0f; if (v == 0) v = 1; }
    cudaMemcpy(x, h.data(), n * 4, cudaMemcpyHostToDevice);
    auto timed = [&](auto launch) {
      std::vector<float> t;
      for (int r = 0; r < 45; r++) {
        cudaMemcpyAsync(fb, fa, flush, cudaMemcpyDeviceToDevice);
        cudaEventRecord(e0); launch(); cudaEventRecord(e1); cudaEventSynchronize(e1);
        float ms; cudaEventElapsedTime(&ms, e0, e1); if (r >= 5) t.push_back(ms);
      }
      return median(t);
    };
    double bytes = 2.0 * n * 4;
    float copy_ms = timed([&] { cudaMemcpyAsync(copy, x, n * 4, cudaMemcpyDeviceToDevice); });
    double ceiling = bytes / (copy_ms * 1e-3) / 1e9;
    printf("2^%d elements: copy of the same bytes %.1f us, %.0f GB/s\n", log2n, copy_ms * 1e3, ceiling);
    std::vector<uint32_t> first;
    for (int a = 1; a < argc; a++) {
      std::ifstream f(argv[a]); std::stringstream ss; ss << f.rdbuf(); std::string ptx = ss.str();
      CUmodule mod; CK(cuModuleLoadData(&mod, ptx.c_str())); CUfunction fn; CK(cuModuleGetFunction(&fn, mod, "_seeded_dropout"));
      int regs; cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn);
      CUdeviceptr xp = (CUdeviceptr)x, op = (CUdeviceptr)out; int ni = int(n); float p = 0.5f; int seed = 123;
      void* args[] = {&xp, &op, &ni, &p, &seed};
      unsigned grid = unsigned((n + 1023) / 1024);
      cudaMemset(out, 0, n * 4);
      float ms = timed([&] { CK(cuLaunchKernel(fn, grid, 1, 1, 128, 1, 1, 0, 0, args, 0)); });
      std::vector<uint32_t> got(n); cudaMemcpy(got.data(), out, n * 4, cudaMemcpyDeviceToHost);
      size_t differ = 0, kept = 0;
      if (first.empty()) first = got;
      for (size_t i = 0; i < n; i++) { differ += got[i] != first[i]; kept += got[i] != 0; }
      double gbs = bytes / (ms * 1e-3) / 1e9;
      printf("  %-28s regs %3d  %8.1f us  %5.0f GB/s  %5.1f%% of the copy  kept %.4f  differ from the first %zu\n",
             argv[a], regs, ms * 1e3, gbs, 100 * gbs / ceiling, double(kept) / n, differ);
      cuModuleUnload(mod);
    }
    cudaFree(x); cudaFree(out); cudaFree(copy);
  }
}

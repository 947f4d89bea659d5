// Hand-written CUDA softmax, 4096 x 1024 f32, with each combination of load and store cache
// hints: the bound that rutile's generated kernel is compared with at N = 1024
// (docs/performance.md, "Hand-written CUDA at N = 1024"). Timed as rutile's benchmark times:
// CUDA events, median of 50 after 10 warm-up runs, the L2 emptied by a 256 MiB
// device-to-device copy before each; the ceiling is a 1 GiB device-to-device copy.
//
//   nvcc -O3 -arch=sm_90 -o softmax_hints benches/cuda/softmax_hints.cu && ./softmax_hints
//
// Load hints (LD): 0 plain, 1 `.cs` (streaming), 2 `.nc` (read-only path), 3 `.lu`,
// 4 `.cg`, 5 an L2 evict-first policy. Store hints (ST): 0 plain, 1 `.cs`, 2 an L2
// evict-last policy, 3 `.wt`, 4 `.cg`, 5 an L2 evict-first policy.
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cmath>
#include <cuda_runtime.h>
#define CK(x) do{cudaError_t e=(x); if(e){printf("%s:%d %s\n",__FILE__,__LINE__,cudaGetErrorString(e)); exit(1);} }while(0)
const int M = 4096, N = 1024;

template<int LD> __device__ __forceinline__ float4 ld4(const float4* p) {
  float4 v;
  if (LD == 0) asm volatile("ld.global.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v.x),"=f"(v.y),"=f"(v.z),"=f"(v.w) : "l"(p));
  else if (LD == 1) asm volatile("ld.global.cs.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v.x),"=f"(v.y),"=f"(v.z),"=f"(v.w) : "l"(p));
  else if (LD == 2) asm volatile("ld.global.nc.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v.x),"=f"(v.y),"=f"(v.z),"=f"(v.w) : "l"(p));
  else if (LD == 5) asm volatile("{ .reg .b64 pol; createpolicy.fractional.L2::evict_first.b64 pol, 1.0; ld.global.L2::cache_hint.v4.f32 {%0,%1,%2,%3}, [%4], pol; }" : "=f"(v.x),"=f"(v.y),"=f"(v.z),"=f"(v.w) : "l"(p));
  else if (LD == 3) asm volatile("ld.global.lu.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v.x),"=f"(v.y),"=f"(v.z),"=f"(v.w) : "l"(p));
  else if (LD == 4) asm volatile("ld.global.cg.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v.x),"=f"(v.y),"=f"(v.z),"=f"(v.w) : "l"(p));
  return v;
}
template<int ST> __device__ __forceinline__ void st4(float4* p, float4 v) {
  if (ST == 0) asm volatile("st.global.v4.f32 [%0], {%1,%2,%3,%4};" :: "l"(p),"f"(v.x),"f"(v.y),"f"(v.z),"f"(v.w) : "memory");
  else if (ST == 1) asm volatile("st.global.cs.v4.f32 [%0], {%1,%2,%3,%4};" :: "l"(p),"f"(v.x),"f"(v.y),"f"(v.z),"f"(v.w) : "memory");
  else if (ST == 2) asm volatile("{ .reg .b64 pol; createpolicy.fractional.L2::evict_last.b64 pol, 1.0; st.global.L2::cache_hint.v4.f32 [%0], {%1,%2,%3,%4}, pol; }" :: "l"(p),"f"(v.x),"f"(v.y),"f"(v.z),"f"(v.w) : "memory");
  else if (ST == 5) asm volatile("{ .reg .b64 pol; createpolicy.fractional.L2::evict_first.b64 pol, 1.0; st.global.L2::cache_hint.v4.f32 [%0], {%1,%2,%3,%4}, pol; }" :: "l"(p),"f"(v.x),"f"(v.y),"f"(v.z),"f"(v.w) : "memory");
  else if (ST == 3) asm volatile("st.global.wt.v4.f32 [%0], {%1,%2,%3,%4};" :: "l"(p),"f"(v.x),"f"(v.y),"f"(v.z),"f"(v.w) : "memory");
  else if (ST == 4) asm volatile("st.global.cg.v4.f32 [%0], {%1,%2,%3,%4};" :: "l"(p),"f"(v.x),"f"(v.y),"f"(v.z),"f"(v.w) : "memory");
}

template<int W, int LD, int ST, bool COPY>
__global__ void softmax(float* out, const float* in, int n) {
  constexpr int T = 32 * W, PER = N / 4 / T;  // float4 per thread
  const float4* row = (const float4*)(in + (size_t)blockIdx.x * n);
  float4* orow = (float4*)(out + (size_t)blockIdx.x * n);
  float4 v[PER];
  #pragma unroll
  for (int i = 0; i < PER; i++) v[i] = ld4<LD>(row + threadIdx.x + i * T);
  if (COPY) {
    #pragma unroll
    for (int i = 0; i < PER; i++) st4<ST>(orow + threadIdx.x + i * T, v[i]);
    return;
  }
  __shared__ float sh[W];
  float m = -INFINITY;
  #pragma unroll
  for (int i = 0; i < PER; i++) m = fmaxf(m, fmaxf(fmaxf(v[i].x, v[i].y), fmaxf(v[i].z, v[i].w)));
  for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(~0u, m, o));
  if (W > 1) { if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = m; __syncthreads(); m = sh[0]; for (int w = 1; w < W; w++) m = fmaxf(m, sh[w]); __syncthreads(); }
  float s = 0;
  #pragma unroll
  for (int i = 0; i < PER; i++) { v[i].x = __expf(v[i].x - m); v[i].y = __expf(v[i].y - m); v[i].z = __expf(v[i].z - m); v[i].w = __expf(v[i].w - m); s += v[i].x + v[i].y + v[i].z + v[i].w; }
  for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(~0u, s, o);
  if (W > 1) { if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = s; __syncthreads(); s = 0; for (int w = 0; w < W; w++) s += sh[w]; }
  #pragma unroll
  for (int i = 0; i < PER; i++) { float4 r = v[i]; r.x /= s; r.y /= s; r.z /= s; r.w /= s; st4<ST>(orow + threadIdx.x + i * T, r); }
}

float *fa, *fb, *in, *out;
cudaEvent_t e0, e1;
template<class F> float bench(F f, bool flush = true) {
  std::vector<float> t;
  for (int r = 0; r < 60; r++) {
    if (flush) CK(cudaMemcpyAsync(fb, fa, 256 << 20, cudaMemcpyDeviceToDevice));
    cudaEventRecord(e0); f(); cudaEventRecord(e1); CK(cudaEventSynchronize(e1));
    float ms; cudaEventElapsedTime(&ms, e0, e1); if (r >= 10) t.push_back(ms);
  }
  std::sort(t.begin(), t.end()); return t[t.size() / 2];
}
template<int W, int LD, int ST, bool COPY> void run(const char* name, double ceil) {
  float ms = bench([] { softmax<W, LD, ST, COPY><<<M, 32 * W>>>(out, in, N); });
  CK(cudaGetLastError());
  double gbs = 2.0 * M * N * 4 / (ms * 1e-3) / 1e9;
  printf("%-28s w%-2d ld%d st%d  %.2f us  %.0f GB/s  %.1f%%\n", name, W, LD, ST, ms * 1e3, gbs, 100 * gbs / ceil);
}
int main() {
  CK(cudaMalloc(&fa, 1 << 30)); CK(cudaMalloc(&fb, 1 << 30)); CK(cudaMalloc(&in, M * N * 4)); CK(cudaMalloc(&out, M * N * 4));
  cudaMemset(fa, 0, 1 << 30); cudaMemset(fb, 0, 1 << 30);
  std::vector<float> h(M * N); for (size_t i = 0; i < h.size(); i++) h[i] = sinf(i * 0.37f) * 3;
  cudaMemcpy(in, h.data(), M * N * 4, cudaMemcpyHostToDevice);
  cudaEventCreate(&e0); cudaEventCreate(&e1);
  float big = bench([] { cudaMemcpyAsync(fb, fa, 1 << 30, cudaMemcpyDeviceToDevice); }, false);
  double ceil = 2.0 * (1 << 30) / (big * 1e-3) / 1e9;
  printf("ceiling %.0f GB/s\n", ceil);
  float cp = bench([] { cudaMemcpyAsync(out, in, M * N * 4, cudaMemcpyDeviceToDevice); });
  printf("driver copy same bytes %.2f us %.1f%%\n", cp * 1e3, 100 * 2.0 * M * N * 4 / (cp * 1e-3) / 1e9 / ceil);
  for (int pass = 0; pass < 2; pass++) {
  run<2,0,0,true>("copy", ceil); run<2,1,0,true>("copy", ceil); run<2,1,1,true>("copy", ceil); run<2,2,2,true>("copy", ceil);
  run<2,0,0,false>("softmax", ceil); run<4,0,0,false>("softmax", ceil);
  run<2,1,0,false>("softmax", ceil); run<4,1,0,false>("softmax", ceil);
  run<2,2,0,false>("softmax", ceil); run<2,3,0,false>("softmax", ceil); run<2,4,0,false>("softmax", ceil);
  run<2,1,1,false>("softmax", ceil); run<4,1,1,false>("softmax", ceil);
  run<2,1,2,false>("softmax", ceil); run<2,1,3,false>("softmax", ceil); run<2,1,4,false>("softmax", ceil);
  run<2,2,1,false>("softmax", ceil); run<2,2,2,false>("softmax", ceil);
  run<2,5,0,false>("softmax", ceil); run<2,5,5,false>("softmax", ceil); run<2,1,5,false>("softmax", ceil); run<2,0,5,false>("softmax", ceil); run<2,5,2,false>("softmax", ceil);
  run<1,1,0,false>("softmax", ceil); run<1,1,1,false>("softmax", ceil); run<8,1,1,false>("softmax", ceil);
  }
  // correctness of one
  softmax<2,1,1,false><<<M, 64>>>(out, in, N); std::vector<float> o(M * N); cudaMemcpy(o.data(), out, M * N * 4, cudaMemcpyDeviceToHost);
  double err = 0; for (int r = 0; r < M; r += 97) { double mx = -1e30, s = 0; for (int c = 0; c < N; c++) mx = std::max(mx, (double)h[r*N+c]); for (int c = 0; c < N; c++) s += exp(h[r*N+c]-mx); for (int c = 0; c < N; c++) err = std::max(err, fabs(o[r*N+c] - exp(h[r*N+c]-mx)/s)); }
  printf("max err %.2e\n", err);
}

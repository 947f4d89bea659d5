// The softmax rutile generates for 4096 x 1024 f32 with streaming loads (`simple-cs`,
// 2 warps), written by hand in CUDA with rutile's parameter layout, to be timed against
// rutile's own PTX by ptx_time.cu.
#include <cmath>
template<int W>
__device__ void body(float* out, const float* in, int in_stride, int out_stride, int n_rows, int n_cols) {
  constexpr int T = 32 * W, PER = 1024 / 4 / T;
  const float4* row = (const float4*)(in + (size_t)blockIdx.x * in_stride);
  float4* orow = (float4*)(out + (size_t)blockIdx.x * out_stride);
  float4 v[PER];
  #pragma unroll
  for (int i = 0; i < PER; i++) v[i] = __ldcs(row + threadIdx.x + i * T);
  __shared__ float sh[W];
  float m = -INFINITY;
  #pragma unroll
  for (int i = 0; i < PER; i++) m = fmaxf(m, fmaxf(fmaxf(v[i].x, v[i].y), fmaxf(v[i].z, v[i].w)));
  for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(~0u, m, o));
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = m; __syncthreads(); m = sh[0]; for (int w = 1; w < W; w++) m = fmaxf(m, sh[w]); __syncthreads();
  float s = 0;
  #pragma unroll
  for (int i = 0; i < PER; i++) { v[i].x = __expf(v[i].x - m); v[i].y = __expf(v[i].y - m); v[i].z = __expf(v[i].z - m); v[i].w = __expf(v[i].w - m); s += v[i].x + v[i].y + v[i].z + v[i].w; }
  for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(~0u, s, o);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = s; __syncthreads(); s = 0; for (int w = 0; w < W; w++) s += sh[w];
  #pragma unroll
  for (int i = 0; i < PER; i++) { float4 r = v[i]; r.x /= s; r.y /= s; r.z /= s; r.w /= s; orow[threadIdx.x + i * T] = r; }
}
extern "C" __global__ void softmax_kernel(float* out, const float* in, int in_stride, int out_stride, int n_rows, int n_cols) {
  body<2>(out, in, in_stride, out_stride, n_rows, n_cols);
}

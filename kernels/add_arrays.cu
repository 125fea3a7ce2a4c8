// Memory-bound: k reads and one write per element. The float4 path needs every pointer 16-byte aligned,
// which the chunks of --grad-sum copy give when their run starts on a 16-byte boundary; otherwise floats.
#include <cstdint>

#include "common/cuda_check.h"
#include "kernels/add_arrays.h"

namespace {
__global__ void add_k(float* out, AddInputs in, int k, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float acc = in.at[0][i];
    for (int j = 1; j < k; j++) acc += in.at[j][i];
    out[i] = acc;
  }
}

__device__ __forceinline__ void add_to(float4& a, const float4& v) {
  a.x += v.x;
  a.y += v.y;
  a.z += v.z;
  a.w += v.w;
}

// The adds run beside backward, and an SM that holds one of their blocks has no room left for a matmul's
// tile: 16 SMs with many loads in flight each (K inputs x U float4 = 16 float4 a thread) took 0.13 ms
// off a 4-GPU step of GPT-2 355M that 64 SMs of 256 threads gave (8 SMs: 0.4 ms slower; 4 H200s).
constexpr int kAddThreads = 512, kAddBlocks = 16;
template <int K>
__global__ void __launch_bounds__(kAddThreads) add4_k(float4* out, AddInputs in, size_t n4) {
  constexpr int U = 16 / K;
  const size_t stride = size_t(gridDim.x) * kAddThreads;
  size_t i = blockIdx.x * size_t(kAddThreads) + threadIdx.x;
  for (; i + (U - 1) * stride < n4; i += U * stride) {
    float4 v[K][U];
#pragma unroll
    for (int j = 0; j < K; j++)
#pragma unroll
      for (int u = 0; u < U; u++) v[j][u] = reinterpret_cast<const float4*>(in.at[j])[i + u * stride];
#pragma unroll
    for (int u = 0; u < U; u++) {
      float4 acc = v[0][u];
#pragma unroll
      for (int j = 1; j < K; j++) add_to(acc, v[j][u]);  // in input order, as add_k
      out[i + u * stride] = acc;
    }
  }
  for (; i < n4; i += stride) {
    float4 acc = reinterpret_cast<const float4*>(in.at[0])[i];
#pragma unroll
    for (int j = 1; j < K; j++) add_to(acc, reinterpret_cast<const float4*>(in.at[j])[i]);
    out[i] = acc;
  }
}

void add4(float4* out, const AddInputs& in, int k, size_t n4, cudaStream_t s) {
  using Kernel = void (*)(float4*, AddInputs, size_t);
  constexpr Kernel kernel[kMaxAddArrays] = {add4_k<1>, add4_k<2>, add4_k<3>, add4_k<4>,
                                            add4_k<5>, add4_k<6>, add4_k<7>, add4_k<8>};
  const size_t want = (n4 + kAddThreads - 1) / kAddThreads;
  kernel[k - 1]<<<unsigned(want < size_t(kAddBlocks) ? want : size_t(kAddBlocks)), kAddThreads, 0, s>>>(out, in, n4);
}

// Few blocks: the adds run beside backward's kernels and should take few of their SMs.
unsigned grid_for(size_t n) {
  const size_t blocks = (n + 255) / 256;
  return unsigned(blocks < 64 ? (blocks > 0 ? blocks : 1) : 64);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
}  // namespace

void add_arrays(float* out, AddInputs in, int k, size_t n, cudaStream_t s) {
  CHECK(k >= 1 && k <= kMaxAddArrays);
  if (n == 0) return;
  bool vec = aligned16(out);
  for (int j = 0; j < k; j++) vec = vec && aligned16(in.at[j]);
  const size_t n4 = vec ? n / 4 : 0;
  if (n4) {
    add4(reinterpret_cast<float4*>(out), in, k, n4, s);
    CUDA_CHECK_LAUNCH();
  }
  if (n4 * 4 == n) return;
  AddInputs rest = in;
  for (int j = 0; j < k; j++) rest.at[j] += n4 * 4;
  add_k<<<grid_for(n - n4 * 4), 256, 0, s>>>(out + n4 * 4, rest, k, n - n4 * 4);
  CUDA_CHECK_LAUNCH();
}

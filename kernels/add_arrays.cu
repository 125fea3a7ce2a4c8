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

__global__ void add4_k(float4* out, AddInputs in, int k, size_t n4) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n4; i += size_t(gridDim.x) * blockDim.x) {
    float4 acc = reinterpret_cast<const float4*>(in.at[0])[i];
    for (int j = 1; j < k; j++) {
      const float4 v = reinterpret_cast<const float4*>(in.at[j])[i];
      acc.x += v.x;
      acc.y += v.y;
      acc.z += v.z;
      acc.w += v.w;
    }
    out[i] = acc;
  }
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
    add4_k<<<grid_for(n4), 256, 0, s>>>(reinterpret_cast<float4*>(out), in, k, n4);
    CUDA_CHECK_LAUNCH();
  }
  if (n4 * 4 == n) return;
  AddInputs rest = in;
  for (int j = 0; j < k; j++) rest.at[j] += n4 * 4;
  add_k<<<grid_for(n - n4 * 4), 256, 0, s>>>(out + n4 * 4, rest, k, n - n4 * 4);
  CUDA_CHECK_LAUNCH();
}

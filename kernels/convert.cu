// One pass each way, memory-bound: 6 bytes per element. Grid-stride loops, so one launch covers any n.
#include "common/cuda_check.h"
#include "kernels/convert.h"

namespace {
__global__ void to_bf16_k(__nv_bfloat16* dst, const float* src, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = __float2bfloat16_rn(src[i]);
}

__global__ void to_float_k(float* dst, const __nv_bfloat16* src, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = __bfloat162float(src[i]);
}

unsigned grid_for(size_t n) {  // enough blocks to fill the GPU, no more
  const size_t blocks = (n + 255) / 256;
  return unsigned(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096);
}
}  // namespace

void float_to_bf16(__nv_bfloat16* dst, const float* src, size_t n, cudaStream_t s) {
  to_bf16_k<<<grid_for(n), 256, 0, s>>>(dst, src, n);
  CUDA_CHECK_LAUNCH();
}

void bf16_to_float(float* dst, const __nv_bfloat16* src, size_t n, cudaStream_t s) {
  to_float_k<<<grid_for(n), 256, 0, s>>>(dst, src, n);
  CUDA_CHECK_LAUNCH();
}

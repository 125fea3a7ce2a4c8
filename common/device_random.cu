#include "common/cuda_check.h"
#include "common/device_random.h"

namespace {
// A 64-bit avalanching mixer (MurmurHash3's finaliser); the high word's bits end up in the low 32.
__device__ __forceinline__ uint32_t mix32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return uint32_t(x);
}

// Element i: two uniforms in (0, 1] and [0, 1) from the hash of (seed, 2i) and (seed, 2i + 1), then
// Box-Muller: sd * sqrt(-2 ln u1) cos(2 pi u2). Grid-stride loop; the values do not depend on the launch shape.
template <class T>
__global__ void fill_normal_kernel(T* dst, int64_t n, uint64_t seed, float sd) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float u1 = (mix32(seed * 0x9e3779b97f4a7c15ull + 2 * uint64_t(i)) + 1.0f) * 2.3283064e-10f;
    float u2 = mix32(seed * 0x9e3779b97f4a7c15ull + 2 * uint64_t(i) + 1) * 2.3283064e-10f;
    dst[i] = T(sd * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2));
  }
}
}  // namespace

void fill_normal(float* dst, int64_t n, uint64_t seed, float stddev, cudaStream_t s) {
  if (n <= 0) return;
  fill_normal_kernel<<<2048, 256, 0, s>>>(dst, n, seed, stddev);
  CUDA_CHECK_LAUNCH();
}

void fill_normal(__nv_bfloat16* dst, int64_t n, uint64_t seed, float stddev, cudaStream_t s) {
  if (n <= 0) return;
  fill_normal_kernel<<<2048, 256, 0, s>>>(dst, n, seed, stddev);
  CUDA_CHECK_LAUNCH();
}

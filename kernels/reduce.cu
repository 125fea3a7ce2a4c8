// Loss scalars kept on the device, so a step never waits for the host: the mean of the per-row losses and
// a micro-batch's scaled contribution to the step's loss. Single-block kernels; n is at most a batch's rows.
#include "common/cuda_check.h"
#include "kernels/reduce.h"

namespace {
// *out = mean(x[0..n)): one block of 1024 threads, each summing a strided slice in double, then a tree
// reduction in shared memory (a fixed order).
__global__ void mean_k(float* out, const float* x, int n) {
  __shared__ double red[1024];
  double s = 0;
  for (int i = threadIdx.x; i < n; i += 1024) s += x[i];
  red[threadIdx.x] = s;
  __syncthreads();
  for (int k = 512; k > 0; k >>= 1) {
    if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = float(red[0] / n);
}

// *dst = (acc ? *dst : 0) + scale * *src: one thread.
__global__ void scale_add_k(float* dst, const float* src, float scale, bool acc) {
  *dst = (acc ? *dst : 0.0f) + scale * *src;
}
}  // namespace

void mean_reduce(float* out, const float* x, int n, cudaStream_t s) {
  mean_k<<<1, 1024, 0, s>>>(out, x, n);
  CUDA_CHECK_LAUNCH();
}

void scale_add(float* dst, const float* src, float scale, bool accumulate, cudaStream_t s) {
  scale_add_k<<<1, 1, 0, s>>>(dst, src, scale, accumulate);
  CUDA_CHECK_LAUNCH();
}

// What CELO2's kernels (celo2.cu: clip, begin, AdamW side path; celo2_learned.cu: the learned path)
// share: block size, work-item and buffer layouts, the MLP's weight layout, the gradient every pass sees,
// and the fixed-order double sums.
#pragma once
#include <cuda_bf16.h>

#include "optim/lopt/celo2.h"

namespace {
constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kRun = 4096;           // elements per item (16 per thread)
constexpr int kCh = 30, kPart = 32;  // features; doubles per item in partial_ (30 channels, pad)
constexpr int kClipChunk = 16384;
// MLP weights as uploaded: W0 (30 x 8, row = channel) | b0 | W1 (8 x 8, [in][out]) | b1 | W2 columns 0-1
// (8 x 2) | b2[0..1].
constexpr int kH = 8, kW0 = 0, kB0 = kCh * kH, kW1 = kB0 + kH, kB1 = kW1 + kH * kH, kW2 = kB1 + kH, kB2 = kW2 + 2 * kH,
              kWeights = kB2 + 2;

__device__ __forceinline__ float keep_nan_clamp(float x, float lo, float hi) {
  return x < lo ? lo : (x > hi ? hi : x);  // torch.clamp: NaN stays NaN
}

// 5.1: the trainer's scale, then the global clip factor, then the +-grad_clip_val clamp.
__device__ __forceinline__ float c2_grad(float g, const C2Scalars& sc, float cv) {
  return keep_nan_clamp(g * sc.gs * sc.clip, -cv, cv);
}

// The direction buffer holds float or bf16 (celo2.h).
__device__ __forceinline__ float dx_load(const float* p) { return *p; }
__device__ __forceinline__ float dx_load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void dx_store(float* p, float x) { *p = x; }
__device__ __forceinline__ void dx_store(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }

__device__ __forceinline__ double warp_sum_d(double x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Sum over the block of one double per thread, in a fixed order; the result is valid in thread 0.
__device__ double block_sum_d(double x) {
  __shared__ double red[kWarps];
  x = warp_sum_d(x);
  __syncthreads();  // red may still be read by a previous call
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = x;
  __syncthreads();
  double s = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < kWarps; w++) s += red[w];
  return s;
}
}  // namespace

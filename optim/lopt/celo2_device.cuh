// What CELO2's kernels (celo2.cu: clip, begin, AdamW side path; celo2_learned.cu: the learned path;
// celo2_fast.cu: pass C on tensor cores) share: block size, work-item and buffer layouts, the MLP's weight
// layout, the gradient every pass sees, an element's features and the fixed-order double sums.
#pragma once
#include <cuda_bf16.h>

#include "optim/lopt/celo2.h"
#include "optim/lopt/lo_record16.h"

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

// Element `at` of the learned record {m0, m1, m2, v}: LoCore's state holds float4s, or with k16
// (celo2.bf16_record) four bf16 an element.
template <bool k16>
__device__ __forceinline__ float4 c2_rec(const float4* state, int64_t at) {
  return lo_rec_load(reinterpret_cast<const LoRec<k16>*>(state), at);
}

// 5.1: the trainer's scale, then the global clip factor, then the +-grad_clip_val clamp.
__device__ __forceinline__ float c2_grad(float g, const C2Scalars& sc, float cv) {
  return keep_nan_clamp(g * sc.gs * sc.clip, -cv, cv);
}

// Channels 15-26 (R_k, C_k, 1 / sqrt(R_k + 1e-8), 1 / sqrt(C_k + 1e-8)) are constant along a row or a
// column of a 2-D tensor: for those (LoCore's tile2d tensors) pass C takes their share of the first layer
// from per-entry side tables (c2_side) instead of building them per element.
constexpr int kSideFirst = 15, kSideEnd = 27;
__host__ __device__ constexpr bool c2_side_channel(int c) { return c >= kSideFirst && c < kSideEnd; }

// The 30 raw features of one element (celo2.md 5.6.1) from g, the pre-step p, the updated record
// {m0, m1, m2, v}, its R and C entries and their Adafactor factors, as celo2_features: g, clip(g, 0.1), p,
// m_k, v, m_k rho, rho (rho = 1 / sqrt(v + 1e-8)), g fg_k, g rho, R_k, C_k, 1 / sqrt(R_k + 1e-8),
// 1 / sqrt(C_k + 1e-8), m_k fg_k. kSided: channels 15-26 are left unset (R, C, rsR, rsC unread).
template <bool kSided = false>
__device__ __forceinline__ void c2_features(float g, float p, float4 st, float4 R, float4 C, float4 rf, float4 cf,
                                            float4 rsR, float4 rsC, float* x) {
  const float m[3] = {st.x, st.y, st.z}, r[3] = {R.x, R.y, R.z}, c[3] = {C.x, C.y, C.z};
  const float rr[3] = {rsR.x, rsR.y, rsR.z}, rc[3] = {rsC.x, rsC.y, rsC.z};
  const float fr[3] = {rf.x, rf.y, rf.z}, fc[3] = {cf.x, cf.y, cf.z};
  const float v = st.w, rho = 1.0f / sqrtf(v + 1e-8f);
  x[0] = g;
  x[1] = keep_nan_clamp(g, -0.1f, 0.1f);
  x[2] = p;
  x[6] = v;
  x[10] = rho;
  x[14] = g * rho;
#pragma unroll
  for (int k = 0; k < 3; k++) {
    const float fg = fr[k] * fc[k];
    x[3 + k] = m[k];
    x[7 + k] = m[k] * rho;
    x[11 + k] = g * fg;
    if (!kSided) {
      x[15 + k] = r[k];
      x[18 + k] = c[k];
      x[21 + k] = rr[k];
      x[24 + k] = rc[k];
    }
    x[27 + k] = m[k] * fg;
  }
}

// Pass C's scale of a tensor's direction: rms(p) over the whole tensor (the reference's rms(p, n)) from its
// slices' sums of p^2 with param_scale_mult, else 1. Thread 0 computes it into the block's shared copy.
__device__ __forceinline__ float c2_param_scale(int param_scale_mult, const double* psq, const C2Mat& m,
                                                int64_t numel) {
  __shared__ float ps;
  if (threadIdx.x == 0) {
    ps = 1.0f;
    if (param_scale_mult) {
      double s = 0;
      for (int k = 0; k < m.n_slices; k++) s += psq[m.first_slice + k];
      ps = sqrtf(float(s / double(numel)) + 1e-9f);
    }
  }
  __syncthreads();
  return ps;
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

// Per channel c < kN: each thread's fp32 sum acc[c] in double, over each warp (warp_sum_d), then the warps in
// order; into out[c] by thread c. Pass B's channel sums, and the apply pass's sum of p^2 in the same order.
// (lo_block_sums, the other learned optimizers' tree, adds within a warp in fp32: CELO2's sums never did.)
template <int kN>
__device__ void c2_block_sums(const float* acc, double* __restrict__ out) {
  __shared__ double red[kWarps][kN];
#pragma unroll
  for (int c = 0; c < kN; c++) {
    const double s = warp_sum_d(double(acc[c]));
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32][c] = s;
  }
  __syncthreads();
  if (threadIdx.x < kN) {
    double s = 0;
    for (int w = 0; w < kWarps; w++) s += red[w][threadIdx.x];
    out[threadIdx.x] = s;
  }
}
}  // namespace

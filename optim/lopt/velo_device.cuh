// What VeLO's passes share on the device (velo.cu: pass B, F2 and the LSTM; velo_pass_c.cu: the side
// tables and pass C): buffer layouts, the gradient the element passes see, and one element's features.
#pragma once
#include "optim/lopt/lo_element.cuh"
#include "optim/lopt/velo.h"

namespace velo {
constexpr int kF = 30, kS = kF + 8;  // 30 features + 8 old-state sums
constexpr int kLead = 15;            // features before the 12 side ones (lo_element.cuh)
constexpr int kUnrollC = 4;          // pass C rows in flight per thread (registers)
constexpr int kNormLd = 32;          // floats per tensor in norm_: 30 normalisers, the param scale, 1 pad
constexpr int kLdX = 32;             // LSTM input row per tensor: 30 features | 1 (the bias column) | 1 pad
// Row lengths of the hypernetwork's GEMM operands. Biases ride along as a constant-1 input column, and
// rows are padded to a multiple of 4 floats (16 bytes) for cuBLAS's vector loads:
//   kLdUH: LSTM input [U (512) | h (512) | 1 | 3 pad]       kLdHX: LSTM output [h_new (512) | 1 | 3 pad]
//   kCS:   output GEMM rows per tensor: 256 controls + lr_mult (unpadded: only cuBLAS reads them back)
constexpr int kLdUH = 1028, kLdHX = 516, kCS = 257;
// A tensor's MLP (theta, 159 floats, interpolated from the 256 candidates): W0 (4 x 30) | b0 (4) |
// W1 (4 x 4) | b1 (4) | W2 (3 x 4: direction, magnitude, unused) | b2 (3).
constexpr int kThB0 = VeloWeights::kB0, kThW1 = VeloWeights::kW1, kThB1 = VeloWeights::kB1;
constexpr int kThW2 = VeloWeights::kW2, kThB2 = VeloWeights::kB2, kTheta = VeloWeights::kMlp;
constexpr int kThetaPad = 160;  // in shared memory: whole float4s (velo_head reads 16 bytes at a time)
static_assert(kThW1 % 4 == 0 && kThW2 % 4 == 0 && kThB2 % 4 == 0, "velo_head reads these 16 bytes at a time");

// The gradient VeLO sees: g times the trainer's clip scale, clamped to [-1000, 1000].
__device__ __forceinline__ float velo_g(float g, float gs) { return fminf(1000.0f, fmaxf(-1000.0f, g * gs)); }

// The 30 per-element features (velo.md 4.7): g, clip(g, 0.1), p, m_k, v, m_k s, s (s = rsqrt(v + 1e-6)),
// g sg_k, g s, then the side features R_k, C_k, rsqrt(R_k + 1e-8), rsqrt(C_k + 1e-8), and m_k sm_k.
__device__ __forceinline__ void velo_features(const LoElem& e, float* x) {
  const float s = rsqrtf(e.v + 1e-6f);
  x[0] = e.g;
  x[1] = fminf(0.1f, fmaxf(-0.1f, e.g));
  x[2] = e.p;
  x[3] = e.m[0];
  x[4] = e.m[1];
  x[5] = e.m[2];
  x[6] = e.v;
  x[7] = e.m[0] * s;
  x[8] = e.m[1] * s;
  x[9] = e.m[2] * s;
  x[10] = s;
  x[14] = e.g * s;
  lo_factor_features<11, kLead>(e, x);
}

// The 18 features that vary along both axes of a 2-D tensor (channels 0-14 and 27-29) from the clipped
// gradient, the old parameter, the updated record and sg = rf * cf (the same arithmetic as velo_features).
__device__ __forceinline__ void velo_elem18(float g, float p, float4 st, const float* sg, float* x) {
  const float s = rsqrtf(st.w + 1e-6f);
  x[0] = g;
  x[1] = fminf(0.1f, fmaxf(-0.1f, g));
  x[2] = p;
  x[3] = st.x;
  x[4] = st.y;
  x[5] = st.z;
  x[6] = st.w;
  x[7] = st.x * s;
  x[8] = st.y * s;
  x[9] = st.z * s;
  x[10] = s;
  x[11] = g * sg[0];
  x[12] = g * sg[1];
  x[13] = g * sg[2];
  x[14] = g * s;
  x[15] = st.x * sg[0];
  x[16] = st.y * sg[1];
  x[17] = st.z * sg[2];
}
}  // namespace velo

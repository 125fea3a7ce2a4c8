// What small_fc_lopt's (and ELO's) passes share on the device (small_fc_lopt.cu: pass B and the exact
// pass C; small_fc_fast.cu: the tensor-core pass C): the layout of the per-step folded weights, the
// gradient the element passes see, and the features of one element.
#pragma once
#include "optim/lopt/lo_element.cuh"
#include "optim/lopt/small_fc_lopt.h"

namespace small_fc {
constexpr int kF = 28;       // normalised features (the 11 time features are folded)
constexpr int kLead = 13;    // features before the 12 side ones (lo_element.cuh)
constexpr int kNormLd = 32;  // floats per tensor in norm_: its 28 normalisers, padded
// Per-step folded weights in `mlp_` (sf_begin): W0[:, :28] transposed (28 x 32) | b0 + W0[:, 28:] tau
// (32) | W1 transposed (32 x 32) | b1 (32) | W2 (2 x 32) | b2 (2)
constexpr int kW0 = 0, kB0 = 28 * 32, kW1 = kB0 + 32, kB1 = kW1 + 1024, kW2 = kB1 + 32, kB2 = kW2 + 64;
constexpr int kMlpFloats = kB2 + 2;
constexpr int kSideWords = 36;  // fast mode: words per row of the A-side table (small_fc_fast.cu)

// The gradient the element passes see: small_fc_lopt g * scale; ELO nan_to_num((g * scale) * clip)
// (celo2.md 8, E2), as LoCore::factor_passes_nan_to_num.
template <bool kElo>
struct SfGrad {
  float gs, clip;
  __device__ __forceinline__ float operator()(float g) const { return kElo ? lo_nan_to_num(g * gs * clip) : g * gs; }
};
template <bool kElo>
__device__ __forceinline__ SfGrad<kElo> sf_grad(const SfScalars* sc) {
  return {sc->grad_scale, kElo ? sc->clip : 1.0f};
}

// The 28 normalisable features (small_fc_lopt.md 3.5): g, p, m_k, v, m_k rho, rho (rho = rsqrt(v + 1e-6)),
// g sg_k, then the side features R_k, C_k, rsqrt(R_k + 1e-8), rsqrt(C_k + 1e-8), and m_k sm_k.
__device__ __forceinline__ void sf_features(const LoElem& e, float* x) {
  const float rho = rsqrtf(e.v + 1e-6f);
  x[0] = e.g;
  x[1] = e.p;
  x[2] = e.m[0];
  x[3] = e.m[1];
  x[4] = e.m[2];
  x[5] = e.v;
  x[6] = e.m[0] * rho;
  x[7] = e.m[1] * rho;
  x[8] = e.m[2] * rho;
  x[9] = rho;
  lo_factor_features<10, kLead>(e, x);
}

// The 16 features that vary along both axes of a 2-D tensor (channels 0-12 and 25-27), from the gradient, the old
// parameter, the updated record {m0, m1, m2, v}, rho = rsqrt(v + 1e-6) and the Adafactor factor sg = rf * cf
// (small_fc_lopt.md 3.5; as sf_features).
__device__ __forceinline__ void sf_elem16(float g, float p, float4 st, float rho, const float* sg, float* x) {
  x[0] = g;
  x[1] = p;
  x[2] = st.x;
  x[3] = st.y;
  x[4] = st.z;
  x[5] = st.w;
  x[6] = st.x * rho;
  x[7] = st.y * rho;
  x[8] = st.z * rho;
  x[9] = rho;
  x[10] = g * sg[0];
  x[11] = g * sg[1];
  x[12] = g * sg[2];
  x[13] = st.x * sg[0];
  x[14] = st.y * sg[1];
  x[15] = st.z * sg[2];
}
}  // namespace small_fc

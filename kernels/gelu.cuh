// The GELU forms and their derivatives on the device, shared by the forward kernel and the fused
// GELU + bias-gradient backward. Internal to kernels/gelu.cu and kernels/column_sums.cu.
#pragma once
#include "kernels/gelu.h"

namespace gelu_detail {
constexpr float kTanhK = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kTanhA = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;  // the standard normal density at 0
}  // namespace gelu_detail

template <Gelu kKind>
__device__ __forceinline__ float gelu_value(float u) {
  using namespace gelu_detail;
  if constexpr (kKind == Gelu::kTanh) return 0.5f * u * (1.0f + tanhf(kTanhK * (u + kTanhA * u * u * u)));
  // Phi(u) = (1 + erf(u / sqrt 2)) / 2, as torch computes it. In the negative tail 1 + erf cancels (below
  // u = -3.5 the result is off by up to two float ulps of 1 times u / 2, a few 1e-7), but erfcf, which keeps
  // full relative precision there, costs 2.5x erff's instructions: both GELU kernels were then compute-bound
  // (ViT-B/16's backward 0.53 ms a layer against 0.31 ms of memory traffic).
  return 0.5f * u * (1.0f + erff(u * kInvSqrt2));
}

// d gelu / du: tanh form 0.5 (1 + th) + 0.5 u (1 - th^2) k (1 + 3 a u^2); erf form Phi(u) + u phi(u).
template <Gelu kKind>
__device__ __forceinline__ float gelu_grad(float u) {
  using namespace gelu_detail;
  if constexpr (kKind == Gelu::kTanh) {
    const float th = tanhf(kTanhK * (u + kTanhA * u * u * u));
    return 0.5f * (1.0f + th) + 0.5f * u * (1.0f - th * th) * kTanhK * (1.0f + 3.0f * kTanhA * u * u);
  }
  return 0.5f * (1.0f + erff(u * kInvSqrt2)) + u * kInvSqrt2Pi * expf(-0.5f * u * u);
}

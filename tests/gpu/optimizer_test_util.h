// What the learned-optimizer GPU tests (test_celo2_gpu.cu, test_elo_gpu.cu) share: their mixed shape table
// (square, tall, wide, odd, 3-D and 4-D per slice, (1,n), (n,1), long rows, a large matrix, a tensor without
// decay, an embedding, a head, vectors, a scalar), random parameters (every element, padding too),
// heterogeneous gradients, uploading a flat vector into an arena, and the error measure against a reference.
// make_grads and upload are the ones test_optim_gpu.cu uses too.
#pragma once
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/arena.h"
#include "core/param_table.h"
#include "tests/test_util.h"

namespace optim_test {
// The shapes every learned optimizer is checked on.
inline ParamTable lopt_mixed_table() {
  ParamTable t;
  auto add = [&](const char* name, std::vector<int64_t> shape, Role role, bool decay = true) {
    t.add(tensor_spec(name, std::move(shape), role, decay));
  };
  add("w_sq", {64, 64}, Role::Hidden);
  add("w_tall", {96, 48}, Role::Hidden);
  add("w_wide", {48, 96}, Role::Hidden);
  add("w_odd", {33, 65}, Role::Hidden);
  add("w_3d", {4, 6, 10}, Role::Hidden);
  add("w_4d", {8, 3, 5, 5}, Role::Hidden);
  add("w_row", {1, 7}, Role::Hidden);
  add("w_col", {7, 1}, Role::Hidden);
  add("w_longrows", {3, 2500}, Role::Hidden);
  add("w_big", {256, 1024}, Role::Hidden);
  add("w_nodecay", {16, 24}, Role::Hidden, false);
  add("emb_odd", {5, 2051}, Role::Embedding);
  add("head", {10, 48}, Role::Head);
  add("bias", {37}, Role::Bias, false);
  add("gain", {50}, Role::NormGain, false);
  add("scalar", {}, Role::Bias, false);
  return t;
}

inline std::vector<float> random_params(const ParamTable& t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> z(0.0f, 0.05f);
  std::vector<float> p(size_t(t.total_elems()), 0.0f);
  for (auto& x : p) x = z(rng);
  return p;
}

inline std::vector<float> make_grads(const ParamTable& t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> g(size_t(t.total_elems()), 0.0f);
  for (const auto& ti : t.tensors()) {
    auto v = hetero_grad(ti.numel / ti.cols(), ti.cols(), rng, 0.01f);
    std::copy(v.begin(), v.end(), g.begin() + ti.offset);
  }
  return g;
}

inline void upload(Arena& a, const std::vector<float>& flat, bool grads) {
  for (const auto& ti : a.table().tensors()) {
    if (grads)
      a.set_grad(ti.index, &flat[size_t(ti.offset)]);
    else
      a.set_param(ti.index, &flat[size_t(ti.offset)]);
  }
}

// Error of one tensor relative to the distance travelled, less one ulp of p per element (grows with s).
inline double tensor_error(const TensorInfo& ti, const std::vector<float>& pg, const std::vector<float>& p_ref,
                           const std::vector<float>& p0, int s) {
  double num = 0, den = 0, pn = 0;
  for (int64_t i = 0; i < ti.numel; i++) {
    const double r = p_ref[size_t(ti.offset + i)], d = pg[size_t(i)] - r, t = r - p0[size_t(ti.offset + i)];
    num += d * d;
    den += t * t;
    pn += r * r;
  }
  if (!(den > 0)) return INFINITY;
  const double ulps = std::ldexp(std::sqrt(pn), -23) * std::sqrt(double(s + 1));
  return std::max(0.0, std::sqrt(num) - ulps) / std::sqrt(den);
}
}  // namespace optim_test

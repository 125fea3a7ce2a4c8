#include "optim/lopt/lopt_common.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/error.h"
#include "core/chunks.h"
#include "core/shard_plan.h"

FactoredDims factored_dims(const std::vector<int64_t>& shape, TieRule rule) {
  FactoredDims f;
  const int r = int(shape.size());
  if (r < 2) return f;
  std::vector<int> order(static_cast<size_t>(r));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return shape[size_t(a)] < shape[size_t(b)]; });
  f.factored = true;
  f.d1 = order[size_t(r - 2)];
  f.d0 = order[size_t(r - 1)];
  if (rule == TieRule::Swapped && shape[size_t(f.d0)] == shape[size_t(f.d1)]) {
    bool rank4_01 = r == 4 && std::min(f.d0, f.d1) == 0 && std::max(f.d0, f.d1) == 1;
    if (!rank4_01) std::swap(f.d0, f.d1);
  }
  return f;
}

TieRule parse_tie_rule(const std::string& s, TieRule pylo_rule) {
  if (s == "pylo") return pylo_rule;
  if (s == "argsort") return TieRule::Argsort;
  if (s == "swapped") return TieRule::Swapped;
  if (s == "jax")
    user_error(
        "tie rule 'jax' was ambiguous and is gone: use argsort (numpy's order, what the JAX code does on its own "
        "layout) or swapped (square torch matrices get JAX's roles).");
  user_error("tie rule must be pylo, argsort or swapped (got '", s, "').");
}

int64_t lo_cut_unit(const TensorInfo& t) {
  if (t.ndim() != 2 || t.shape[0] < 2 || t.shape[1] < 2) return 0;
  const int64_t cols = t.shape[1];
  const int64_t chunk_rows = ShardPlan::kCutElems / std::gcd(ShardPlan::kCutElems, cols);
  const int64_t pass_a_rows = plan_tile_grid(t.shape[0], cols, kLoPassACols, kLoPassATileElems).rows_per_tile;
  return std::lcm(std::lcm(int64_t(kLoTileRows), pass_a_rows), chunk_rows) * cols;
}

float learned_decay(float nominal, float theta) {
  float d = 1.0f - std::exp(10.0f * (std::log(1.0f - nominal) / 10.0f + theta));
  return std::min(1.0f, std::max(0.0f, d));
}

LoDecays small_fc_decays() {
  LoDecays d;
  const float tm[3] = {0.15216392f, 0.14245212f, 0.06812963f}, tf[3] = {0.18621896f, -0.10864615f, -0.06185547f};
  const float nom[3] = {0.9f, 0.99f, 0.999f};
  for (int k = 0; k < 3; k++) {
    d.m[k] = learned_decay(nom[k], tm[k]);
    d.f[k] = learned_decay(nom[k], tf[k]);
  }
  d.v = learned_decay(0.999f, 0.01079706f);
  return d;
}

LoDecays nominal_decays() {
  LoDecays d;
  const float nominal[3] = {0.9f, 0.99f, 0.999f};
  for (int k = 0; k < 3; k++) d.m[k] = d.f[k] = nominal[k];
  d.v = 0.999f;
  return d;
}

LoDecays celo2_decays() {
  LoDecays d = nominal_decays();
  d.v = 0.95f;
  return d;
}

void velo_loss_decays(int64_t num_steps, float* decay) {
  const float stop = std::log10(float(num_steps));
  for (int j = 0; j < 10; j++) {
    const float e = 1.0f + float(j) * (stop - 1.0f) / 9.0f;
    decay[j] = std::exp(-1.0f / std::pow(10.0f, e));
  }
}

Celo2Options elo_celo2_defaults() {
  Celo2Options o;
  o.weight_decay = 0.1;
  o.clip_grad = true;
  return o;
}

bool celo2_uses_adamw(const TensorInfo& t, const Celo2Options& o) {
  if (!o.adamw_1d) return false;
  if (t.ndim() <= 1) return true;
  if (t.owner != Owner::Auto) return t.owner == Owner::AdamW;
  switch (t.role) {
    case Role::Hidden:
      return false;
    case Role::Head:
      return o.adamw_head;
    default:  // embeddings, the patch embedding, and 2-D biases or norms if a model ever has them
      return true;
  }
}

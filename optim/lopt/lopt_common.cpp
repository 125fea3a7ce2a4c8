#include "optim/lopt/lopt_common.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/error.h"

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

float learned_decay(float nominal, float theta) {
  float d = 1.0f - std::exp(10.0f * (std::log(1.0f - nominal) / 10.0f + theta));
  return std::min(1.0f, std::max(0.0f, d));
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

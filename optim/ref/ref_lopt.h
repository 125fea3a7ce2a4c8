// CPU references of the learned optimizers, written from small_fc_lopt.md and velo.md (canonical JAX
// semantics plus PyLO's lr and decoupled weight decay): plain loops over each tensor's coordinates,
// fp32 elementwise math, double reductions.
#pragma once
#include <memory>

#include "optim/lopt/lopt_common.h"
#include "optim/lopt/lopt_weights.h"
#include "optim/ref/ref_optim.h"

std::unique_ptr<RefOptimizer> make_ref_small_fc(const ParamTable& t, const OptimOptions& o, const SmallFcWeights& w);
std::unique_ptr<RefOptimizer> make_ref_velo(const ParamTable& t, const OptimOptions& o, const VeloWeights& w);
// ELO (celo2.md 8): small_fc_lopt's features and MLP with fixed decays and PyLO ELO's step rule.
std::unique_ptr<RefOptimizer> make_ref_elo(const ParamTable& t, const OptimOptions& o, const SmallFcWeights& w);

// Momenta, second moment and Adafactor-style factored (or, for vectors, diagonal) second moments of one
// tensor at three decays, as both learned optimizers keep them.
class RefLoTensor {
 public:
  RefLoTensor(const std::vector<int64_t>& shape, TieRule tie);
  // Then the factors from the new state. With record_key (lo_record16.h's tensor key of this step), the
  // record {m0, m1, m2, v} is kept in bf16, each value rounded stochastically by element i's draws.
  void update(const std::vector<float>& g, const LoDecays& d, const uint64_t* record_key = nullptr);
  struct Elem {
    float row[3], col[3];  // R and C entries (vectors: V twice)
    float fg[3], fm[3];    // Adafactor factor for the gradient and for the momenta
  };
  // Vectors: fg = rsqrt(max(V + 1e-9, 1e-9)), fm = (V + momentum_eps)^(-1/2) (μLO 1e-6, VeLO 0).
  Elem elem(int64_t i, float momentum_eps) const;
  // The accumulators (m0..m2, v, then R and C or V at each decay) by name, for saving and loading; the
  // factors are derived from them by every update.
  std::vector<std::pair<std::string, std::vector<float>*>> state();
  FactoredDims fd;
  std::vector<float> m[3], v;

 private:
  std::vector<float> R_[3], C_[3], V_[3], rf_[3], cf_[3];
  std::vector<int64_t> ri_, ci_, group_;  // element -> R entry, element -> C entry, R entry -> μR group
  int64_t n_ = 0, n0_ = 1, n1_ = 1, groups_ = 0;
};

// MuLO per-tensor step scale: 1/fan_in (the tensor's second dim) for hidden matrices, else 1.
float mup_scale(const TensorInfo& t, bool mup);

// small_fc_lopt's 11 time features tanh(t / T_j - 1) for t earlier steps (small_fc_lopt.md 3.5).
void small_fc_time_features(int64_t t, float* tau);
// small_fc_lopt's MLP outputs for the n elements of one tensor from its updated state (small_fc_lopt.md
// 3.5-3.7): the 28 features, each normalised over the tensor (eps 1e-5), the time features tau, and the
// 39-32-32-2 MLP; dir and mag receive the two outputs. Shared by small_fc_lopt and ELO.
void small_fc_outputs(const SmallFcWeights& w, const RefLoTensor& s, const float* g, const float* p, int64_t n,
                      const float* tau, float* dir, float* mag);

// PyLO's global gradient clipping (optax clip_by_global_norm, celo2.md 5.1): clip_norm / max(N, clip_norm)
// with N the L2 norm of every tensor's gradient times grad_scale, in float32 as the factor PyLO applies.
// PyLO's `denom > 0` test makes it 1 when N is NaN (no clipping), and it is 0 when N is infinite.
float ref_global_clip_scale(const ParamTable& t, const std::vector<float>& grads, float grad_scale, double clip_norm);

// Index helper: the flat offset of an element's coordinates with one or two axes removed.
struct NdShape {
  std::vector<int64_t> shape;
  std::vector<int64_t> coords(int64_t flat) const;
  int64_t flat_without(const std::vector<int64_t>& c, int drop_a, int drop_b = -1) const;
  int64_t count_without(int drop_a, int drop_b = -1) const;
};

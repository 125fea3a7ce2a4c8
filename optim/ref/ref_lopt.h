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

// μLO's effective decays from its meta-learned offsets (small_fc_lopt.md 1).
struct SmallFcDecays {
  float m[3], v, f[3];
};
SmallFcDecays small_fc_decays();

// MuLO per-tensor step scale: 1/fan_in (the tensor's second dim) for hidden matrices, else 1.
float mup_scale(const TensorInfo& t, bool mup);

// Index helper: the flat offset of an element's coordinates with one or two axes removed.
struct NdShape {
  std::vector<int64_t> shape;
  std::vector<int64_t> coords(int64_t flat) const;
  int64_t flat_without(const std::vector<int64_t>& c, int drop_a, int drop_b = -1) const;
  int64_t count_without(int drop_a, int drop_b = -1) const;
};

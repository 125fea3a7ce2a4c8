// Pieces shared by the learned optimizers (small_fc_lopt and VeLO): which axes a tensor's second moment
// is factored over, the decay constants, and the options.
//
// Factored dims (velo.md 4.6, small_fc_lopt.md 3.2): for rank >= 2, d0 = the largest axis (R is the
// mean of g^2 over d0) and d1 = the second largest (C is the mean over d1); every other axis is a batch
// axis of R and C. Ties: the JAX rule (numpy argsort order: the later index counts larger) or PyLO's
// (swapped when the two largest are equal, except for rank-4 (0,1) ties). With torch's (out, in)
// layout, PyLO's rule gives square Linear weights the roles they had in JAX meta-training, so it is
// the default.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

enum class TieRule { PyLO, JAX };

struct FactoredDims {
  bool factored = false;
  int d0 = -1, d1 = -1;  // R reduces over d0, C over d1
};
FactoredDims factored_dims(const std::vector<int64_t>& shape, TieRule rule);
TieRule parse_tie_rule(const std::string& s);

// 1 - (1 - b0) * exp(10 * theta), in float32 as in every implementation, clipped to [0, 1].
float learned_decay(float nominal, float theta);

struct SmallFcOptions {  // PyLO AdafacLO / MuLO semantics
  double lr = 1.0;            // multiplies the whole step (and the decoupled weight decay)
  double weight_decay = 0.0;  // decoupled, after the step: p -= lr * wd * p
  double step_mult = 0.01, exp_mult = 0.001;
  bool mup = true;      // MuLO: hidden matrices' steps x 1/fan_in (how the published weights were trained)
  bool fast = false;    // MLP on tensor cores (bf16 mma, fp32 accumulate) instead of exact fp32
  std::string weights;  // folder or model.safetensors; empty = weights/mulo
  std::string tie = "pylo";
};

struct VeloOptions {  // PyLO VeLO semantics with VeLO's lr = 1
  double lr = 1.0, weight_decay = 0.0;
  int64_t num_steps = 10000;  // planned number of updates: drives the fraction and loss-EMA features
  std::string weights;        // folder with VeLO_RNN/ and VeLO_MLP/, or a JAX/flax "params" file; empty = weights/
  std::string tie = "pylo";
};

// Pieces shared by the learned optimizers (small_fc_lopt and VeLO): which axes a tensor's second moment
// is factored over, the decay constants, and the options.
//
// Factored dims (velo.md 4.6, small_fc_lopt.md 3.2): for rank >= 2, d0 = the largest axis (R is the
// mean of g^2 over d0) and d1 = the second largest (C is the mean over d1); every other axis is a batch
// axis of R and C. The rules differ only when the two largest sizes are equal:
//   Argsort  numpy's argsort order: of two equal axes the later one is d0. The JAX originals use it for
//            both optimizers (on JAX's (in, out) / HWIO layout), and PyLO uses it on torch's layout for
//            AdafacLO/MuLO (small_fc_lopt) and CELO2.
//   Swapped  PyLO's VeLO rule: d0 and d1 swapped on a tie, except rank-4 tensors whose tied axes are
//            (0, 1). On a square torch (out, in) matrix this gives the axes the roles JAX meta-training
//            gave them (d1 = in, d0 = out).
// The option value "pylo" (the default) picks the rule of PyLO's class for that optimizer, so that our
// steps reproduce PyLO's, with whose code the published weights are used.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

enum class TieRule { Argsort, Swapped };

struct FactoredDims {
  bool factored = false;
  int d0 = -1, d1 = -1;  // R reduces over d0, C over d1
};
FactoredDims factored_dims(const std::vector<int64_t>& shape, TieRule rule);
// "pylo" -> pylo_rule (the rule of PyLO's class for the optimizer), "argsort", "swapped".
TieRule parse_tie_rule(const std::string& s, TieRule pylo_rule);
constexpr TieRule kSmallFcPyloTie = TieRule::Argsort;  // PyLO AdafacLO_naive / MuLO_naive
constexpr TieRule kVeloPyloTie = TieRule::Swapped;     // PyLO VeLO_naive / VeLO_CUDA

// 1 - (1 - b0) * exp(10 * theta), in float32 as in every implementation, clipped to [0, 1].
float learned_decay(float nominal, float theta);

struct SmallFcOptions {       // PyLO AdafacLO / MuLO semantics
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

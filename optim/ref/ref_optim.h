// CPU reference implementations of the optimizers: plain C++, one tensor at a time, written straight
// from the specifications (optimizers.md C1-C3) so that the GPU kernels have something independent to
// be checked against. Parameters and gradients use the arena's flat layout (the table's offsets).
// Reductions accumulate in double; elementwise math is fp32 in the same order as the kernels.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "common/sections.h"
#include "core/param_table.h"
#include "optim/options.h"

class RefOptimizer {
 public:
  RefOptimizer(const ParamTable& t, const OptimOptions& o) : table_(t), opts_(o) {}
  virtual ~RefOptimizer() = default;
  // One update of `params` (flat, table layout) from `grads` multiplied by grad_scale; `loss` is the
  // step's training loss (only VeLO reads it).
  virtual void step(std::vector<float>& params, const std::vector<float>& grads, float grad_scale = 1.0f,
                    float loss = 0.0f) = 0;
  int64_t steps_done() const { return t_; }

  // State as sections "optim.*" (the name, the table's fingerprint, the step counter, then every state
  // vector), as Optimizer::save_state writes them; load checks name, model and every size before it
  // overwrites anything. Only the references that list their state (state_vectors) can do this.
  void save_state(SectionWriter& w);
  void load_state(const SectionReader& r);

 protected:
  struct StateVec {
    std::string name;  // section "optim.<name>"
    std::vector<float>* v;
  };
  virtual std::string name() const { return "?"; }
  virtual std::vector<StateVec> state_vectors();  // default: UserError (the reference keeps no file state)

  const ParamTable& table_;
  OptimOptions opts_;
  int64_t t_ = 0;
};

std::unique_ptr<RefOptimizer> make_ref_optimizer(const std::string& name, const OptimOptions& o, const ParamTable& t);

// Newton-Schulz on one row-major (rows x cols) matrix, emulating the GPU's bf16 roundings (inputs
// normalised and rounded to bf16 by the caller; every GEMM accumulates exactly and rounds to bf16).
std::vector<float> ref_newton_schulz(const std::vector<float>& x, int64_t rows, int64_t cols, const MuonOptions& o);
// Global L2 norm of grads over the table's tensors and torch's clip coefficient.
double ref_grad_norm(const ParamTable& t, const std::vector<float>& grads);

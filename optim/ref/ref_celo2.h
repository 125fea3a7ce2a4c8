// CPU references of CELO2 and ELO_CELO2 (celo2.md 5), written from the specification: the accumulators
// (RefLoTensor), 30 features per element of a matrix (15 for a vector sent to the MLP), per-channel
// normalisation over the last two axes, the split-input 30-8-8-3 MLP, Newton-Schulz on the direction,
// the second RMS normalisation and PyLO's update p -= lr (u + wd p); AdamW for vectors and embeddings.
// Elementwise math is fp32 as in PyLO; reductions, the MLP's sums and Newton-Schulz run in double.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "optim/lopt/celo2_weights.h"
#include "optim/ref/ref_lopt.h"

// clamp that keeps NaN (torch.clamp does; std::min/max would turn it into a bound).
inline float clamp_keep_nan(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

// The raw (unnormalised) features of element i from the updated state (celo2.md 5.6): 30 for a
// factored tensor, 15 for a vector; returns how many.
int celo2_features(const RefLoTensor& s, int64_t i, float g, float p, float* x);
// The MLP (5.8) on nf (30 or 15) normalised inputs: out[0] direction, out[1] magnitude, ... (w.out values).
void celo2_mlp(const Celo2Weights& w, const float* x, int nf, float* out);
// Newton-Schulz (5.9.1) on one row-major rows x cols matrix, in double: transposed when rows > cols,
// divided by its Frobenius norm + ns_eps, then ns_steps of X <- a X + (b A + c A A) X with A = X X^T.
std::vector<double> celo2_newton_schulz(const std::vector<double>& x, int64_t rows, int64_t cols,
                                        const Celo2Options& o);
// The AdamW side path (5.2) in PyLO's operation order, once the moments m and v hold this step's values:
// p -= lr (m / (1 - beta1^t) / (sqrt(v / (1 - beta2^t)) + eps) + wd p), t counting this step (1 first).
struct Celo2Adam {
  double beta1, beta2, eps;
};
void celo2_adam_apply(const Celo2Adam& a, int64_t t, float lr, float wd, float* p, const float* m, const float* v,
                      int64_t n);

// Intermediate values of the last step, per element in the table's layout (zero on AdamW tensors):
// the normalised inputs (30 per element; vectors use the first 15), the MLP's direction and magnitude,
// D (direction x exp(exp_mult mag), x rms(p) with param_scale_mult), NS(D) (D where not orthogonalised)
// and the step u = rmsmult NS(D) / rms(NS(D)).
struct Celo2Trace {
  std::vector<float> inputs, direction, magnitude, d, ns, step;
};

class RefCelo2 : public RefOptimizer {
 public:
  // h: this optimizer's options (o.celo2 or o.elo_celo2); name: "celo2" or "elo_celo2"; own_adam: the AdamW
  // side path keeps its own moments (CELO2) rather than the learned accumulators of every tensor (ELO_CELO2).
  RefCelo2(const ParamTable& t, const OptimOptions& o, const Celo2Options& h, const Celo2Weights& w, std::string name,
           bool own_adam, Celo2Trace* trace);
  void step(std::vector<float>& params, const std::vector<float>& grads, float grad_scale, float loss) override;

 protected:
  std::string name() const override { return name_; }
  std::vector<StateVec> state_vectors() override;
  // The AdamW side path of one tensor (CELO2: own moments; ELO_CELO2 overrides it); g is preprocessed.
  virtual void adamw_tensor(const TensorInfo& ti, float* p, const std::vector<float>& g, float lr, float wd);
  void learned_tensor(const TensorInfo& ti, float* p, const std::vector<float>& g, float lr, float wd);

  Celo2Options h_;
  Celo2Weights w_;
  std::string name_;
  Celo2Trace* trace_;
  LoDecays dec_;
  std::vector<std::unique_ptr<RefLoTensor>> lo_;     // learned-path accumulators (null where not kept)
  std::vector<std::vector<float>> adam_m_, adam_v_;  // CELO2's own AdamW moments (empty where unused)
};

std::unique_ptr<RefOptimizer> make_ref_celo2(const ParamTable& t, const OptimOptions& o, const Celo2Weights& w,
                                             Celo2Trace* trace = nullptr);
std::unique_ptr<RefOptimizer> make_ref_elo_celo2(const ParamTable& t, const OptimOptions& o, const Celo2Weights& w,
                                                 Celo2Trace* trace = nullptr);

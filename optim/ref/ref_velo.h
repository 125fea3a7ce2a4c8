// Parts of the VeLO reference that tests check on their own (velo.md 11, T0-T6).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "optim/lopt/lopt_weights.h"
#include "optim/ref/ref_optim.h"

// The loss features' state (velo.md 4.2): 10 EMAs of the clipped loss and the running minima of their
// bias-corrected values.
struct VeloLossBuffer {
  explicit VeloLossBuffer(int64_t num_steps);
  float update(float loss);        // returns the clipped loss
  void features(float* f9) const;  // the 9 loss features of the updated buffer
  float decay[10], means[10], running_min[10];
  int64_t it = 0;
};

void velo_fraction_features(double fraction, float* e9);
float velo_log_abs(double x);  // 0.5 clip(log(1e-8 + |10x|), -5, 5)
int velo_rank_class(const std::vector<int64_t>& shape);
// The 30-value LSTM input of one tensor from its OLD momenta m[3], second moment v and parameters p.
void velo_lstm_input(const float* shared18, const std::vector<int64_t>& shape, const float* p, const float* const* m,
                     const float* v, int64_t numel, float* row);
// Mixing layers + LSTM over n tensors: X (n x 30), h and c (n x 512, updated in place),
// controls (n x 256), lr_mult (n). Double accumulation.
void velo_lstm(const VeloWeights& w, int n, const float* X, float* h, float* c, float* controls, float* lr_mult);

// One step's intermediate values, for comparing with other implementations (tests/pylo_crosscheck.py):
// filled by every step of a reference VeLO made with a trace.
struct VeloTrace {
  float loss_decays[10];  // the loss EMAs' decays (velo.md 4.2), for implementations that round them differently
  float fraction[9], loss_features[9];
  std::vector<float> lstm_in;  // tensors x 30
  std::vector<float> lr_mult;  // tensors
  std::vector<float> direction, magnitude,
      step;  // per element, table layout: MLP outputs and lr_mult dir e^(mag/1000) rms(p)/1000
};
std::unique_ptr<RefOptimizer> make_ref_velo_traced(const ParamTable& t, const OptimOptions& o, const VeloWeights& w,
                                                   VeloTrace* trace);

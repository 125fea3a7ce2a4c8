// small_fc_lopt / μLO (small_fc_lopt.md): Adafactor-style accumulators, 39 features (28 normalised per
// tensor, 11 time features), a 39-32-32-2 MLP per element, PyLO's lr and decoupled weight decay, and
// MuLO's 1/fan_in step scale for hidden matrices. Launches per step: setup, pass A, F1, F1b, pass B,
// F2, pass C (exact fp32, or fast: side tables + bf16 tensor cores + exact for the few non-matrix tensors).
#pragma once
#include <memory>

#include "optim/lopt/lo_core.h"
#include "optim/lopt/lopt_weights.h"
#include "optim/optimizer.h"

class SmallFcLopt : public Optimizer {
 public:
  SmallFcLopt(Arena& arena, const OptimOptions& opts, const SmallFcWeights& w, const std::vector<int>& owned = {});
  ~SmallFcLopt() override;
  std::string name() const override { return "small_fc_lopt"; }
  void step(const StepInfo& info, cudaStream_t s) override;

 protected:
  std::vector<StateBuffer> state_buffers() const override;

 private:
  LoCore core_;
  LoDecays dec_;
  DeviceBuffer<float> weights_;   // w0 (32x39) | b0 | w1 | b1 | w2 | b2, torch layout
  DeviceBuffer<float> mlp_;       // per step: weights with the time features folded in (see the .cu)
  DeviceBuffer<double> partial_;  // per pass-B work item: 28 sums of squares
  // fast mode: per row of tile2d tensors, its share of layer 1 and its Adafactor factor (kSideWords = 36
  // words, see sf_side)
  DeviceBuffer<float> side_a_;
  DeviceBuffer<uint4> side_b_;  // fast mode: per column of tile2d tensors, its 6 features in bf16
  DeviceBuffer<float> norm_;    // per tensor: 28 normalisers
  DeviceBuffer<LoStepScalars> scalars_;
  struct Passes;  // the kernels' argument structs, set once (the .cu)
  std::unique_ptr<Passes> passes_;
  void make_passes();
};

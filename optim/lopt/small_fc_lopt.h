// small_fc_lopt / μLO (small_fc_lopt.md) and ELO (celo2.md 8), which runs small_fc_lopt's network:
// Adafactor-style accumulators, 39 features (28 normalised per tensor, 11 time features) and a
// 39-32-32-2 MLP per element. They differ in
//   small_fc_lopt: meta-learned decays; g * the trainer's scale; p -= lr 0.01 dir exp(exp_mult mag), then
//                  p -= wd lr p; MuLO's 1/fan_in step scale for hidden matrices (PyLO AdafacLO / MuLO);
//   ELO:           fixed decays (0.9, 0.99, 0.999; v 0.999); g = nan_to_num((g * scale) * global clip);
//                  p -= lr (dir exp(exp_mult mag) + wd p) with p before the step (PyLO ELO_naive),
// which the kernels take as a compile-time flag. Launches per step: setup, [ELO with elo.clip_grad: global
// norm partials, clip factor], pass A, F1, F1b, pass B, F2, pass C (exact fp32, or fast: side tables +
// bf16 tensor cores + exact for the few non-matrix tensors). Files: small_fc_lopt.cu (setup, pass B, F2,
// exact pass C), small_fc_exact.cuh (the exact MLP), small_fc_fast.cu (the tensor-core pass C),
// small_fc_device.cuh (what they share).
#pragma once
#include <memory>

#include "optim/lopt/lo_core.h"
#include "optim/lopt/lo_global_clip.h"
#include "optim/lopt/lopt_weights.h"
#include "optim/optimizer.h"

// Written on the device each step (no host round trip).
struct SfScalars {
  float grad_scale;  // the trainer's clip coefficient (1 without clipping)
  float lr;          // lr times the schedule's factor for this step
  float clip;        // ELO: its own global clip factor (1 when elo.clip_grad is off); unused by small_fc_lopt
  int64_t count;     // earlier steps (the bf16 records' draws, small_fc_lopt.bf16_record)
};

// Which of the two optimizers a SmallFcLopt is.
enum class SmallFcMode {
  kSmallFc,  // small_fc_lopt, options opts.small_fc
  kElo,      // ELO, options opts.elo
};

class SmallFcLopt : public Optimizer {
 public:
  // w: the MetaMLP weights. cross (optimizer.h): ELO's global clip is then over the whole table.
  SmallFcLopt(Arena& arena, const OptimOptions& opts, const SmallFcWeights& w, SmallFcMode mode,
              const Owned& owned = {}, CrossRank* cross = nullptr);
  std::string name() const override { return mode_ == SmallFcMode::kElo ? "elo" : "small_fc_lopt"; }
  void step(const StepInfo& info, cudaStream_t s) override;
  void params_changed() override { psq_ready_ = false; }
  // small_fc_lopt (not ELO, whose gradient is nan_to_num'd): pass A sums the norm's matrices.
  bool take_clip(GradClipper* clipper) override;

 protected:
  std::vector<StateBuffer> state_buffers() const override;

 private:
  struct Rule {  // the settings the passes read, from either optimizer's options
    double lr;
    float wd, exp_mult, step_mult;
    bool fast;
    TieRule tie;
    bool mup;
    bool bf16_records;  // small_fc_lopt.bf16_record (ELO: never)
  };
  static Rule rule_of(const OptimOptions& o, SmallFcMode mode);

  SmallFcMode mode_;
  Rule rule_;
  LoCore core_;
  LoDecays dec_;
  DeviceBuffer<float> weights_;   // w0 (32x39) | b0 | w1 | b1 | w2 | b2, torch layout
  DeviceBuffer<float> mlp_;       // per step: weights with the time features folded in (see the .cu)
  DeviceBuffer<double> partial_;  // per pass-B work item: 28 sums of squares
  // fast mode: per tile work item, the sum of p^2 that pass C takes as it writes p; the next pass B uses it
  // in place of reading the tile's p (psq_ready_), which only the first step after construction or
  // params_changed() must do.
  DeviceBuffer<double> psq_;
  bool psq_ready_ = false;
  // fast mode: per row of tile2d tensors, its share of layer 1 and its Adafactor factor (kSideWords = 36
  // words, see sf_side)
  DeviceBuffer<float> side_a_;
  DeviceBuffer<uint4> side_b_;  // fast mode: per column of tile2d tensors, its 6 features in bf16
  DeviceBuffer<float> norm_;    // per tensor: 28 normalisers
  DeviceBuffer<SfScalars> scalars_;
  std::unique_ptr<LoGlobalClip> clip_;  // ELO with elo.clip_grad
  LoPassB<SfScalars> pass_b_;           // pass B's arguments, set once
  // k16: the records in bf16 (lo_record16.h), small_fc_lopt only.
  template <bool kElo, bool k16>
  void passes(cudaStream_t s);
  template <bool kElo, bool k16>
  void fast_pass_c(cudaStream_t s);  // small_fc_fast.cu
};

// VeLO (velo.md): per-tensor LSTM over all tensors at once, candidate-MLP interpolation, and a
// 30-4-4-3 MLP per element, with PyLO's lr multiplier and decoupled weight decay. The step reads the
// training loss from the device (StepInfo::d_loss). Launches per step: setup, pass A, F1, F1b, pass B,
// F2 (normalisers + LSTM inputs), 4 FP32 GEMMs with three small kernels between them, side tables, pass C.
#pragma once
#include <cublas_v2.h>

#include "optim/lopt/lo_core.h"
#include "optim/lopt/lopt_weights.h"
#include "optim/optimizer.h"

struct VeloScalars {  // written by each step's first kernel
  LoStepScalars step;
  float lstm_shared[18];  // the LSTM inputs every tensor shares: 9 fraction-of-training, 9 loss features
  int64_t count;          // earlier steps (the bf16 records' draws)
};

// The loss features' state (velo.md 4.2), on the device: 10 EMAs of the clipped loss at the decays of
// velo_loss_decays, and their running minima of the bias-corrected EMAs.
struct VeloLossState {
  float decay[10], means[10], running_min[10];
  int64_t it;
};

class Velo : public Optimizer {
 public:
  // cross (optimizer.h): the LSTM's pooling is then over every tensor of the table.
  Velo(Arena& arena, const OptimOptions& opts, const VeloWeights& w, const Owned& owned = {},
       CrossRank* cross = nullptr);
  ~Velo() override;
  std::string name() const override { return "velo"; }
  void step(const StepInfo& info, cudaStream_t s) override;
  void params_changed() override { psq_ready_ = false; }
  bool take_clip(GradClipper* clipper) override;  // pass A sums the norm's matrices

 protected:
  std::vector<StateBuffer> state_buffers() const override;

 private:
  LoCore core_;
  LoDecays dec_;
  int n_ = 0;  // tensors
  // The GEMMs' rows: n_, or in a rank's share of a sharded step as many as the table has tensors (the
  // rows past n_ zero), so that cuBLAS picks the whole table's algorithm and rounds as one GPU does.
  int rows_ = 0;
  void alloc_rows(int rows);
  cublasHandle_t blas_ = nullptr;
  // Weights with their bias as an extra input column (so each GEMM adds it).
  DeviceBuffer<float> w_mix_;   // 1024 x 32: rows 0-511 "linear_1", 512-1023 "linear_2"; col 30 = bias
  DeviceBuffer<float> w_lstm_;  // 2048 x 1028: cols [U (512) | h (512) | bias | pad]
  DeviceBuffer<float> w_out_;   // 257 x 516: rows 0-255 controls, 256 step size; cols [h | bias | pad]
  DeviceBuffer<float> cand_;    // 256 x 159
  // State and scratch.
  DeviceBuffer<float> h_, c_;  // n x 512
  DeviceBuffer<VeloLossState> loss_;
  DeviceBuffer<float> x_;         // n x 32 LSTM inputs (+1 for the bias)
  DeviceBuffer<float> mix_;       // n x 1024
  DeviceBuffer<float> pooled_;    // 512
  DeviceBuffer<float> uh_;        // n x 1028 [U | h | 1 | 0..]
  DeviceBuffer<float> z_;         // n x 2048
  DeviceBuffer<float> hx_;        // n x 516 [h_new | 1 | 0..]
  DeviceBuffer<float> cs_;        // n x 257 controls | lr_mult
  DeviceBuffer<float> theta_;     // n x 159 per-tensor MLP
  DeviceBuffer<double> partial_;  // per pass-B work item: 30 feature sums + 8 old-state sums
  // Per work item, the sum of p^2 that pass C takes as it writes p; the next pass B uses it in place of
  // reading p (psq_ready_), which only the first step after construction or params_changed() must do.
  DeviceBuffer<double> psq_;
  bool psq_ready_ = false;
  DeviceBuffer<float4> side_a_, side_b_;  // per row / column of tile2d tensors: its share of the first layer
  DeviceBuffer<float> norm_;              // n x 32: 30 normalisers, param scale
  DeviceBuffer<VeloScalars> scalars_;
  LoPassB<VeloScalars> pass_b_;  // pass B's arguments, set once
  void pass_c(cudaStream_t s);   // the side tables and pass C (velo_pass_c.cu)
};

// Adafactor with torch.optim.Adafactor semantics (optimizers.md C1): relative step size, RMS-scaled
// step, factored second moment over the last two dims (leading dims are batch), eps1 from fp32,
// update clipping d, decoupled weight decay. Three passes over the arena plus two tiny kernels.
#pragma once
#include <vector>

#include "core/chunks.h"
#include "optim/optimizer.h"

struct AfTensor {  // Adafactor's per-tensor device table
  int64_t p_off, numel;
  int32_t R, C, B;  // last-two-dims view; vectors: R = 1, C = numel, B = 1
  int32_t factored, decay;
  int32_t row_tiles, col_tiles;
  int32_t tile_begin, tile_end;  // this tensor's tiles (per-tile partial sums)
  int32_t pad;
  int64_t rv_off, cv_off;  // row_var [B*R], col_var [B*C] in `factors`
  int64_t var_off;         // variance [numel] in `variance` (vectors)
  int64_t rowpart_off;     // [B][col_tiles][R] row sums of g^2 per column tile
  int64_t colpart_off;     // [B][row_tiles][C] column sums of g^2 per row tile
  int64_t den_off;         // [B] max(mean(row_var), eps1) per slice
};

struct AfItem {  // one block of the factor-reduction kernel
  enum : int32_t { kAlpha = 0, kRows = 1, kCols = 2 };
  int32_t slot, kind, b, c0;
};

struct AfScalars {
  float w;          // t^beta2_decay, the weight of the new g^2 in the lerp
  float wd_factor;  // 1 - lr*wd
  float eps1, eps1sq, grad_scale;
  double rho, eps2, d;
};

class Adafactor : public Optimizer {
 public:
  Adafactor(Arena& arena, const OptimOptions& opts, const Owned& owned = {});
  std::string name() const override { return "adafactor"; }
  void step(const StepInfo& info, cudaStream_t s) override;

 protected:
  std::vector<StateBuffer> state_buffers() const override;

 private:
  int n_tensors_ = 0;
  DeviceBuffer<AfTensor> tensors_;
  DeviceBuffer<Tile> tiles_;
  DeviceBuffer<AfItem> items_;
  DeviceBuffer<float> factors_, variance_;                 // state: row/col vars, full variance of vectors
  DeviceBuffer<float> rowpart_, colpart_, den_, tile_sq_;  // per-step scratch
  DeviceBuffer<double> alpha_;                             // per tensor: relative step, then -alpha/denom
  DeviceBuffer<AfScalars> scalars_;
};

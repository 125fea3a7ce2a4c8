// AdamW with torch fused-AdamW semantics (optimizers.md C3: decoupled weight decay, the bias corrections
// folded into the step size as torch folds them), one launch over every tensor it owns.
#pragma once
#include <vector>

#include "core/chunks.h"
#include "optim/optimizer.h"
#include "optim/step_scalars.cuh"

// The AdamW pass over parts of the arena's tensors (whole, or a rank's part of a cut one), shared by the
// AdamW optimizer and by Muon (for the tensors Muon must not take). m and v are compact buffers over the
// parts, in their order.
class AdamWCore {
 public:
  AdamWCore(const Arena& arena, const std::vector<Part>& parts);
  void run(const AdamWScalars* d_scalars, cudaStream_t s) const;  // one launch
  bool empty() const { return chunks_.size() == 0; }
  DeviceBuffer<float> m, v;

 private:
  const Arena& arena_;
  DeviceBuffer<Chunk> chunks_;
};

class AdamW : public Optimizer {
 public:
  AdamW(Arena& arena, const OptimOptions& opts, const Owned& owned = {});
  std::string name() const override { return "adamw"; }
  void step(const StepInfo& info, cudaStream_t s) override;

 protected:
  std::vector<StateBuffer> state_buffers() const override;

 private:
  AdamWCore core_;
  DeviceBuffer<AdamWScalars> scalars_;
};

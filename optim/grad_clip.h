// Global gradient-norm clipping, deterministic: per-chunk partial sums of g^2 (fixed partition), then
// one block sums them in a fixed order. Writes the norm and torch's clip coefficient
// min(1, max_norm / (norm + 1e-6)) to device memory; optimizers read it through StepInfo, so the
// gradients are never rewritten and the host never waits.
#pragma once
#include "common/device_buffer.h"
#include "core/arena.h"
#include "core/chunks.h"
#include "optim/cross_rank.h"

class GradClipper {
 public:
  // The norm over the tensors `owned` (table indices; empty = all). max_norm <= 0: measure only, scale 1.
  // With `cross` (the sharded data-parallel step) `owned` is this rank's share and the norm is over the
  // whole table: the per-chunk sums are added across ranks before the final sum (core/chunks.h).
  GradClipper(const Arena& arena, float max_norm, const Owned& owned = {}, CrossRank* cross = nullptr);
  void run(cudaStream_t s);  // two launches (and the cross-rank sum)
  const float* d_scale() const { return out_.get(); }
  const float* d_norm() const { return out_.get() + 1; }
  float max_norm() const { return max_norm_; }

 private:
  const Arena& arena_;
  float max_norm_;
  CrossRank* cross_;
  DeviceBuffer<Chunk> chunks_;
  DeviceBuffer<float> partial_, out_;  // out_ = {scale, norm}
};

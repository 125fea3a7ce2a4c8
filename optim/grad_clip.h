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
  // For an optimizer whose first pass reads these gradients anyway (Optimizer::take_clip): the tensors
  // `taken` (table indices) leave the chunk map, and `n_extra` more partial sums follow the chunks', which
  // that pass writes (extra_partials()) before run(); with `cross` they are summed over the ranks with the
  // rest, so every rank numbers them alike. The norm is the same sum in another order. Once.
  void take(const std::vector<int>& taken, int n_extra);
  float* extra_partials() { return partial_.get() + n_chunks_; }
  const float* d_scale() const { return out_.get(); }
  const float* d_norm() const { return out_.get() + 1; }
  float max_norm() const { return max_norm_; }

 private:
  const Arena& arena_;
  float max_norm_;
  CrossRank* cross_;
  std::vector<Chunk> host_chunks_;
  int n_chunks_ = 0;
  DeviceBuffer<Chunk> chunks_;
  DeviceBuffer<float> partial_, out_;  // out_ = {scale, norm}; partial_ = chunks', then extra
};

// PyLO's global-norm gradient clipping for the learned optimizers (optax clip_by_global_norm; celo2.md
// 5.1 and 8, E2): factor = clip_norm / max(N, clip_norm), N the L2 norm of g * (the trainer's scale) over
// the owned tensors. Squares in fp32 as PyLO's (they overflow where PyLO's do), summed in double over a
// fixed partition, the total rounded to fp32 as PyLO's; N NaN gives 1 (PyLO's `denom > 0` test), N
// infinite gives 0 (ref_global_clip_scale). The factor goes to device memory: the host never waits.
#pragma once
#include <cuda_runtime.h>

#include <vector>

#include "common/device_buffer.h"
#include "core/arena.h"
#include "core/chunks.h"
#include "optim/cross_rank.h"

class LoGlobalClip {
 public:
  // With `cross`, `owned` is one rank's share of a sharded step (a tensor may be cut) and N is over the
  // whole table (the per-chunk sums added across ranks, core/chunks.h's plan_table_chunks).
  LoGlobalClip(const Arena& arena, const Owned& owned, double clip_norm, CrossRank* cross = nullptr);
  // Two launches: per-chunk sums of squares, then the factor into *out (device). grad_scale may be null.
  void run(const float* grad_scale, float* out, cudaStream_t s);

 private:
  const Arena& arena_;
  double clip_norm_;
  CrossRank* cross_;
  DeviceBuffer<Chunk> chunks_;
  DeviceBuffer<double> partial_;
};

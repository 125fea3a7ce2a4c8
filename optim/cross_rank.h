// What one rank's share of a sharded optimizer step needs from the other ranks (data parallel, sharded
// mode, core/shard_plan.h): sums and maxima of small device arrays, element by element over the ranks,
// in place and in stream order, so that the step stays free of host waits. An optimizer given one treats
// its owned tensors as its rank's part of the whole table: quantities over all tensors (a global norm,
// VeLO's pooling over tensors) are combined across ranks, and each rank ends with the same value.
// train/nccl_comm implements it; tests/gpu implements it over threads on one GPU.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

class CrossRank {
 public:
  virtual ~CrossRank() = default;
  virtual void sum(float* data, size_t n, cudaStream_t s) = 0;
  virtual void sum(double* data, size_t n, cudaStream_t s) = 0;
  virtual void max(float* data, size_t n, cudaStream_t s) = 0;
};

// Small device-side reductions that keep a step's scalars (the loss) on the GPU, so the host reads them
// only for the log, after the step is enqueued.
#pragma once
#include <cuda_runtime.h>

// *out = mean of x[0..n) (double accumulation in a fixed order, one block).
void mean_reduce(float* out, const float* x, int n, cudaStream_t s);
// *dst = (accumulate ? *dst : 0) + scale * *src (one thread).
void scale_add(float* dst, const float* src, float scale, bool accumulate, cudaStream_t s);

// out[i] = in[0][i] + in[1][i] + ... + in[k-1][i], added left to right in float (out may be one of the
// inputs): --grad-sum copy's sum of the ranks' copies of a chunk, in rank order so that the result does
// not depend on which rank computes it. k <= kMaxAddArrays.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

constexpr int kMaxAddArrays = 8;
struct AddInputs {
  const float* at[kMaxAddArrays];
};

void add_arrays(float* out, AddInputs in, int k, size_t n, cudaStream_t s);

// Column sums of bf16 rows (bias gradients), in two fixed-order stages, so results repeat bit for bit.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/bf16_vec.cuh"
#include "kernels/gelu.h"

// Scratch (floats) that layernorm_backward needs for rows of C columns; it also serves bias_backward and
// gelu_bias_backward for up to 4C columns.
size_t column_sums_scratch_floats(int C);
// db[c] += sum_n dy[n, c] (dy rows of stride ld).
void bias_backward(float* db, const bf16* dy, int ld, int N, int cols, float* scratch, cudaStream_t s);
// The GELU backward and the bias gradient of the layer before it in one pass: d[n, c] *= gelu'(pre[n, c])
// (d and pre rows of stride ld), then db[c] += sum_n d[n, c].
void gelu_bias_backward(float* db, bf16* d, const bf16* pre, int ld, int N, int cols, float* scratch, cudaStream_t s,
                        Gelu kind = Gelu::kTanh);

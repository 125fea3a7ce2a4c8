// GELU in its two forms: the tanh approximation (GPT-2, and cuBLASLt's fused epilogue) and the exact
// erf form u * Phi(u) (timm's ViT). The tanh form's forward is fused into the matmul (kernels/matmul_lt.h);
// the erf form has no cuBLASLt epilogue, so it runs as this elementwise kernel after a bias matmul.
// Both backwards are fused with the bias gradient (gelu_bias_backward in kernels/column_sums.h).
#pragma once
#include <cuda_runtime.h>

#include "kernels/bf16_vec.cuh"
#include "kernels/gelu_kind.h"

// y[n, c] = gelu(pre[n, c]) for N rows of `cols` columns, rows of stride ld in both; y may equal pre.
void gelu_forward(bf16* y, const bf16* pre, int ld, int N, int cols, Gelu kind, cudaStream_t s);

// Kernels of the fp32 GPT-2 model (the reference-grade one; the fast bf16 model uses layernorm.h,
// column_sums.h, crossentropy.h, flash_attention.h and matmul_lt.h).
// Every backward kernel accumulates (+=) into gradients and is deterministic: no float atomics, fixed
// reduction orders, so a resumed run can continue bit for bit.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/dropout.h"

// Embeddings: kernels/embedding.h.

// y = LN(x) * w + b per row (rstd = 1 / sqrt(var + eps)); saves mean and rstd.
void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int N, int C,
                       float eps, cudaStream_t s);
// dx += ..., dw += ..., db += ... (dw, db by columns in a fixed order)
void layernorm_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                        const float* mean, const float* rstd, int N, int C, cudaStream_t s);

// y (N, O) = x (N, I) W^T + b, W (O, I) row-major; rows of y and x have strides ldy and ldx.
void linear_forward(cublasHandle_t h, float* y, int ldy, const float* x, int ldx, const float* W, const float* b, int N,
                    int I, int O, cudaStream_t s);
// dx (+)= dy W (dx may be null), dW += dy^T x, db += column sums of dy (db may be null).
void linear_backward(cublasHandle_t h, float* dx, int lddx, bool dx_accumulate, float* dW, float* db, const float* dy,
                     int lddy, const float* x, int ldx, const float* W, int N, int I, int O, cudaStream_t s);

void gelu_forward(float* y, const float* x, int64_t n, cudaStream_t s);
void gelu_backward(float* dx, const float* x, const float* dy, int64_t n, cudaStream_t s);  // dx = dy * gelu'(x)
void add_inplace(float* y, const float* x, int64_t n, cudaStream_t s);                      // y += x

// Causal multi-head attention without the T x T matrix: one warp per query row, online softmax.
// q, k, v rows have stride `ld` (C for separate projections, 3C for a fused qkv buffer). With `drop` on,
// the probabilities are dropped out (kernels/dropout.h; mask row (b NH + h) T + query, column key);
// lse stays that of the softmax before dropout.
void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v, int ld, int B, int T,
                       int NH, int hs, cudaStream_t s, const DropoutArgs& drop = DropoutArgs());
// dq, dk, dv (rows of stride ld, overwritten) from dout; recomputes the probabilities (and the masks).
void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                        const float* q, const float* k, const float* v, int ld, int B, int T, int NH, int hs,
                        float* scratch_D, cudaStream_t s, const DropoutArgs& drop = DropoutArgs());

// Per row: loss[n] = logsumexp(z) - z[target]; z is replaced by d(mean loss)/dz * grad_scale.
void crossentropy_forward_backward(float* z, float* loss, const int* targets, int N, int V, float grad_scale,
                                   cudaStream_t s);
// Reductions the models and trainers share: kernels/reduce.h.

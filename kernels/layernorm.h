// LayerNorm over rows of C bf16 values (C % 8 == 0: 16-byte vector loads): y = (x - mean) rstd w + b with
// rstd = 1 / sqrt(var + eps); statistics and parameter gradients in fp32, in a fixed order, so results
// repeat bit for bit. GPT-2 uses eps = 1e-5, timm's ViT 1e-6.
#pragma once
#include <cuda_runtime.h>

#include "kernels/bf16_vec.cuh"

// y = LN(x) * w + b per row of C; saves mean and rstd (fp32).
void layernorm_forward(bf16* y, float* mean, float* rstd, const bf16* x, const bf16* w, const bf16* b, int N, int C,
                       float eps, cudaStream_t s);
// One pass: dx += the input gradient (dx is the residual stream's gradient, bf16), and the parameter
// gradients dw[c] += sum_n dy[n, c] * xhat[n, c], db[c] += sum_n dy[n, c] (fp32, fixed order). With
// dsum: dsum[c] += sum_n of the updated dx[n, c] — the bias gradient of the projection that wrote
// this residual stream, which so costs no extra pass over memory. scratch: column_sums_scratch_floats(C).
void layernorm_backward(bf16* dx, float* dw, float* db, const bf16* dy, const bf16* x, const bf16* w, const float* mean,
                        const float* rstd, int N, int C, float* scratch, cudaStream_t s, float* dsum = nullptr);

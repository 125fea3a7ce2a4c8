// The non-matmul kernels of the bf16 GPT-2: LayerNorm, column sums (bias and LayerNorm parameter
// gradients) and the fused softmax + cross-entropy + logit gradient. Activations are bf16, arithmetic
// and statistics fp32, gradients of parameters fp32 (the arena's). Reductions run in a fixed order
// (no float atomics), so results repeat bit for bit. Rows have C % 8 == 0 (16-byte vector loads).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

using bf16 = __nv_bfloat16;

// y = LN(x) * w + b per row of C; saves mean and rstd (fp32).
void layernorm_forward(bf16* y, float* mean, float* rstd, const bf16* x, const bf16* w, const bf16* b, int N, int C, cudaStream_t s);
// Scratch (floats) that layernorm_backward needs for rows of C columns; it also serves bias_backward and
// gelu_bias_backward for up to 4C columns.
size_t column_sums_scratch_floats(int C);
// One pass: dx += the input gradient (dx is the residual stream's gradient, bf16), and the parameter
// gradients dw[c] += sum_n dy[n, c] * xhat[n, c], db[c] += sum_n dy[n, c] (fp32, fixed order). With
// dsum: dsum[c] += sum_n of the updated dx[n, c] — the bias gradient of the projection that wrote
// this residual stream, which so costs no extra pass over memory.
void layernorm_backward(bf16* dx, float* dw, float* db, const bf16* dy, const bf16* x, const bf16* w, const float* mean,
                        const float* rstd, int N, int C, float* scratch, cudaStream_t s, float* dsum = nullptr);
// db[c] += sum_n dy[n, c] (dy rows of stride ld).
void bias_backward(float* db, const bf16* dy, int ld, int N, int cols, float* scratch, cudaStream_t s);
// The GELU backward and the bias gradient of the layer before it in one pass: d[n, c] *= gelu'(pre[n, c])
// (tanh form; d and pre rows of stride ld), then db[c] += sum_n d[n, c].
void gelu_bias_backward(float* db, bf16* d, const bf16* pre, int ld, int N, int cols, float* scratch, cudaStream_t s);

// Per row n of logits z (N rows of V, stride ld): loss[n] = logsumexp(z) - z[target]; z is replaced by
// (softmax(z) - onehot(target)) * scale, in bf16; columns V..ld-1 become 0.
void crossentropy_forward_backward(bf16* z, int ld, float* loss, const int* targets, int N, int V, float scale, cudaStream_t s);

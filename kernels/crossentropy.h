// Softmax cross-entropy over bf16 logits with hard (class index) or soft (distribution) targets, fused with
// the logit gradient.
#pragma once
#include <cuda_runtime.h>

#include "kernels/bf16_vec.cuh"

// Per row n of logits z (N rows of V, stride ld): loss[n] = logsumexp(z) - z[target]; z is replaced by
// (softmax(z) - onehot(target)) * scale, in bf16; columns V..ld-1 become 0.
void crossentropy_forward_backward(bf16* z, int ld, float* loss, const int* targets, int N, int V, float scale,
                                   cudaStream_t s);
// Soft targets t (N rows of V fp32, e.g. label smoothing or mixup): loss[n] = sum_v t[v] (logsumexp(z) - z[v]);
// z is replaced by (sum_v t[v] * softmax(z) - t) * scale, in bf16; columns V..ld-1 become 0.
void crossentropy_soft_forward_backward(bf16* z, int ld, float* loss, const float* targets, int N, int V, float scale,
                                        cudaStream_t s);

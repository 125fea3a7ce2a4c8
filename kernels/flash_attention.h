// Flash attention (forward and backward), causal or not, on bf16 tensor cores, head size 64 (every GPT-2
// size, ViT-S/B/L).
// The T x T score matrix is never stored: scores live in registers one tile at a time, with an online
// softmax in fp32. Deterministic: no atomics, fixed summation orders, so reruns are bit-identical.
// Optional dropout on the attention probabilities, its mask drawn in the kernels (kernels/dropout.h).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/dropout.h"

using bf16 = __nv_bfloat16;

// Multi-head attention over a fused qkv buffer, head size 64; causal: query t sees keys 0..t (GPT-2),
// otherwise all T keys (ViT).
// qkv: (B, T, 3*C) bf16 rows, C = NH*64: q in columns [0,C), k in [C,2C), v in [2C,3C), head h at h*64.
// out: (B, T, C) bf16. lse: (B, NH, T) fp32, natural-log logsumexp of the scaled scores (scale 1/sqrt(64))
// per query row.
// drop: dropout on the attention probabilities P = softmax(Q K^T / 8) (off by default: then the kernels
// are exactly the dropout-free ones). With it, out = (Z * P) V with Z = keep * drop.scale, the mask of
// site drop.site with row (b*NH + h)*T + query and column the key position; lse is still that of the
// undropped scores. The backward must get the same drop (seed, site and *counter unchanged in between).
// Without dropout on a GPU of compute capability 9.0 this runs the Hopper kernel (kernels/flash_attention_sm90.h),
// which gives the same bits as the mma.sync kernel, faster; elsewhere the mma.sync kernel.
void flash_attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, bool causal, cudaStream_t s,
                             const DropoutArgs& drop = DropoutArgs());
// The mma.sync forward on any GPU (the tests and benchmarks compare the two).
void flash_attention_forward_mma(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, bool causal,
                                 cudaStream_t s, const DropoutArgs& drop = DropoutArgs());

// dqkv: (B, T, 3*C) bf16, fully overwritten (dq, dk, dv in the same column layout as qkv).
// scratch: at least B*NH*T floats (for D = rowsum(dout * out)).
// drop: as given to the forward that produced out and lse.
// Without dropout on a GPU of compute capability 9.0 its products run on wgmma, with the same bits.
void flash_attention_backward(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                              float* scratch, int B, int T, int NH, bool causal, cudaStream_t s,
                              const DropoutArgs& drop = DropoutArgs());
// The mma.sync backward on any GPU (the tests and benchmarks compare the two).
void flash_attention_backward_mma(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                                  float* scratch, int B, int T, int NH, bool causal, cudaStream_t s,
                                  const DropoutArgs& drop = DropoutArgs());

// Flash attention on Hopper's wgmma (kernels/flash_attention_fwd_sm90.cu, _bwd_sm90.cu): the contract of
// kernels/flash_attention.h without dropout, for GPUs of compute capability 9.0 in a build for them (make
// GPU_ARCH=90, the default), and the mma.sync kernels' bits. flash_attention_forward and _backward call these
// where they can run; elsewhere the mma.sync kernels run.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

using bf16 = __nv_bfloat16;

// This build has the sm_90a kernel and the current GPU can run it.
bool flash_attention_sm90_available();
// As flash_attention_forward (no dropout); stops with a sentence where flash_attention_sm90_available() is false.
void flash_attention_forward_sm90(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, bool causal,
                                  cudaStream_t s);
// flash_attention_backward's two kernels of products, given D = rowsum(dout * out) (B, NH, T) already computed.
void flash_attention_backward_sm90(bf16* dqkv, const float* Dsum, const bf16* dout, const float* lse, const bf16* qkv,
                                   int B, int T, int NH, bool causal, cudaStream_t s);

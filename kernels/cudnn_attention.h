// cuDNN's fused flash attention (forward and backward) behind exactly the contract of our own kernels
// (kernels/flash_attention.h): qkv (B, T, 3C) bf16 rows with q, k, v in column blocks [0,C), [C,2C), [2C,3C)
// and head h at h*64; out (B, T, C) bf16; lse (B, NH, T) fp32, the natural-log logsumexp of the scores
// scaled by 1/8; dqkv (B, T, 3C) fully overwritten; causal (GPT-2) or not (ViT, any T). No dropout.
//
// Built on cuDNN's backend graph API (cudnn_graph.h) directly: each direction is one operation graph of
// matmuls, pointwise ops and row reductions (the SDPA pattern that cuDNN's fused attention engine matches;
// the .cu file spells it out), strided views straight into qkv, no copies. Building a graph and its plan is
// slow (the engine compiles at run time), so plans are built on first use and cached per (B, T, NH, causal,
// direction); the workspace is this object's and grows as plans need.
//
// Determinism. cuDNN's usual backward accumulates dQ over key tiles with fp32 atomics (a dQ_accum buffer),
// so reruns may differ in the last bits (cuDNN's engine notes do not say either way). Written with dQ = dS K
// as one matmul of its own instead, the graph selects cuDNN's "dP workspace" backward (dS staged in the
// workspace, B*NH*T^2 bf16, 1.6 GB at 64 x 12 x 1024), which has no atomics: that is `deterministic` (the
// default, --attention cudnn); --attention cudnn-nondet takes the atomic one. tests/gpu/test_cudnn_attention.cu
// checks the deterministic reruns bit for bit on a GPU and prints what the atomic ones do.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>

using bf16 = __nv_bfloat16;

class CudnnAttention {
 public:
  explicit CudnnAttention(bool deterministic = true);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // As flash_attention_forward (without dropout).
  void forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, bool causal, cudaStream_t s);
  // As flash_attention_backward (without dropout); scratch (B*NH*T floats) holds rowsum(dout * out).
  void backward(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv, float* scratch, int B,
                int T, int NH, bool causal, cudaStream_t s);

  bool deterministic() const { return deterministic_; }
  // One line per plan built so far: direction, shape, cuDNN's engine, workspace and numerical notes.
  std::string plans() const;
  // The version of the cuDNN library loaded (e.g. 91900 for 9.19.0).
  static int version();
  // Why the loaded cuDNN cannot run this backward (its known bugs, T = 1), or empty where it can; backward
  // stops with this sentence.
  static std::string backward_refusal(int T, bool causal);

 private:
  struct Impl;
  bool deterministic_;
  std::unique_ptr<Impl> impl_;
};

// One pre-LayerNorm transformer block in mixed precision, shared by GPT-2 and ViT:
//   mid = in + dropout(proj(attention(LN1(in))))      out = mid + dropout(fc_proj(gelu(fc(LN2(mid)))))
// bf16 activations and weights (the arena's bf16 copy), cuBLASLt matmuls with fp32 accumulation (bias and
// the tanh GELU fused into epilogues, the residual add folded into the projections' accumulate unless
// dropout stands between), flash attention (causal or not; ours or cuDNN's), fp32 LayerNorm statistics, fp32 gradients
// accumulated straight into the arena. q, k, v are always one (3C, C) matmul: the table keeps separate
// q/k/v matrices contiguous, so the separate and fused layouts compute alike.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

#include "common/device_buffer.h"
#include "core/arena.h"
#include "kernels/attention_kind.h"
#include "kernels/cudnn_attention.h"
#include "kernels/dropout_kernels.h"
#include "kernels/matmul_lt.h"
#include "kernels/op_timer.h"
#include "models/block_table.h"

// What every block of a model shares. Blocks run one at a time, so one set of activation-gradient buffers
// serves them all.
struct BlockContext {
  BlockContext(const BlockShape& s, const Arena& arena, const DropoutState& dropout, int B, int T,
               Attention attention = Attention::kOurs);
  LtMatmul mm;
  const Arena& arena;
  const DropoutState& dropout;
  OpTimer prof;  // GPT2_PROFILE=1: time per operation
  // Where the tanh GELU's backward runs: in the fc projection's dx matmul (cuBLASLt's DGELU epilogue), or
  // after a plain matmul, in the kernel that sums the fc bias gradient. The erf GELU always takes the kernel.
  bool gelu_in_epilogue = true;
  std::unique_ptr<CudnnAttention> cudnn;    // --attention cudnn: its plans and workspace; null: our kernels
  DeviceBuffer<bf16> dln, datt, dqkv, dfc;  // datt also holds a projection's output before its dropout
  DeviceBuffer<float> scratch;              // column sums, attention's row sums
  const bf16* W(int64_t off) const { return arena.params_bf16() + off; }
  float* G(int64_t off) const { return arena.grads() + off; }
};

class TransformerBlock {
 public:
  TransformerBlock(const BlockShape& s, const BlockTensors& ix, const ParamTable& t, BlockSites sites, int B, int T);
  // out = block(in), both (B*T, C). `in` must hold its values until backward.
  void forward(bf16* out, const bf16* in, BlockContext& c, cudaStream_t s);
  // dres: d(out) on entry, d(in) on return. in: as given to forward. in_bias_grad: the bias gradient of the
  // projection whose output is `in` (the previous block's MLP projection), which this block's first
  // LayerNorm backward can sum for free; null when there is none or with dropout.
  // mlp_final (if set) is called between the MLP's backward and the attention's, when the MLP's tensors
  // (block_mlp_list) hold their gradients.
  void backward(bf16* dres, const bf16* in, float* in_bias_grad, BlockContext& c, cudaStream_t s,
                const std::function<void()>& mlp_final = nullptr);
  // The gradient of this block's MLP-projection bias, for the LayerNorm backward after the block.
  float* out_bias_grad(const BlockContext& c) const { return c.G(fcprojb_); }
  // Times the two places of the tanh GELU's backward on this block's buffers (overwritten before use).
  bool gelu_epilogue_faster(BlockContext& c);

 private:
  void project_into_stream(bf16* out, const bf16* stream, const bf16* x, int I, int64_t w, int64_t b, uint32_t site,
                           BlockContext& c, cudaStream_t s);
  const bf16* branch_grad(const bf16* dres, float* dbias, uint32_t site, BlockContext& c, cudaStream_t s);
  void mlp_backward(bf16* dres, BlockContext& c, cudaStream_t s);
  void attention_backward(bf16* dres, const bf16* in, float* in_bias_grad, BlockContext& c, cudaStream_t s);
  void attention_kernels_forward(BlockContext& c, cudaStream_t s);
  void attention_kernels_backward(bf16* dqkv, BlockContext& c, cudaStream_t s);

  BlockShape s_;
  BlockSites sites_;
  int B_, T_, N_;
  // offsets into the arena (the bf16 copy and the fp32 gradients share them)
  int64_t ln1w_, ln1b_, qkvw_, qkvb_, projw_, projb_, ln2w_, ln2b_, fcw_, fcb_, fcprojw_, fcprojb_;
  // activations: mid = the stream after attention; fc_pre = the MLP's pre-activation, fc = gelu(fc_pre)
  DeviceBuffer<bf16> ln1_, qkv_, att_, mid_, ln2_, fc_pre_, fc_;
  DeviceBuffer<float> ln1_mean_, ln1_rstd_, lse_, ln2_mean_, ln2_rstd_;
};

// GPT-2 in mixed precision (the fast Gpt2Net): bf16 activations and weight copy, cuBLASLt tensor-core
// matmuls with fp32 accumulation (bias, GELU and GELU-gradient fused into their epilogues, residual
// adds folded into the projections' accumulate unless dropout stands between), flash attention, fp32 LayerNorm
// statistics, fp32 gradients accumulated straight into the arena. q, k, v are always one (3C, C) matmul: the parameter
// table keeps separate q/k/v matrices contiguous, so the separate and fused layouts compute alike.
#pragma once
#include <vector>

#include "common/device_buffer.h"
#include "kernels/embedding.h"
#include "kernels/matmul_lt.h"
#include "kernels/op_timer.h"
#include "models/gpt2_net.h"

class Gpt2Bf16 : public Gpt2Net {
 public:
  Gpt2Bf16(const Gpt2Shape& shape, Arena& arena, int B, int T);
  using Gpt2Net::set_batch;
  void set_batch(const Batch& b, cudaStream_t s) override;
  void forward(cudaStream_t s) override;
  void loss_and_dlogits(float grad_scale, cudaStream_t s) override;
  void backward(cudaStream_t s) override;
  const float* d_loss() const override { return loss_mean_.get(); }
  void logits_to_host(int first, int count, float* host) const override;
  int B() const override { return B_; }
  int T() const override { return T_; }
  std::string kernel_choices() const override;
  void set_kernel_choices(const std::string& choices) override;

 private:
  struct Layer {
    // offsets into the arena (the bf16 copy and the fp32 gradients share them)
    int64_t ln1w, ln1b, qkvw, qkvb, projw, projb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
    // activations: res = the residual stream entering the layer; mid = after attention
    DeviceBuffer<bf16> res, ln1, qkv, att, mid, ln2, fc_pre, fc;
    DeviceBuffer<float> ln1_mean, ln1_rstd, lse, ln2_mean, ln2_rstd;
  };
  bool gelu_in_epilogue_faster();
  void project_into_stream(bf16* out, const bf16* stream, const bf16* x, int I, int64_t w, int64_t b, uint32_t site,
                           cudaStream_t s);
  const bf16* branch_grad(const bf16* dres, float* dbias, uint32_t site, cudaStream_t s);
  const bf16* W(int64_t off) const { return arena_.params_bf16() + off; }
  float* G(int64_t off) const { return arena_.grads() + off; }

  Gpt2Shape s_;
  Arena& arena_;
  // Vp_: the vocabulary padded to a multiple of 128. The head runs over wte's zero padding rows (the
  // table reserves them): cuBLASLt is 4-8x slower when a matmul dimension is 50257.
  int B_, T_, N_, Vp_;
  int64_t wte_, wpe_, lnfw_, lnfb_;
  LtMatmul mm_;
  OpTimer prof_;  // GPT2_PROFILE=1
  std::vector<Layer> layers_;
  DeviceBuffer<bf16> res_final_, lnf_, logits_, dres_, dln_, datt_, dqkv_, dfc_;
  DeviceBuffer<float> lnf_mean_, lnf_rstd_, losses_, loss_mean_, scratch_;
  TokenBatch batch_;
  // Where the GELU backward runs: in the fc projection's dx matmul (cuBLASLt's DGELU epilogue), or
  // after a plain matmul, in the kernel that sums the fc bias gradient (gelu_bias_backward).
  bool gelu_in_epilogue_ = true;
};

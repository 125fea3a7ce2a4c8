// Gpt2Bf16: the fast, mixed-precision GPT-2, the implementation of Gpt2 that trains (--precision bf16).
// Token + position embedding, the shared transformer blocks (models/transformer_block: causal, tanh GELU,
// LayerNorm epsilon 1e-5), a final LayerNorm and the head tied to the token embedding; bf16 activations,
// fp32 master weights and gradients in the arena.
#pragma once
#include <memory>
#include <vector>

#include "common/device_buffer.h"
#include "kernels/embedding.h"
#include "models/gpt2.h"
#include "models/transformer_block.h"

class Gpt2Bf16 : public Gpt2 {
 public:
  Gpt2Bf16(const Gpt2Shape& shape, Arena& arena, int B, int T, Attention attention = Attention::kOurs);
  using Gpt2::set_batch;
  void set_batch(const Batch& b, cudaStream_t s) override;
  void forward(cudaStream_t s) override;
  void loss_and_dlogits(float grad_scale, cudaStream_t s) override;
  void backward(cudaStream_t s) override;
  const float* d_loss() const override { return loss_mean_.get(); }
  void logits_to_host(int first, int count, float* host) const override;
  int B() const override { return B_; }
  int T() const override { return T_; }
  EmbeddingParts sum_embedding_in_parts(const EmbeddingSum& e) override;
  bool calls_mlp_hook() const override { return true; }
  std::string kernel_choices() const override;
  void set_kernel_choices(const std::string& choices) override;

 private:
  Gpt2Shape s_;
  Arena& arena_;
  // Vp_: the vocabulary padded to a multiple of 128. The head runs over wte's zero padding rows (the
  // table reserves them): cuBLASLt is 4-8x slower when a matmul dimension is 50257.
  int B_, T_, N_, Vp_;
  int64_t wte_, wpe_, lnfw_, lnfb_;
  BlockContext ctx_;
  std::vector<TransformerBlock> blocks_;
  std::vector<DeviceBuffer<bf16>> stream_;  // the residual stream entering block l; stream_[L] enters ln_f
  DeviceBuffer<bf16> lnf_, logits_, dres_;
  DeviceBuffer<float> lnf_mean_, lnf_rstd_, losses_, loss_mean_;
  TokenBatch batch_;
  int wte_index_, wpe_index_, lnfw_index_, lnfb_index_;  // table indices
  // sum_embedding_in_parts: every process's token sums (shared_: mapped, rank by rank), or every process's
  // token ids and residual gradients, grouped by token
  EmbeddingSum emb_;
  std::vector<void*> shared_;
  DeviceBuffer<int> tokens_all_;
  DeviceBuffer<bf16> dres_all_;
  std::unique_ptr<TokenGroups> groups_all_;
  void embedding_backward(bool parts, cudaStream_t s);
};

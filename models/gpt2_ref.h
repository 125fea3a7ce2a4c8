// CPU reference GPT-2 in double precision: the oracle for the GPU model. Token and learned position
// embeddings, pre-LayerNorm blocks (the reference block, models/ref_block: causal attention, tanh GELU),
// a final LayerNorm, an LM head tied to the token embedding, mean cross-entropy over all B*T positions.
// Parameters and gradients use the arena's flat layout (gpt2_param_table), so the same buffers feed the
// GPU model and the optimizers.
#pragma once
#include <cstdint>
#include <vector>

#include "models/model_tables.h"
#include "models/ref_block.h"
#include "models/ref_ops.h"

// GPT-2 initialisation as its table says (gpt2_param_table): init_params after checking the table is
// GPT-2's. Deterministic in `seed`; fp32 in the arena's layout.
std::vector<float> gpt2_init(const ParamTable& table, const Gpt2Shape& s, uint64_t seed);

class Gpt2Ref {
 public:
  Gpt2Ref(const Gpt2Shape& shape, const ParamTable& table);
  // Mean cross-entropy of `targets` given `tokens` (B*T each); keeps what backward needs.
  double forward(const std::vector<double>& params, const std::vector<int>& tokens, const std::vector<int>& targets,
                 int B, int T);
  // Gradient of the last forward's loss, in the flat layout (padding zero).
  std::vector<double> backward(const std::vector<double>& params);
  const std::vector<double>& logits() const { return logits_; }  // (B, T, V) of the last forward
  // Dropout as the GPU models do it (kernels/dropout.h): probability p, masks of micro-batch `counter`.
  void set_dropout(float p, uint64_t seed, uint64_t counter) { drop_ = RefDropout{p, seed, counter}; }

 private:
  void embed(const double* P, std::vector<double>* x) const;
  double head_loss(const double* P);
  Gpt2Shape s_;
  const ParamTable& t_;
  Gpt2Tensors ix_;
  std::vector<RefBlock> blocks_;  // with GPT-2's dropout sites (models/gpt2_sites.h)
  int B_ = 0, T_ = 0;
  RefDropout drop_;
  std::vector<int> tokens_, targets_;
  std::vector<RefBlockActs> acts_;  // one per block
  std::vector<double> x_final, lnf, lnf_mean, lnf_rstd, logits_, probs_;
};

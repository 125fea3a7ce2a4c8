// CPU reference GPT-2 in double precision: the oracle for the GPU model. Pre-LayerNorm blocks, learned
// position embeddings, LM head tied to the token embedding, GELU (tanh), causal attention, mean
// cross-entropy over all B*T positions. Parameters and gradients use the arena's flat layout
// (gpt2_param_table), so the same buffers feed the GPU model and the optimizers.
#pragma once
#include <cstdint>
#include <vector>

#include "models/model_tables.h"

// GPT-2 initialisation as its table says (gpt2_param_table): init_params after checking the table is
// GPT-2's. Deterministic in `seed`; fp32 in the arena's layout.
std::vector<float> gpt2_init(const ParamTable& table, const Gpt2Shape& s, uint64_t seed);

class Gpt2Ref {
 public:
  Gpt2Ref(const Gpt2Shape& shape, const ParamTable& table) : s_(shape), t_(table), ix_(gpt2_tensors(table, shape)) {}
  // Mean cross-entropy of `targets` given `tokens` (B*T each); keeps what backward needs.
  double forward(const std::vector<double>& params, const std::vector<int>& tokens, const std::vector<int>& targets,
                 int B, int T);
  // Gradient of the last forward's loss, in the flat layout (padding zero).
  std::vector<double> backward(const std::vector<double>& params);
  const std::vector<double>& logits() const { return logits_; }  // (B, T, V) of the last forward
  // Dropout as the GPU models do it (kernels/dropout.h): probability p, masks of micro-batch `counter`.
  void set_dropout(float p, uint64_t seed, uint64_t counter) { p_ = p, seed_ = seed, counter_ = counter; }

 private:
  struct Layer {  // activations of one block, all (B*T, ...) row-major
    std::vector<double> x_in, ln1, ln1_mean, ln1_rstd, q, k, v, att, att_keep, ctx, x_mid, ln2, ln2_mean, ln2_rstd, fc,
        gelu;
  };
  // The dropout factor (0 or 1 / (1 - p); 1 without dropout) of element (row, col) of a site.
  double keep(uint32_t site, uint32_t row, uint32_t col) const;
  Gpt2Shape s_;
  const ParamTable& t_;
  Gpt2Tensors ix_;
  int B_ = 0, T_ = 0;
  float p_ = 0.0f;
  uint64_t seed_ = 0, counter_ = 0;
  std::vector<int> tokens_, targets_;
  std::vector<Layer> layers_;
  std::vector<double> x_final, lnf, lnf_mean, lnf_rstd, logits_, probs_;
};

// One pre-LayerNorm transformer block as the parameter table sees it: its shape and options, the names of
// its tensors (one spelling per model family), and the function that adds a block's tensors to a table
// and records their indices. GPT-2 and ViT build their tables from it, and the GPU block
// (models/transformer_block) and the CPU reference (models/ref_block) read their offsets through it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/param_table.h"
#include "kernels/gelu_kind.h"

struct BlockShape {
  int channels = 768, heads = 12, hidden = 3072;  // hidden: the MLP's width
  bool causal = true;                             // GPT-2: causal attention; ViT: every token sees every token
  float ln_eps = 1e-5f;                           // LayerNorm epsilon (GPT-2 1e-5, timm's ViT 1e-6)
  Gelu gelu = Gelu::kTanh;
  bool separate_qkv = true;  // q, k, v as three (C, C) matrices (the PyLO paper's setting) or one (3C, C)
};

// A block's tensor names after its prefix: GPT-2's ("ln_1", "mlp.fc", ...) or timm's ViT ("norm1",
// "mlp.fc1", ...). q/k/v are "attn.<q>.weight" etc. when separate, "attn.<qkv>.weight" when fused.
struct BlockNames {
  const char *ln1, *q, *k, *v, *qkv, *proj, *ln2, *fc, *fc_proj;
};
extern const BlockNames kGpt2BlockNames, kTimmBlockNames;

// How the block's weight matrices start (biases zero, LayerNorm gains one): normal(0, std), the two
// projections into the residual stream normal(0, proj_std).
struct BlockInit {
  float std = 0.02f, proj_std = 0.02f;
};

// The table indices of one block's tensors.
struct BlockTensors {
  int ln1w, ln1b, ln2w, ln2b;
  int qkvw[3], qkvb[3];  // q, k, v (separate) or [0] = the fused (3C, C) matrix and (3C) bias, [1..2] = -1
  int projw, projb, fcw, fcb, fcprojw, fcprojb;
};

// What the GPU block reads as one piece: with separate q/k/v, the three weights as one (3C, C) matrix and
// the three biases as one (3C) vector, so each trio must lie back to back in the arena's layout.
bool qkv_is_one_piece(const ParamTable& t, const BlockTensors& b);

// Every table index of the block's tensors (the unused q/k/v slots of a fused block left out), ascending.
std::vector<int> block_tensor_list(const BlockTensors& b);
// Its MLP's (ln_2, fc, fc_proj; 2/3 of a block's weights), ascending: final before the attention's backward.
std::vector<int> block_mlp_list(const BlockTensors& b);
// The tensors each call of a model's backward hook (model.h) makes final: group l holds block l's tensors
// (the hook's block l), group L = blocks.size() every other tensor of the table (the hook's -1).
std::vector<std::vector<int>> hook_groups(const ParamTable& t, const std::vector<BlockTensors>& blocks);

// The dropout sites (kernels/dropout.h) of one block's three places: the attention probabilities, the
// attention projection's output and the MLP projection's output.
struct BlockSites {
  uint32_t attention, attn_proj, mlp_proj;
};

// Adds the block's tensors under `prefix` (e.g. "h.3."), in the order the GPU block expects: with separate
// q/k/v the three weights, then the three biases, so that each trio is one contiguous (3C, C) / (3C) block.
BlockTensors add_block(ParamTable& t, const std::string& prefix, const BlockShape& s, const BlockNames& names,
                       const BlockInit& init);

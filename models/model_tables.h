// Parameter tables of the models this project trains, shared by the training programs and the
// benchmarks so both always see the same shapes, roles and weight-decay flags.
#pragma once
#include <string>

#include "core/param_table.h"
#include "models/block_table.h"

constexpr float kGpt2LnEps = 1e-5f;  // GPT-2's LayerNorm epsilon
struct Gpt2Shape {
  int layers = 12, channels = 768, heads = 12;
  int vocab = 50257, max_seq = 1024;
  bool separate_qkv = true;  // q, k, v as three (C, C) matrices (the PyLO paper's setting) or one (3C, C)
  // GPT-2's blocks: causal attention, LayerNorm epsilon 1e-5, tanh GELU, MLP width 4C.
  BlockShape block() const { return {channels, heads, 4 * channels, true, kGpt2LnEps, Gelu::kTanh, separate_qkv}; }
};
// "d12" | "d24" | "d36" | "d48" or "124m" | "355m" | "774m" | "1558m"; UserError otherwise.
Gpt2Shape gpt2_shape(const std::string& name);
// The table indices of GPT-2's tensors, recorded by the function that names them (gpt2_param_table), so
// that the models, the reference and the tools never spell a tensor name.
struct Gpt2Tensors {
  int wte, wpe, lnfw, lnfb;
  std::vector<BlockTensors> blocks;
};
// wte reserves gpt2_padded_vocab rows: the model's head matmul runs over the padded (zero) rows.
// Initialisation (in the table): N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 L)), zero biases,
// LayerNorm gains 1.
ParamTable gpt2_param_table(const Gpt2Shape& s, Gpt2Tensors* indices = nullptr);
// The indices of `t`, a table that gpt2_param_table(s) built.
Gpt2Tensors gpt2_tensors(const ParamTable& t, const Gpt2Shape& s);
inline int gpt2_padded_vocab(int vocab) { return (vocab + 127) / 128 * 128; }

// A ViT as timm's vit_*_patch16_224 define it: a patch embedding (a patch x patch stride-patch convolution),
// a cls token, learned position embeddings, pre-LN blocks (LayerNorm epsilon 1e-6, exact erf GELU, MLP
// ratio 4, attention without a mask), a final LayerNorm and a linear head on the cls token.
struct VitShape {
  int layers = 12, channels = 768, heads = 12;
  int image = 224, patch = 16, in_chans = 3, classes = 1000;
  bool separate_qkv = false;  // timm fuses q, k, v; the PyLO paper found separate matrices help learned optimizers
  int grid() const { return image / patch; }
  int tokens() const { return grid() * grid() + 1; }  // patches plus the cls token
  int patch_dim() const { return in_chans * patch * patch; }
  BlockShape block() const { return {channels, heads, 4 * channels, false, 1e-6f, Gelu::kErf, separate_qkv}; }
};
// "vit-ti16" | "vit-s16" | "vit-b16" | "vit-l16" (224 x 224, 1000 classes; any patch size may replace 16,
// e.g. "vit-ti4" for small images: set image/in_chans/classes after), or "vit-test" (2 layers of width 64,
// for tests); UserError otherwise. The image size must be a multiple of the patch size (vit_param_table checks).
VitShape vit_shape(const std::string& name);
struct VitTensors {
  int cls, pos, patchw, patchb, normw, normb, headw, headb;
  std::vector<BlockTensors> blocks;
};
// timm's names (blocks.N.norm1.weight, ...) and initialisation: linear weights N(0, 0.02) with zero biases,
// position embeddings N(0, 0.02), cls token N(0, 1e-6), the patch embedding PyTorch's default for a
// convolution, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias.
ParamTable vit_param_table(const VitShape& s, VitTensors* indices = nullptr);
VitTensors vit_tensors(const ParamTable& t, const VitShape& s);

// "gpt2-124m" ... "gpt2-1558m" (separate q/k/v) or "vit-b16" (fused qkv, as timm); UserError otherwise.
ParamTable model_table_by_name(const std::string& name);

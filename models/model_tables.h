// Parameter tables of the models this project trains, shared by the training programs and the
// benchmarks so both always see the same shapes, roles and weight-decay flags.
#pragma once
#include <string>

#include "core/param_table.h"

struct Gpt2Shape {
  int layers = 12, channels = 768, heads = 12;
  int vocab = 50257, max_seq = 1024;
  bool separate_qkv = true;  // q, k, v as three (C, C) matrices (the PyLO paper's setting) or one (3C, C)
};
constexpr float kGpt2LnEps = 1e-5f;  // GPT-2's LayerNorm epsilon
// "d12" | "d24" | "d36" | "d48" or "124m" | "355m" | "774m" | "1558m"; UserError otherwise.
Gpt2Shape gpt2_shape(const std::string& name);
// The table indices of GPT-2's tensors, recorded by the function that names them (gpt2_param_table), so
// that the models, the reference and the tools never spell a tensor name.
struct Gpt2BlockTensors {
  int ln1w, ln1b, ln2w, ln2b;
  int qkvw[3], qkvb[3];  // q, k, v (separate) or [0] = the fused (3C, C) matrix and (3C) bias, [1..2] = -1
  int projw, projb, fcw, fcb, fcprojw, fcprojb;
};
struct Gpt2Tensors {
  int wte, wpe, lnfw, lnfb;
  std::vector<Gpt2BlockTensors> blocks;
};
// wte reserves gpt2_padded_vocab rows: the model's head matmul runs over the padded (zero) rows.
// Initialisation (in the table): N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 L)), zero biases,
// LayerNorm gains 1.
ParamTable gpt2_param_table(const Gpt2Shape& s, Gpt2Tensors* indices = nullptr);
// The indices of `t`, a table that gpt2_param_table(s) built.
Gpt2Tensors gpt2_tensors(const ParamTable& t, const Gpt2Shape& s);
inline int gpt2_padded_vocab(int vocab) { return (vocab + 127) / 128 * 128; }

struct VitShape {
  int layers = 12, channels = 768, heads = 12, mlp = 3072;
  int image = 224, patch = 16, in_chans = 3, classes = 1000;
};
ParamTable vit_param_table(const VitShape& s);  // timm vit_base_patch16_224 layout (fused qkv)

// "gpt2-124m" ... "gpt2-1558m" (separate q/k/v) or "vit-b16"; UserError otherwise.
ParamTable model_table_by_name(const std::string& name);

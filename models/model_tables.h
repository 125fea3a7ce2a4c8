// Parameter tables of the models this project trains, shared by the training programs and the
// benchmarks so both always see the same shapes, roles and weight-decay flags.
#pragma once
#include <string>

#include "optim/param_table.h"

struct Gpt2Shape {
  int layers = 12, channels = 768, heads = 12;
  int vocab = 50257, max_seq = 1024;
  bool separate_qkv = true;  // q, k, v as three (C, C) matrices (the PyLO paper's setting) or one (3C, C)
};
// "d12" | "d24" | "d36" | "d48" or "124m" | "355m" | "774m" | "1558m"; UserError otherwise.
Gpt2Shape gpt2_shape(const std::string& name);
// wte reserves gpt2_padded_vocab rows: the model's head matmul runs over the padded (zero) rows.
ParamTable gpt2_param_table(const Gpt2Shape& s);
inline int gpt2_padded_vocab(int vocab) { return (vocab + 127) / 128 * 128; }

struct VitShape {
  int layers = 12, channels = 768, heads = 12, mlp = 3072;
  int image = 224, patch = 16, in_chans = 3, classes = 1000;
};
ParamTable vit_param_table(const VitShape& s);  // timm vit_base_patch16_224 layout (fused qkv)

// "gpt2-124m" ... "gpt2-1558m" (separate q/k/v) or "vit-b16"; UserError otherwise.
ParamTable model_table_by_name(const std::string& name);

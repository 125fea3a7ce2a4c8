// The tiny GPT-2 that both GPU model suites check against the CPU reference: 2 layers, vocabulary 67,
// B = 2, T = 40 (a sequence longer than a warp), GPT-2 initial weights plus noise, random tokens with
// one token repeated (the grouped embedding backward must sum it), optionally dropout (the masks of
// micro-batch `dropout_counter`), and the reference's loss, logits and gradients in double precision.
#pragma once
#include <random>
#include <vector>

#include "common/bf16_host.h"
#include "models/gpt2_ref.h"

struct TinyGpt2Case {
  Gpt2Shape s;
  ParamTable table;
  int B = 2, T = 40;
  float dropout = 0.0f;
  uint64_t dropout_seed = 21, dropout_counter = 6;
  std::vector<float> p;
  std::vector<int> x, y;
  double loss_ref = 0;
  std::vector<double> logits_ref, g_ref;
};

// bf16_params: round the parameters to bf16, as the bf16 model stores them, so that the reference sees
// exactly what the GPU sees.
inline TinyGpt2Case tiny_gpt2_case(int channels, int heads, bool separate_qkv, bool bf16_params, float dropout = 0.0f) {
  TinyGpt2Case c;
  c.dropout = dropout;
  c.s.layers = 2, c.s.channels = channels, c.s.heads = heads, c.s.vocab = 67, c.s.max_seq = 48, c.s.separate_qkv = separate_qkv;
  c.table = gpt2_param_table(c.s);
  c.p = gpt2_init(c.table, c.s, 5);
  std::mt19937 rng(11);
  std::normal_distribution<float> z(0.0f, 0.05f);
  for (const auto& t : c.table.tensors())
    for (int64_t i = 0; i < t.numel; i++) {
      float& v = c.p[size_t(t.offset + i)];
      v = bf16_params ? bf16_round(v + z(rng)) : v + z(rng);
    }
  c.x.resize(size_t(c.B * c.T)), c.y.resize(size_t(c.B * c.T));
  for (auto& v : c.x) v = int(rng() % 67);
  for (auto& v : c.y) v = int(rng() % 67);
  c.x[3] = c.x[17] = c.x[50] = 9;
  Gpt2Ref ref(c.s, c.table);
  ref.set_dropout(dropout, c.dropout_seed, c.dropout_counter);
  const std::vector<double> pd(c.p.begin(), c.p.end());
  c.loss_ref = ref.forward(pd, c.x, c.y, c.B, c.T);
  c.logits_ref = ref.logits();
  c.g_ref = ref.backward(pd);
  return c;
}

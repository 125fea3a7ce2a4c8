// The tiny GPT-2 that both GPU model suites check against the CPU reference: 2 layers, vocabulary 67,
// B = 2, T = 40 (a sequence longer than a warp), GPT-2 initial weights plus noise, random tokens with
// one token repeated (the grouped embedding backward must sum it), optionally dropout (the masks of
// micro-batch `dropout_counter`), and the reference's loss, logits and gradients in double precision.
#pragma once
#include <random>
#include <vector>

#include "common/bf16_host.h"
#include "common/cuda_check.h"
#include "models/gpt2.h"
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
  c.s.layers = 2;
  c.s.channels = channels;
  c.s.heads = heads;
  c.s.vocab = 67;
  c.s.max_seq = 48;
  c.s.separate_qkv = separate_qkv;
  c.table = gpt2_param_table(c.s);
  c.p = gpt2_init(c.table, c.s, 5);
  std::mt19937 rng(11);
  std::normal_distribution<float> z(0.0f, 0.05f);
  for (const auto& t : c.table.tensors())
    for (int64_t i = 0; i < t.numel; i++) {
      float& v = c.p[size_t(t.offset + i)];
      v = bf16_params ? bf16_round(v + z(rng)) : v + z(rng);
    }
  c.x.resize(size_t(c.B * c.T));
  c.y.resize(size_t(c.B * c.T));
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

// One micro-batch of the case through a GPU model on `arena` (built from c.table, gradients zeroed
// first), with the case's dropout masks: logits, loss, gradients, and the dropout counter afterwards.
struct TinyGpt2Run {
  std::vector<float> logits, grads;
  float loss = 0;
  uint64_t counter_after = 0;
};
inline TinyGpt2Run run_tiny_gpt2(Gpt2& m, Arena& arena, const TinyGpt2Case& c) {
  TinyGpt2Run r;
  m.set_dropout(c.dropout, c.dropout_seed);
  m.set_dropout_counter(c.dropout_counter);
  arena.zero_grads(0);
  m.set_batch(c.x.data(), c.y.data(), 0);
  m.forward(0);
  r.logits.resize(c.logits_ref.size());
  m.logits_to_host(0, c.B * c.T, r.logits.data());
  m.loss_and_dlogits(1.0f, 0);
  CUDA_CHECK(cudaMemcpy(&r.loss, m.d_loss(), 4, cudaMemcpyDeviceToHost));
  m.backward(0);
  r.counter_after = m.dropout_counter();
  r.grads.resize(size_t(c.table.total_elems()));
  CUDA_CHECK(cudaMemcpy(r.grads.data(), arena.grads(), r.grads.size() * 4, cudaMemcpyDeviceToHost));
  return r;
}

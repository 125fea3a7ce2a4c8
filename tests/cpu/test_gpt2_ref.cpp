// The CPU reference GPT-2: every parameter tensor's gradient against central finite differences (a
// sample of elements per tensor, both q/k/v layouts, with and without dropout), causality, the loss at
// initialisation; the dropout masks' statistics.
#include <cmath>
#include <random>

#include "kernels/dropout.h"
#include "models/gpt2_ref.h"
#include "tests/test_util.h"

namespace {
Gpt2Shape tiny(bool separate) {
  Gpt2Shape s;
  s.layers = 2, s.channels = 16, s.heads = 4, s.vocab = 37, s.max_seq = 8, s.separate_qkv = separate;
  return s;
}
void batch(int B, int T, int V, uint32_t seed, std::vector<int>* x, std::vector<int>* y) {
  std::mt19937 rng(seed);
  x->resize(size_t(B * T));
  y->resize(size_t(B * T));
  for (auto& t : *x) t = int(rng() % uint32_t(V));
  for (auto& t : *y) t = int(rng() % uint32_t(V));
}
}  // namespace

TEST(Gpt2Ref, GradientsMatchFiniteDifferences) {
  for (int variant = 0; variant < 3; variant++) {
    const bool separate = variant != 1;
    const float dropout = variant == 2 ? 0.3f : 0.0f;
    SCOPED_TRACE(variant == 0 ? "separate q/k/v" : variant == 1 ? "fused qkv" : "separate q/k/v, dropout 0.3");
    const Gpt2Shape s = tiny(separate);
    ParamTable table = gpt2_param_table(s);
    std::vector<float> pf = gpt2_init(table, s, 1);
    std::vector<double> p(pf.begin(), pf.end());
    std::mt19937 rng(3);
    std::normal_distribution<double> z(0.0, 0.05);
    for (const auto& t : table.tensors())  // move off the init (zero biases, unit gains) so every path is exercised
      for (int64_t i = 0; i < t.numel; i++) p[size_t(t.offset + i)] += z(rng);
    const int B = 2, T = 6;
    std::vector<int> x, y;
    batch(B, T, s.vocab, 7, &x, &y);
    Gpt2Ref m(s, table);
    const double loss_plain = m.forward(p, x, y, B, T);
    m.set_dropout(dropout, 99, 4);  // fixed masks: the loss is a smooth function of the parameters
    if (dropout > 0) {
      ASSERT_NE(m.forward(p, x, y, B, T), loss_plain);
    }
    m.forward(p, x, y, B, T);
    const std::vector<double> g = m.backward(p);
    for (const auto& t : table.tensors()) {
      for (int probe = 0; probe < 6; probe++) {
        const int64_t i = t.offset + int64_t(rng() % uint64_t(t.numel));
        const double h = 1e-5, keep = p[size_t(i)];
        p[size_t(i)] = keep + h;
        const double lp = m.forward(p, x, y, B, T);
        p[size_t(i)] = keep - h;
        const double lm = m.forward(p, x, y, B, T);
        p[size_t(i)] = keep;
        const double fd = (lp - lm) / (2 * h);
        ASSERT_NEAR(g[size_t(i)], fd, 1e-7 + 1e-5 * std::fabs(fd)) << t.name << " element " << i - t.offset;
      }
    }
  }
}

TEST(Gpt2Ref, CausalAndLossAtInit) {
  const Gpt2Shape s = tiny(true);
  ParamTable table = gpt2_param_table(s);
  std::vector<float> pf = gpt2_init(table, s, 2);
  std::vector<double> p(pf.begin(), pf.end());
  std::vector<int> x, y;
  batch(1, 8, s.vocab, 9, &x, &y);
  Gpt2Ref m(s, table);
  const double loss = m.forward(p, x, y, 1, 8);
  EXPECT_NEAR(loss, std::log(double(s.vocab)), 0.05);  // small init: nearly uniform predictions
  const std::vector<double> before = m.logits();
  x[5] = (x[5] + 1) % s.vocab;  // a later token must not change earlier positions
  m.forward(p, x, y, 1, 8);
  for (int n = 0; n < 5 * s.vocab; n++) ASSERT_EQ(m.logits()[size_t(n)], before[size_t(n)]);
  bool changed = false;
  for (int n = 5 * s.vocab; n < 8 * s.vocab; n++) changed |= m.logits()[size_t(n)] != before[size_t(n)];
  EXPECT_TRUE(changed);
}

// The masks of kernels/dropout.h: the kept fraction is 1 - p, neighbours and sites are independent,
// and the same (seed, counter, site, element) always gives the same answer.
TEST(Dropout, MaskStatistics) {
  for (float p : {0.1f, 0.5f}) {
    const uint32_t thr = dropout_threshold(p);
    EXPECT_NEAR(double(dropout_scale(thr)), 1.0 / (1.0 - p), 1e-4);
    int64_t kept = 0, both = 0, same_site = 0, n = 0;
    const uint64_t k1 = dropout_site_key(5, 3, dropout_site_attention(0)), k2 = dropout_site_key(5, 3, dropout_site_attention(1));
    const uint64_t k3 = dropout_site_key(5, 4, dropout_site_attention(0));
    for (uint32_t row = 0; row < 512; row++)
      for (uint32_t col = 0; col < 512; col++, n++) {
        const bool a = dropout_keep(dropout_row(k1, row), col, thr);
        kept += a;
        both += a && dropout_keep(dropout_row(k1, row), col ^ 1, thr);  // the other half of the same hash
        same_site += a == dropout_keep(dropout_row(k2, row), col, thr);
        same_site += a == dropout_keep(dropout_row(k3, row), col, thr);
        ASSERT_EQ(a, dropout_keep(dropout_row(k1, row), col, thr));
      }
    const double q = 1.0 - p, sd = std::sqrt(q * (1 - q) / double(n));
    EXPECT_NEAR(double(kept) / double(n), q, 5 * sd);
    EXPECT_NEAR(double(both) / double(n), q * q, 5 * sd);                        // pairs independent
    EXPECT_NEAR(double(same_site) / double(2 * n), q * q + p * p, 5 * sd);  // other layer, next micro-batch
  }
  EXPECT_EQ(dropout_threshold(0.0f), 0u);
}

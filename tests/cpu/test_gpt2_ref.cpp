// The CPU reference GPT-2: every parameter tensor's gradient against central finite differences (a
// sample of elements per tensor, both q/k/v layouts, with and without dropout), causality, the loss at
// initialisation; the dropout masks' statistics.
#include <cmath>
#include <random>

#include "kernels/dropout.h"
#include "models/gpt2_ref.h"
#include "models/gpt2_sites.h"
#include "tests/test_util.h"

namespace {
Gpt2Shape tiny(bool separate) {
  Gpt2Shape s;
  s.layers = 2;
  s.channels = 16;
  s.heads = 4;
  s.vocab = 37;
  s.max_seq = 8;
  s.separate_qkv = separate;
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

// The masks of kernels/dropout.h against values computed apart from this code: splitmix64's published
// first output for seed 0, and elements drawn by a separate Python evaluation of the draw documented in
// kernels/dropout.h (key, row hash, pair hash, 16-bit halves). Each element's 16 random bits b are pinned
// exactly: kept at threshold b, dropped at b + 1. The masks must never change: a checkpoint stores only
// the counter, so a resumed run must draw the same masks as the run that saved it.
TEST(Dropout, MasksMatchAnIndependentEvaluation) {
  EXPECT_EQ(splitmix64(0), 0xe220a8397b1dcdafull);
  EXPECT_EQ(lowbias32(0), 0u);
  EXPECT_EQ(lowbias32(1), 0x688990c0u);
  const uint64_t key = dropout_site_key(1337, 7, 4);
  EXPECT_EQ(key, 0xf0d5bcb318353173ull);
  struct Element {
    uint32_t row, col, bits;
  };
  for (const Element e : {Element{0, 0, 64795}, Element{0, 1, 46849}, Element{3, 10, 2793}, Element{3, 11, 28865},
                          Element{1000, 777, 40047}, Element{65535, 1, 7296}}) {
    const uint32_t r = dropout_row(key, e.row);
    EXPECT_TRUE(dropout_keep(r, e.col, e.bits)) << e.row << "," << e.col;
    EXPECT_FALSE(dropout_keep(r, e.col, e.bits + 1)) << e.row << "," << e.col;
  }
  // Thresholds and scales by hand: p = 0.5 drops half of the 65536 values, and keeps scale by exactly 2.
  EXPECT_EQ(dropout_threshold(0.0f), 0u);
  EXPECT_EQ(dropout_threshold(0.5f), 32768u);
  EXPECT_EQ(dropout_threshold(0.1f), 6554u);  // 6553.6 rounded
  EXPECT_EQ(dropout_scale(32768u), 2.0f);
  EXPECT_EQ(dropout_scale(0u), 1.0f);
}

// Statistics of the masks, with 5-sigma tolerances for n = 512 x 512 draws: the kept fraction is 1 - p,
// the two halves of one hash (neighbouring columns) are independent, and so are the masks of another site
// and of the next micro-batch.
TEST(Dropout, MaskStatistics) {
  for (float p : {0.1f, 0.5f}) {
    const uint32_t thr = dropout_threshold(p);
    int64_t kept = 0, both = 0, same_site = 0, n = 0;
    const uint64_t k1 = dropout_site_key(5, 3, dropout_site_attention(0)),
                   k2 = dropout_site_key(5, 3, dropout_site_attention(1));
    const uint64_t k3 = dropout_site_key(5, 4, dropout_site_attention(0));
    for (uint32_t row = 0; row < 512; row++)
      for (uint32_t col = 0; col < 512; col++, n++) {
        const bool a = dropout_keep(dropout_row(k1, row), col, thr);
        kept += a;
        both += a && dropout_keep(dropout_row(k1, row), col ^ 1, thr);  // the other half of the same hash
        same_site += a == dropout_keep(dropout_row(k2, row), col, thr);
        same_site += a == dropout_keep(dropout_row(k3, row), col, thr);
      }
    const double q = 1.0 - p, sd = std::sqrt(q * (1 - q) / double(n));
    EXPECT_NEAR(double(kept) / double(n), q, 5 * sd);
    EXPECT_NEAR(double(both) / double(n), q * q, 5 * sd);                   // pairs independent
    EXPECT_NEAR(double(same_site) / double(2 * n), q * q + p * p, 5 * sd);  // other layer, next micro-batch
  }
}

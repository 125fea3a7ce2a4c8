// The CPU reference ViT: every parameter tensor's gradient against central finite differences (a sample
// of elements per tensor; hard and soft targets; fused q/k/v with 3 input channels, separate q/k/v with
// one input channel and two heads), attention without a mask, the patch embedding's order checked by
// hand, the loss and head-bias gradient of a zero head, and refused inputs.
#include <cmath>
#include <cstdio>
#include <random>

#include "models/vit_ref.h"
#include "tests/test_util.h"

namespace {
// vit-test (2 layers, C 64, 1 head, 8 x 8 images of 4 x 4 patches, 10 classes) or its variant: one input
// channel, separate q/k/v, two heads of 64.
VitShape tiny(bool variant) {
  VitShape s = vit_shape("vit-test");
  if (variant) {
    s.in_chans = 1;
    s.separate_qkv = true;
    s.heads = 2;
    s.channels = 128;
  }
  return s;
}
std::vector<float> random_images(const VitShape& s, int B, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> z(0.0f, 1.0f);
  std::vector<float> x(size_t(B) * size_t(s.in_chans * s.image * s.image));
  for (float& v : x) v = z(rng);
  return x;
}
// Soft targets: random positive rows normalised to sum 1 (as mixup / label smoothing give).
std::vector<float> random_soft(int B, int K, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.05f, 1.0f);
  std::vector<float> t(size_t(B) * size_t(K));
  for (int b = 0; b < B; b++) {
    float sum = 0;
    for (int k = 0; k < K; k++) sum += t[size_t(b * K + k)] = u(rng);
    for (int k = 0; k < K; k++) t[size_t(b * K + k)] /= sum;
  }
  return t;
}
// The table's initialisation moved off its zero biases and unit gains, so that every path is exercised.
std::vector<double> perturbed_init(const ParamTable& table, const VitShape& s, uint32_t seed) {
  const std::vector<float> pf = vit_init(table, s, seed);
  std::vector<double> p(pf.begin(), pf.end());
  std::mt19937 rng(seed + 1);
  std::normal_distribution<double> z(0.0, 0.05);
  for (const auto& t : table.tensors())
    for (int64_t i = 0; i < t.numel; i++) p[size_t(t.offset + i)] += z(rng);
  return p;
}
}  // namespace

// |analytic - central difference| <= 1e-8 + 1e-6 |fd| for the first, the last and 4 random elements of
// every tensor. Observed (h = 1e-5, double): largest absolute error a few 1e-11, printed below.
TEST(VitRef, GradientsMatchFiniteDifferences) {
  for (int variant = 0; variant < 2; variant++)
    for (int soft = 0; soft < 2; soft++) {
      SCOPED_TRACE(std::string(variant ? "1 channel, separate q/k/v, 2 heads" : "3 channels, fused qkv") +
                   (soft ? ", soft targets" : ", hard labels"));
      const VitShape s = tiny(variant == 1);
      const ParamTable table = vit_param_table(s);
      std::vector<double> p = perturbed_init(table, s, 1);
      const int B = 2;
      const std::vector<float> images = random_images(s, B, 7), targets = random_soft(B, s.classes, 8);
      const std::vector<int> labels = {3, 8};
      const std::vector<float>* st = soft ? &targets : nullptr;
      VitRef m(s, table);
      m.forward(p, images, labels, st, B);
      const std::vector<double> g = m.backward(p);
      std::mt19937 rng(3);
      double worst_abs = 0, worst_rel = 0;
      for (const auto& t : table.tensors())
        for (int probe = 0; probe < 6; probe++) {
          const int64_t e = probe == 0 ? 0 : probe == 1 ? t.numel - 1 : int64_t(rng() % uint64_t(t.numel));
          const size_t i = size_t(t.offset + e);
          const double h = 1e-5, keep = p[i];
          p[i] = keep + h;
          const double lp = m.forward(p, images, labels, st, B);
          p[i] = keep - h;
          const double lm = m.forward(p, images, labels, st, B);
          p[i] = keep;
          const double fd = (lp - lm) / (2 * h), err = std::fabs(g[i] - fd);
          worst_abs = std::max(worst_abs, err);
          if (std::fabs(fd) > 1e-6) worst_rel = std::max(worst_rel, err / std::fabs(fd));
          ASSERT_NEAR(g[i], fd, 1e-8 + 1e-6 * std::fabs(fd)) << t.name << " element " << e;
        }
      std::printf("  variant %d %s: worst |g - fd| %.2e, worst relative (|fd| > 1e-6) %.2e\n", variant,
                  soft ? "soft" : "hard", worst_abs, worst_rel);
    }
}

// Every padding element of the flat gradient is zero and every tensor gets some gradient.
TEST(VitRef, GradientLayoutAndPadding) {
  const VitShape s = tiny(false);
  const ParamTable table = vit_param_table(s);
  const std::vector<double> p = perturbed_init(table, s, 2);
  VitRef m(s, table);
  m.forward(p, random_images(s, 2, 3), {1, 2}, nullptr, 2);
  const std::vector<double> g = m.backward(p);
  ASSERT_EQ(g.size(), size_t(table.total_elems()));
  std::vector<bool> inside(g.size(), false);
  for (const auto& t : table.tensors()) {
    double norm = 0;
    for (int64_t i = 0; i < t.numel; i++) {
      inside[size_t(t.offset + i)] = true;
      norm += g[size_t(t.offset + i)] * g[size_t(t.offset + i)];
    }
    EXPECT_GT(norm, 0.0) << t.name;
  }
  for (size_t i = 0; i < g.size(); i++)
    if (!inside[i]) {
      ASSERT_EQ(g[i], 0.0) << "padding element " << i;
    }
}

// The cls token attends to every patch: changing only the last patch (bottom-right, every channel) changes
// every image's logits. With a causal mask the cls row (token 0) would see only itself and stay unchanged.
TEST(VitRef, ClsTokenSeesTheLastPatch) {
  for (int variant = 0; variant < 2; variant++) {
    const VitShape s = tiny(variant == 1);
    const ParamTable table = vit_param_table(s);
    const std::vector<double> p = perturbed_init(table, s, 4);
    const int B = 2, S = s.image, IC = s.in_chans;
    std::vector<float> images = random_images(s, B, 5);
    VitRef m(s, table);
    m.forward(p, images, {0, 1}, nullptr, B);
    const std::vector<double> before = m.logits();
    for (int b = 0; b < B; b++)
      for (int c = 0; c < IC; c++)
        for (int y = S - s.patch; y < S; y++)
          for (int x = S - s.patch; x < S; x++) images[size_t(((b * IC + c) * S + y) * S + x)] += 0.5f;
    m.forward(p, images, {0, 1}, nullptr, B);
    for (int b = 0; b < B; b++) {
      double change = 0;
      for (int k = 0; k < s.classes; k++)
        change += std::fabs(m.logits()[size_t(b * s.classes + k)] - before[size_t(b * s.classes + k)]);
      EXPECT_GT(change, 1e-6) << "image " << b << ", variant " << variant;
    }
  }
}

// One nonzero pixel, worked out by hand on a 3 x 3 grid of 4 x 4 patches with 3 channels: image 1,
// channel 2, row 9, column 6 lies in grid cell (row 2, column 1), so in token 1 + 2 * 3 + 1 = 8 (row-major
// grid order; column-major would give token 6), at kernel row 9 % 4 = 1, column 6 % 4 = 2 of channel 2
// (swapped, they would meet weight[:, 2, 2, 1]). With zero cls, position embeddings and patch bias, that
// token's embedding is 0.5 weight[:, 2, 1, 2] and every other token's is zero.
TEST(VitRef, PatchEmbeddingOrderByHand) {
  VitShape s = tiny(false);
  s.image = 12;
  const ParamTable table = vit_param_table(s);
  const VitTensors ix = vit_tensors(table, s);
  const std::vector<double> p0 = perturbed_init(table, s, 6);
  std::vector<double> p(p0.size(), 0.0);
  const TensorInfo& w = table[ix.patchw];
  for (int64_t i = 0; i < w.numel; i++) p[size_t(w.offset + i)] = p0[size_t(w.offset + i)];
  const int B = 2, IC = 3, S = 12, C = s.channels, T = s.tokens();
  ASSERT_EQ(T, 10);
  std::vector<float> images(size_t(B * IC * S * S), 0.0f);
  images[size_t(((1 * IC + 2) * S + 9) * S + 6)] = 0.5f;
  VitRef m(s, table);
  m.forward(p, images, {0, 0}, nullptr, B);
  const std::vector<double>& e = m.embeddings();
  ASSERT_EQ(e.size(), size_t(B * T * C));
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int c = 0; c < C; c++) {
        // weight (C, 3, 4, 4): element (c, 2, 1, 2)
        const double want = b == 1 && t == 8 ? 0.5 * p[size_t(w.offset + ((c * 3 + 2) * 4 + 1) * 4 + 2)] : 0.0;
        ASSERT_EQ(e[size_t((b * T + t) * C + c)], want) << "image " << b << " token " << t << " channel " << c;
      }
}

// A zero head predicts the uniform distribution: the loss is mass log(classes) for a target row of mass
// sum_k t_k (1 for hard labels; 1 up to float rounding for the soft rows), and the head bias's gradient is
// the mean over the batch of mass / classes - target.
TEST(VitRef, ZeroHeadLossIsLogClasses) {
  const VitShape s = tiny(false);
  const ParamTable table = vit_param_table(s);
  const VitTensors ix = vit_tensors(table, s);
  std::vector<double> p = perturbed_init(table, s, 9);
  for (int i : {ix.headw, ix.headb})
    for (int64_t j = 0; j < table[i].numel; j++) p[size_t(table[i].offset + j)] = 0.0;
  const int B = 3, K = s.classes;
  const std::vector<float> images = random_images(s, B, 10), soft = random_soft(B, K, 11);
  const std::vector<int> labels = {4, 4, 7};
  VitRef m(s, table);
  for (int use_soft = 0; use_soft < 2; use_soft++) {
    auto target = [&](int b, int k) {
      return use_soft ? double(soft[size_t(b * K + k)]) : double(labels[size_t(b)] == k);
    };
    std::vector<double> mass(size_t(B), 0.0);
    double mean_mass = 0;
    for (int b = 0; b < B; b++) {
      for (int k = 0; k < K; k++) mass[size_t(b)] += target(b, k);
      mean_mass += mass[size_t(b)] / B;
    }
    const double loss = m.forward(p, images, labels, use_soft ? &soft : nullptr, B);
    EXPECT_NEAR(loss, mean_mass * std::log(double(K)), 1e-14);
    const std::vector<double> g = m.backward(p);
    for (int k = 0; k < K; k++) {
      double want = 0;
      for (int b = 0; b < B; b++) want += (mass[size_t(b)] / K - target(b, k)) / B;
      EXPECT_NEAR(g[size_t(table[ix.headb].offset + k)], want, 1e-15) << "class " << k;
    }
  }
}

TEST(VitRef, RefusesBadInputs) {
  const VitShape s = tiny(false);
  const ParamTable table = vit_param_table(s);
  const std::vector<double> p = perturbed_init(table, s, 12);
  const std::vector<float> images = random_images(s, 2, 13), soft = random_soft(1, s.classes, 14);
  VitRef m(s, table);
  EXPECT_THROW(m.forward(p, images, {0, 10}, nullptr, 2), UserError);    // label out of range
  EXPECT_THROW(m.forward(p, images, {0}, nullptr, 2), UserError);        // one label for two images
  EXPECT_THROW(m.forward(p, images, {}, &soft, 2), UserError);           // one soft row for two images
  EXPECT_THROW(m.forward(p, images, {0, 1, 2}, nullptr, 3), UserError);  // two images' values for three
  EXPECT_THROW(vit_init(table, tiny(true), 1), std::logic_error);        // another ViT's table
}

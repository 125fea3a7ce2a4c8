// Mixup / CutMix in timm's 'batch' mode (data/mixup.h): smoothed soft targets by hand, pairing of sample i
// with B-1-i, CutMix's box and its area-corrected lambda, and timm's order of draws.
#include <cmath>
#include <numeric>

#include "data/mixup.h"
#include "tests/test_util.h"

namespace {
// B images of C x H x W where every value of image b is values[b].
std::vector<float> constant_images(const std::vector<float>& values, int C, int H, int W) {
  std::vector<float> v;
  for (float x : values) v.insert(v.end(), size_t(C * H * W), x);
  return v;
}
}  // namespace

// K = 10, smoothing 0.1: off = 0.01, on = 0.91. Labels (2, 5, 7, 2), lambda 0.7: row 1 (label 5, paired
// with row 2, label 7) has 0.7 * 0.91 + 0.3 * 0.01 = 0.640 at 5 and 0.3 * 0.91 + 0.7 * 0.01 = 0.280 at 7;
// row 0 is paired with row 3, the same label, so it keeps 0.91.
TEST(Mixup, SmoothedTargetsByHand) {
  const int32_t labels[4] = {2, 5, 7, 2};
  std::vector<float> t(40);
  mix_targets(labels, 4, 10, 0.7, 0.1, t.data());
  auto row = [&](int i, int k) { return t[size_t(i * 10 + k)]; };
  EXPECT_NEAR(row(0, 2), 0.91f, 1e-6);
  EXPECT_NEAR(row(0, 0), 0.01f, 1e-6);
  EXPECT_NEAR(row(1, 5), 0.640f, 1e-6);
  EXPECT_NEAR(row(1, 7), 0.280f, 1e-6);
  EXPECT_NEAR(row(1, 0), 0.01f, 1e-6);
  EXPECT_NEAR(row(2, 7), 0.640f, 1e-6);
  EXPECT_NEAR(row(2, 5), 0.280f, 1e-6);
  for (int i = 0; i < 4; i++) EXPECT_NEAR(std::accumulate(&t[size_t(i * 10)], &t[size_t(i * 10 + 10)], 0.0), 1.0, 1e-6);
  // No mixing and no smoothing: one-hot.
  mix_targets(labels, 4, 10, 1.0, 0.0, t.data());
  EXPECT_EQ(row(1, 5), 1.0f);
  EXPECT_EQ(row(1, 7), 0.0f);
}

// Mixup: x_i = lambda x_i + (1 - lambda) x_{B-1-i}; an odd batch's middle image is paired with itself.
TEST(Mixup, MixupPairsIWithTheFlippedBatch) {
  for (int B : {4, 5}) {
    std::vector<float> v(static_cast<size_t>(B));
    for (int b = 0; b < B; b++) v[size_t(b)] = float(10 * (b + 1));
    std::vector<float> img = constant_images(v, 2, 3, 3);
    MixDraw d;
    d.lambda = 0.25;
    apply_mix(d, img.data(), B, 2, 3, 3);
    for (int b = 0; b < B; b++) {
      const float want = 0.25f * v[size_t(b)] + 0.75f * v[size_t(B - 1 - b)];
      for (int k = 0; k < 18; k++) ASSERT_FLOAT_EQ(img[size_t(b * 18 + k)], want) << B << " " << b;
    }
  }
}

// CutMix: inside the box image i shows image B-1-i, outside it is untouched.
TEST(Mixup, CutmixCopiesTheBoxFromThePair) {
  const int B = 4, C = 2, H = 5, W = 6;
  std::vector<float> img(size_t(B * C * H * W));
  std::iota(img.begin(), img.end(), 0.0f);
  const std::vector<float> orig = img;
  MixDraw d;
  d.cutmix = true;
  d.lambda = 0.6;
  d.y0 = 1;
  d.y1 = 3;
  d.x0 = 2;
  d.x1 = 5;
  apply_mix(d, img.data(), B, C, H, W);
  for (int b = 0; b < B; b++)
    for (int c = 0; c < C; c++)
      for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
          const bool in = y >= 1 && y < 3 && x >= 2 && x < 5;
          const int src = in ? B - 1 - b : b;
          ASSERT_EQ(img[size_t(((b * C + c) * H + y) * W + x)], orig[size_t(((src * C + c) * H + y) * W + x)]);
        }
}

// Every CutMix box lies in the image, spans at most floor(H sqrt(1 - lambda)) rows (exactly 2 * (cut / 2)
// when not clipped), and the corrected lambda is 1 - box area / image area.
TEST(Mixup, CutmixBoxAndCorrectedLambda) {
  MixupOptions o;
  o.switch_prob = 1.0;  // always CutMix
  const int H = 14, W = 20;
  for (uint64_t i = 0; i < 500; i++) {
    Rng rng = Rng::derive(1, RngStream::kMixup, 0, i);
    const MixDraw d = draw_mix(o, H, W, rng);
    ASSERT_TRUE(d.cutmix);
    ASSERT_TRUE(0 <= d.y0 && d.y0 <= d.y1 && d.y1 <= H && 0 <= d.x0 && d.x0 <= d.x1 && d.x1 <= W);
    EXPECT_DOUBLE_EQ(d.lambda, 1.0 - double((d.y1 - d.y0) * (d.x1 - d.x0)) / (H * W));
    o.correct_lam = false;
    Rng again = Rng::derive(1, RngStream::kMixup, 0, i);
    const MixDraw raw = draw_mix(o, H, W, again);
    o.correct_lam = true;
    const int cut_h = int(H * std::sqrt(1.0 - raw.lambda)), cut_w = int(W * std::sqrt(1.0 - raw.lambda));
    ASSERT_EQ(raw.y0, d.y0);  // the same draws, only lambda differs
    ASSERT_LE(d.y1 - d.y0, cut_h);
    ASSERT_LE(d.x1 - d.x0, cut_w);
    if (d.y0 > 0 && d.y1 < H) {
      ASSERT_EQ(d.y1 - d.y0, 2 * (cut_h / 2));
    }
    if (d.x0 > 0 && d.x1 < W) {
      ASSERT_EQ(d.x1 - d.x0, 2 * (cut_w / 2));
    }
  }
}

// timm's draws, replayed from a copy of the generator: mix?, cutmix?, lambda ~ Beta, then cy, then cx.
TEST(Mixup, DrawOrderIsTimms) {
  const MixupOptions o;
  for (uint64_t i = 0; i < 40; i++) {
    Rng rng = Rng::derive(2, RngStream::kMixup, 3, i), copy = rng;
    const MixDraw d = draw_mix(o, 16, 16, rng);
    ASSERT_TRUE(copy.bernoulli(1.0));
    const bool cutmix = copy.bernoulli(0.5);
    double lambda = copy.beta(cutmix ? 1.0 : 0.8, cutmix ? 1.0 : 0.8);
    ASSERT_EQ(d.cutmix, cutmix);
    if (cutmix) {
      const int cut = int(16 * std::sqrt(1.0 - lambda)), cy = int(copy.below(16)), cx = int(copy.below(16));
      ASSERT_EQ(d.y0, std::max(cy - cut / 2, 0));
      ASSERT_EQ(d.x1, std::min(cx + cut / 2, 16));
      lambda = 1.0 - double((d.y1 - d.y0) * (d.x1 - d.x0)) / 256.0;
    }
    ASSERT_DOUBLE_EQ(d.lambda, lambda);
  }
}

// prob 0: nothing mixed, targets only smoothed. One alpha off: always the other method. Both on: about
// half CutMix; Mixup's lambda ~ Beta(0.8, 0.8) has mean 1/2.
TEST(Mixup, ProbabilitiesAndMethodChoice) {
  MixupOptions o;
  o.prob = 0.0;
  const int32_t labels[2] = {1, 0};
  std::vector<float> img = constant_images({1.0f, 2.0f}, 1, 2, 2), t(6);
  Rng rng(3);
  const MixDraw d = mixup_batch(o, img.data(), labels, 2, 1, 2, 2, 3, t.data(), rng);
  EXPECT_EQ(d.lambda, 1.0);
  EXPECT_EQ(img, constant_images({1.0f, 2.0f}, 1, 2, 2));
  EXPECT_NEAR(t[1], 0.9 + 0.1 / 3, 1e-6);
  EXPECT_NEAR(t[0], 0.1 / 3, 1e-6);
  int cutmix = 0, n = 4000;
  double mix_lambda = 0;
  int mixes = 0;
  for (auto [ma, ca] : {std::pair{0.8, 0.0}, std::pair{0.0, 1.0}, std::pair{0.8, 1.0}}) {
    o = MixupOptions{};
    o.mixup_alpha = ma;
    o.cutmix_alpha = ca;
    cutmix = 0;
    for (int i = 0; i < n; i++) {
      Rng r = Rng::derive(4, RngStream::kMixup, 0, uint64_t(i));
      const MixDraw m = draw_mix(o, 8, 8, r);
      cutmix += m.cutmix;
      if (!m.cutmix) {
        mix_lambda += m.lambda;
        mixes++;
      }
    }
    const int want = ca == 0.0 ? 0 : ma == 0.0 ? n : n / 2;
    EXPECT_NEAR(cutmix, want, ma > 0.0 && ca > 0.0 ? 130 : 0) << ma << " " << ca;
  }
  EXPECT_NEAR(mix_lambda / mixes, 0.5, 0.01);
}

// A whole batch: every row of the soft targets sums to 1 and carries lambda on its own label.
TEST(Mixup, BatchTargetsSumToOne) {
  const int B = 6, K = 7;
  const int32_t labels[B] = {0, 3, 6, 1, 3, 5};
  for (uint64_t i = 0; i < 50; i++) {
    std::vector<float> img(size_t(B * 3 * 8 * 8), 0.5f), t(size_t(B * K));
    Rng rng = Rng::derive(5, RngStream::kMixup, 0, i);
    const MixDraw d = mixup_batch(MixupOptions{}, img.data(), labels, B, 3, 8, 8, K, t.data(), rng);
    for (int b = 0; b < B; b++) {
      double sum = 0;
      for (int k = 0; k < K; k++) sum += t[size_t(b * K + k)];
      ASSERT_NEAR(sum, 1.0, 1e-5);
      if (labels[b] == labels[B - 1 - b]) continue;
      ASSERT_NEAR(t[size_t(b * K + labels[b])], d.lambda * (0.9 + 0.1 / K) + (1 - d.lambda) * 0.1 / K, 1e-6);
    }
  }
}

TEST(Mixup, BadOptionsAreNamed) {
  MixupOptions o;
  o.label_smoothing = 1.0;
  expect_user_error([&] { check_options(o); }, "label smoothing 1 must be in [0, 1)");
  o = {};
  o.cutmix_alpha = -1;
  expect_user_error([&] { check_options(o); }, "cutmix alpha -1");
  o = {};
  o.switch_prob = 2;
  expect_user_error([&] { check_options(o); }, "switch probability 2");
  check_options(MixupOptions{});
}

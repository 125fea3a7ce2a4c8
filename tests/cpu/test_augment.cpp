// The train and eval transforms (data/augment.h): RandomResizedCrop's boxes, its fallback, eval's resize
// and centre-crop geometry, flip and normalisation, and the transforms end to end; the GPU resize's per-pixel
// code (data/resample_taps.h), run on the CPU, against them.
#include <cmath>

#include "data/augment.h"
#include "data/resample_taps.h"
#include "tests/test_util.h"

namespace {
Image pattern(int w, int h, int c) {
  Image img(w, h, c);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int k = 0; k < c; k++) img.at(x, y, k) = uint8_t((x * 13 + y * 7 + k * 100) % 256);
  return img;
}
}  // namespace

// Found by argument-dependent lookup (Box is in the global namespace), for gtest's messages.
static std::ostream& operator<<(std::ostream& os, const Box& b) {
  return os << "{x " << b.x << ", y " << b.y << ", w " << b.w << ", h " << b.h << "}";
}

TEST(Augment, RoundHalfEvenIsPythonsRound) {
  EXPECT_EQ(round_half_even(58.5), 58);
  EXPECT_EQ(round_half_even(13.5), 14);
  EXPECT_EQ(round_half_even(0.5), 0);
  EXPECT_EQ(round_half_even(2.4999), 2);
  EXPECT_EQ(round_half_even(2.5001), 3);
  EXPECT_EQ(round_half_even(13.3333), 13);
  EXPECT_EQ(round_half_even(-0.5), 0);
  EXPECT_EQ(round_half_even(-1.5), -2);
}

// Every box lies inside the image; accepted boxes have area fraction in [0.08, 1] and aspect ratio in
// [3/4, 4/3] up to the rounding of w and h to whole pixels (at most ~1.5% here).
TEST(Augment, RandomResizedCropBoxesRespectScaleAndRatio) {
  RrcOptions o;
  for (auto [W, H] : {std::pair{500, 375}, std::pair{375, 500}, std::pair{100, 100}, std::pair{1000, 300}}) {
    int fallbacks = 0;
    for (uint64_t i = 0; i < 2000; i++) {
      Rng rng = Rng::derive(3, RngStream::kAugment, 0, i);
      bool fallback;
      const Box b = sample_rrc_box(W, H, o, rng, &fallback);
      ASSERT_TRUE(b.x >= 0 && b.y >= 0 && b.w > 0 && b.h > 0 && b.x + b.w <= W && b.y + b.h <= H) << b;
      fallbacks += fallback;
      if (fallback) continue;
      const double frac = double(b.w) * b.h / (double(W) * H), ratio = double(b.w) / b.h;
      ASSERT_GE(frac, 0.08 * 0.97) << b;
      ASSERT_GE(ratio, 0.75 * 0.985) << b;
      ASSERT_LE(ratio, 4.0 / 3.0 * 1.015) << b;
    }
    if (W != 1000) {
      EXPECT_LT(fallbacks, 20) << W << "x" << H;  // ten failures in a row are rare here
    }
  }
}

// On 1000 x 300 an attempt fits iff h <= 300, i.e. scale <= 0.3 * ratio: probability
// (0.3 E[ratio] - 0.08) / 0.92 = 0.2436 with E[ratio] = (4/3 - 3/4) / log(16/9) = 1.0138 (log-uniform),
// so ten attempts all fail with probability 0.7564^10 = 6.1% (122.6 of 2000, standard deviation 10.7).
TEST(Augment, RandomResizedCropFallbackRateOnAWideImage) {
  int fallbacks = 0;
  for (uint64_t i = 0; i < 2000; i++) {
    Rng rng = Rng::derive(3, RngStream::kAugment, 0, i);
    bool fallback;
    sample_rrc_box(1000, 300, RrcOptions{}, rng, &fallback);
    fallbacks += fallback;
  }
  EXPECT_NEAR(fallbacks, 122.6, 45);
}

// The ratio is log-uniform (E[log r] = 0; a uniform ratio on [3/4, 4/3] would give +0.027) and the
// scale uniform (mean area fraction 0.29 for scale (0.08, 0.5), where every first attempt fits).
TEST(Augment, RandomResizedCropDistributions) {
  RrcOptions o;
  o.scale_max = 0.5;
  double log_ratio = 0, frac = 0, lo = 1e9, hi = 0;
  const int n = 20000;
  for (uint64_t i = 0; i < n; i++) {
    Rng rng = Rng::derive(4, RngStream::kAugment, 1, i);
    const Box b = sample_rrc_box(1000, 1000, o, rng);
    const double r = double(b.w) / b.h;
    log_ratio += std::log(r) / n;
    frac += double(b.w) * b.h / 1e6 / n;
    lo = std::min(lo, r);
    hi = std::max(hi, r);
  }
  EXPECT_NEAR(log_ratio, 0.0, 0.005);
  EXPECT_NEAR(frac, 0.29, 0.005);
  EXPECT_NEAR(lo, 0.75, 0.01);
  EXPECT_NEAR(hi, 4.0 / 3.0, 0.01);
}

// The first attempt, replayed by hand from a copy of the generator: torchvision's draw order (scale,
// log-ratio, then top, then left) and its rounding.
TEST(Augment, RandomResizedCropFollowsTorchvisionsDraws) {
  RrcOptions o;
  o.scale_max = 0.5;  // on 1000 x 1000 the first attempt always fits
  for (uint64_t i = 0; i < 50; i++) {
    Rng rng = Rng::derive(9, RngStream::kAugment, 0, i), copy = rng;
    const double area = 1e6 * copy.uniform(0.08, 0.5);
    const double ratio = std::exp(copy.uniform(std::log(0.75), std::log(4.0 / 3.0)));
    const int w = int(std::nearbyint(std::sqrt(area * ratio))), h = int(std::nearbyint(std::sqrt(area / ratio)));
    const int y = int(copy.below(uint32_t(1000 - h + 1))), x = int(copy.below(uint32_t(1000 - w + 1)));
    EXPECT_EQ(sample_rrc_box(1000, 1000, o, rng), (Box{x, y, w, h}));
  }
}

// 1000 x 10: any crop of >= 8% of the area with ratio <= 4/3 is > 10 pixels high, so all ten attempts
// fail. Fallback: ratio 100 > 4/3, so h = 10, w = round(10 * 4/3) = 13, x = (1000 - 13) // 2 = 493.
TEST(Augment, RandomResizedCropFallbackForVeryWideAndTallImages) {
  RrcOptions o;
  for (uint64_t i = 0; i < 20; i++) {
    Rng rng(i);
    bool fallback = false;
    EXPECT_EQ(sample_rrc_box(1000, 10, o, rng, &fallback), (Box{493, 0, 13, 10}));
    EXPECT_TRUE(fallback);
    EXPECT_EQ(sample_rrc_box(10, 1000, o, rng, &fallback), (Box{0, 493, 10, 13}));  // h = round(10 / 0.75)
    EXPECT_TRUE(fallback);
  }
  // An image whose ratio is in range falls back to the whole image (a crop of 1.5x the area never fits).
  o.scale_min = o.scale_max = 1.5;
  Rng rng(1);
  bool fallback = false;
  EXPECT_EQ(sample_rrc_box(100, 80, o, rng, &fallback), (Box{0, 0, 100, 80}));
  EXPECT_TRUE(fallback);
}

TEST(Augment, RandomResizedCropIsDeterministicPerSeed) {
  RrcOptions o;
  auto boxes = [&](uint64_t seed) {
    std::vector<int> v;
    for (uint64_t i = 0; i < 30; i++) {
      Rng rng = Rng::derive(seed, RngStream::kAugment, 2, i);
      const Box b = sample_rrc_box(500, 375, o, rng);
      v.insert(v.end(), {b.x, b.y, b.w, b.h});
    }
    return v;
  };
  EXPECT_EQ(boxes(1), boxes(1));
  EXPECT_NE(boxes(1), boxes(2));
}

// 500 x 375 at 224 with crop_pct 0.875: the shorter side to floor(224 / 0.875) = 256, the longer to
// floor(256 * 500 / 375) = 341; crop at (round(117 / 2), round(32 / 2)) = (58, 16) (58.5 rounds to even).
TEST(Augment, EvalGeometryResizesTheShorterSideAndCentresTheCrop) {
  EvalGeometry g = eval_geometry(500, 375, 224, 0.875);
  EXPECT_EQ(g.resize_w, 341);
  EXPECT_EQ(g.resize_h, 256);
  EXPECT_EQ(g.crop, (Box{58, 16, 224, 224}));
  g = eval_geometry(375, 500, 224, 0.875);
  EXPECT_EQ(g.resize_w, 256);
  EXPECT_EQ(g.resize_h, 341);
  EXPECT_EQ(g.crop, (Box{16, 58, 224, 224}));
  // crop_pct 0.9: floor(248.9) = 248, floor(248 * 500 / 375) = 330, crop at (53, 12).
  g = eval_geometry(500, 375, 224, 0.9);
  EXPECT_EQ(g.resize_w, 330);
  EXPECT_EQ(g.resize_h, 248);
  EXPECT_EQ(g.crop, (Box{53, 12, 224, 224}));
  g = eval_geometry(300, 300, 224, 1.0);
  EXPECT_EQ(g.resize_w, 224);
  EXPECT_EQ(g.crop, (Box{0, 0, 224, 224}));
}

// (v / 255 - mean) / std per channel with ImageNet's statistics, and the flip on a hand-made 3 x 2 image.
TEST(Augment, NormaliseAndFlip) {
  const float hwc[2 * 3 * 3] = {255, 0, 128, 1,  2,  3,  4,  5,  6,  //
                                7,   8, 9,   10, 11, 12, 13, 14, 15};
  std::vector<float> out(18);
  normalize_to_chw(hwc, 3, 2, 3, false, Normalize{}, out.data());
  EXPECT_NEAR(out[0], (1.0 - 0.485) / 0.229, 1e-5);           // R of (0, 0): 255
  EXPECT_NEAR(out[6], (0.0 - 0.456) / 0.224, 1e-5);           // G of (0, 0): 0
  EXPECT_NEAR(out[12], (128.0 / 255 - 0.406) / 0.225, 1e-5);  // B of (0, 0): 128
  Normalize unit;
  for (int c = 0; c < 3; c++) {
    unit.mean[c] = 0.0f;
    unit.std[c] = 1.0f;
  }
  normalize_to_chw(hwc, 3, 2, 3, true, unit, out.data());
  // Flipped: out(c, y, x) = in(y, 2 - x, c).
  const float want[18] = {4, 1, 255, 13, 10, 7,  // R
                          5, 2, 0,   14, 11, 8,  // G
                          6, 3, 128, 15, 12, 9};
  for (int i = 0; i < 18; i++) EXPECT_FLOAT_EQ(out[size_t(i)], want[i] / 255.0f) << i;
}

// A 341 x 256 image needs no resize at 224 / 0.875, so eval is exactly the normalised crop at (58, 16).
TEST(Augment, EvalTransformIsTheNormalisedCentreCrop) {
  const Image img = pattern(341, 256, 3);
  EvalTransformOptions o;
  std::vector<float> out(size_t(3 * 224 * 224));
  eval_transform(img, o, out.data(), nullptr);
  const Normalize n;
  for (int c = 0; c < 3; c++)
    for (int y = 0; y < 224; y += 37)
      for (int x = 0; x < 224; x += 29)
        ASSERT_NEAR(out[size_t((c * 224 + y) * 224 + x)], (img.at(x + 58, y + 16, c) / 255.0f - n.mean[c]) / n.std[c],
                    1e-5);
}

// Scale (1, 1) and the image's own ratio leave one box, the whole image; at its own size the transform
// is exactly normalisation, and with a flip probability of 1 its mirror image. One channel works too.
TEST(Augment, TrainTransformEndToEnd) {
  for (int channels : {3, 1}) {
    const Image img = pattern(64, 64, channels);
    TrainTransformOptions o;
    o.size = 64;
    o.rrc = {1.0, 1.0, 1.0, 1.0};
    o.hflip = 0.0;
    std::vector<float> plain(size_t(channels * 64 * 64)), flipped(plain.size());
    Rng r1(5), r2(5);
    train_transform(img, o, r1, plain.data(), nullptr);
    o.hflip = 1.0;
    train_transform(img, o, r2, flipped.data(), nullptr);
    const Normalize n;
    for (int c = 0; c < channels; c++)
      for (int y = 0; y < 64; y++)
        for (int x = 0; x < 64; x++) {
          const size_t i = size_t((c * 64 + y) * 64 + x);
          ASSERT_NEAR(plain[i], (img.at(x, y, c) / 255.0f - n.mean[c]) / n.std[c], 1e-5);
          ASSERT_EQ(flipped[i], plain[size_t((c * 64 + y) * 64 + 63 - x)]);
        }
  }
}

// The same seed gives the same tensor; the flip happens about half the time at p = 0.5.
TEST(Augment, TrainTransformIsReproducibleAndFlipsHalfTheTime) {
  const Image img = pattern(120, 90, 3);
  TrainTransformOptions o;
  o.size = 32;
  std::vector<float> a(size_t(3 * 32 * 32)), b(a.size());
  AugmentScratch scratch;
  for (uint64_t i = 0; i < 5; i++) {
    Rng r1 = Rng::derive(1, RngStream::kAugment, 0, i), r2 = r1;
    train_transform(img, o, r1, a.data(), &scratch);
    train_transform(img, o, r2, b.data(), nullptr);
    ASSERT_EQ(a, b);
  }
  int flips = 0;
  for (uint64_t i = 0; i < 4000; i++) {
    Rng rng = Rng::derive(1, RngStream::kAugment, 0, i);
    sample_rrc_box(120, 90, o.rrc, rng);
    flips += rng.bernoulli(o.hflip);
  }
  EXPECT_NEAR(flips, 2000, 130);
}

TEST(Augment, BadOptionsAreNamed) {
  TrainTransformOptions t;
  t.rrc.scale_min = 0.9;
  t.rrc.scale_max = 0.5;
  expect_user_error([&] { check_options(t); }, "crop scale range (0.9, 0.5) is invalid");
  t = {};
  t.hflip = 1.5;
  expect_user_error([&] { check_options(t); }, "horizontal flip probability 1.5");
  t = {};
  t.norm.std[1] = 0;
  expect_user_error([&] { check_options(t); }, "channel 1 has mean");
  EvalTransformOptions e;
  e.crop_pct = 1.2;
  expect_user_error([&] { check_options(e); }, "eval crop fraction 1.2 is not in [0.1, 1]");
  check_options(TrainTransformOptions{});
  check_options(EvalTransformOptions{});
}

// The transforms' bytes are their geometry's resize_u8 (what a batch decoder is given), and the GPU kernel's
// per-pixel code gives exactly those bytes on the CPU: train and eval geometries with flips, both filters,
// gray and colour, rows with padding.
TEST(Augment, TransformsAreTheirGeometrysResizeAndTheGpuPixelsMatchIt) {
  for (int c : {3, 1})
    for (Filter f : {Filter::kBilinear, Filter::kBicubic})
      for (auto [w, h] : {std::pair{120, 90}, std::pair{31, 77}}) {
        const Image img = pattern(w, h, c);
        TrainTransformOptions t;
        t.size = 24;
        t.filter = f;
        EvalTransformOptions e;
        e.size = 24;
        e.filter = f;
        const size_t px = size_t(24 * 24 * c), pitch = size_t(w * c + 3);
        std::vector<uint8_t> padded(pitch * size_t(h));
        for (int y = 0; y < h; y++) std::copy_n(&img.pixels[size_t(y * w * c)], w * c, &padded[size_t(y) * pitch]);
        std::vector<uint8_t> want(px), got(px), pixel(px);
        for (uint64_t i = 0; i < 6; i++) {
          t.hflip = double(i % 2);  // flips in half of them
          Rng r1 = Rng::derive(3, RngStream::kAugment, 0, i), r2 = r1;
          const ResizeGeometry g = i == 0 ? eval_resize_geometry(w, h, e) : train_geometry(w, h, t, r2);
          if (i == 0)
            eval_transform_u8(img, e, want.data(), nullptr);
          else
            train_transform_u8(img, t, r1, want.data(), nullptr);
          resize_u8(img, g, 24, f, got.data(), nullptr);
          ASSERT_EQ(got, want) << "geometry " << i;
          for (int y = 0; y < 24; y++)
            for (int x = 0; x < 24; x++) {
              uint8_t* out = &pixel[size_t((y * 24 + x) * c)];
              if (c == 3)
                resize_pixel<3>(padded.data(), pitch, g, f == Filter::kBicubic, 24, x, y, out);
              else
                resize_pixel<1>(padded.data(), pitch, g, f == Filter::kBicubic, 24, x, y, out);
            }
          ASSERT_EQ(pixel, want) << "geometry " << i << ", " << w << "x" << h << "x" << c;
        }
      }
}

// RandAugment (data/randaugment.h): timm's config strings and level functions, each op on small
// hand-made images with values worked out from Pillow's definitions, and the draws of one image.
#include <cmath>

#include "data/augment.h"
#include "data/randaugment.h"
#include "tests/test_util.h"

namespace {
const uint8_t kFill[3] = {124, 116, 104};

Image gray_row(std::vector<int> values) {  // 1 x n, one channel
  Image img(int(values.size()), 1, 1);
  for (size_t i = 0; i < values.size(); i++) img.pixels[i] = uint8_t(values[i]);
  return img;
}
std::vector<int> values(const Image& img) { return std::vector<int>(img.pixels.begin(), img.pixels.end()); }
Image applied(RaOp op, double arg, Image img) {
  ra_apply(op, arg, kFill, &img);
  return img;
}
}  // namespace

TEST(RandAugment, ParsesTimmsConfigStrings) {
  RandAugmentOptions o = parse_randaugment("rand-m9-mstd0.5-inc1");
  EXPECT_EQ(o.magnitude, 9.0);
  EXPECT_EQ(o.magnitude_std, 0.5);
  EXPECT_TRUE(o.increasing);
  EXPECT_EQ(o.num_ops, 2);
  EXPECT_EQ(o.prob, 0.5);
  o = parse_randaugment("rand-n3-m10-mstd101-p1-mmax12");
  EXPECT_EQ(o.num_ops, 3);
  EXPECT_TRUE(std::isinf(o.magnitude_std));
  EXPECT_EQ(o.prob, 1.0);
  EXPECT_EQ(o.magnitude_max, 12.0);
  o = parse_randaugment("rand-m7");  // timm's defaults for the rest
  EXPECT_FALSE(o.increasing);
  EXPECT_EQ(o.magnitude_std, 0.0);
  EXPECT_EQ(parse_randaugment("rand").magnitude, 10.0);
  expect_user_error([] { parse_randaugment("augmix-m5"); }, "does not start with 'rand'");
  expect_user_error([] { parse_randaugment("rand-m9-w0"); }, "unknown part 'w0'");
  expect_user_error([] { parse_randaugment("rand-m"); }, "RandAugment 'm' in 'rand-m'");
  expect_user_error([] { parse_randaugment("rand-p2"); }, "p in [0, 1]");
}

// Magnitude 9 (level 0.9): posterize keeps 4 - floor(3.6) = 1 bit (3 without inc), solarize at
// 256 - floor(230.4) = 26 (230), solarize-add 99, rotate +-27 degrees, shear +-0.27, translate +-0.405,
// enhance 1 +- 0.81 (1.72 without inc).
TEST(RandAugment, LevelFunctions) {
  RandAugmentOptions inc, plain;
  plain.increasing = false;
  Rng rng(1);
  EXPECT_EQ(ra_argument(RaOp::kPosterize, 9, inc, rng), 1);
  EXPECT_EQ(ra_argument(RaOp::kPosterize, 9, plain, rng), 3);
  EXPECT_EQ(ra_argument(RaOp::kSolarize, 9, inc, rng), 26);
  EXPECT_EQ(ra_argument(RaOp::kSolarize, 9, plain, rng), 230);
  EXPECT_EQ(ra_argument(RaOp::kSolarizeAdd, 9, inc, rng), 99);
  EXPECT_NEAR(ra_argument(RaOp::kContrast, 9, plain, rng), 1.72, 1e-12);
  int negative = 0;
  for (int i = 0; i < 400; i++) {
    const double angle = ra_argument(RaOp::kRotate, 9, inc, rng);
    ASSERT_NEAR(std::fabs(angle), 27.0, 1e-12);
    negative += angle < 0;
    ASSERT_NEAR(std::fabs(ra_argument(RaOp::kShearY, 9, inc, rng)), 0.27, 1e-12);
    ASSERT_NEAR(std::fabs(ra_argument(RaOp::kTranslateX, 9, inc, rng)), 0.405, 1e-12);
    const double f = ra_argument(RaOp::kSharpness, 9, inc, rng);
    ASSERT_TRUE(std::fabs(f - 1.81) < 1e-12 || std::fabs(f - 0.19) < 1e-12) << f;
  }
  EXPECT_NEAR(negative, 200, 40);
  EXPECT_EQ(ra_argument(RaOp::kBrightness, 10, inc, rng) >= 0.1, true);  // max(0.1, 1 - 0.9)
}

TEST(RandAugment, LookupTableOps) {
  const Image img = gray_row({0, 10, 25, 26, 127, 128, 200, 255});
  EXPECT_EQ(values(applied(RaOp::kInvert, 0, img)), (std::vector<int>{255, 245, 230, 229, 128, 127, 55, 0}));
  EXPECT_EQ(values(applied(RaOp::kPosterize, 1, img)), (std::vector<int>{0, 0, 0, 0, 0, 128, 128, 128}));
  EXPECT_EQ(values(applied(RaOp::kPosterize, 0, img)), (std::vector<int>(8, 0)));
  EXPECT_EQ(values(applied(RaOp::kSolarize, 26, img)), (std::vector<int>{0, 10, 25, 229, 128, 127, 55, 0}));
  EXPECT_EQ(values(applied(RaOp::kSolarizeAdd, 99, img)), (std::vector<int>{99, 109, 124, 125, 226, 128, 200, 255}));
}

// Autocontrast stretches [50, 150] to [0, 255]: 100 -> int(100 * 2.55 - 127.5) = 127. Equalize on 255
// pixels each of 10, 20, 30: step = (765 - 255) / 255 = 2, so 10 -> 1/2 = 0, 20 -> (1 + 255)/2 = 128,
// 30 -> (1 + 510)/2 = 255.
TEST(RandAugment, AutoContrastAndEqualize) {
  EXPECT_EQ(values(applied(RaOp::kAutoContrast, 0, gray_row({50, 100, 150, 75}))), (std::vector<int>{0, 127, 255, 63}));
  EXPECT_EQ(values(applied(RaOp::kAutoContrast, 0, gray_row({7, 7}))), (std::vector<int>{7, 7}));  // one level
  std::vector<int> v;
  for (int i = 0; i < 765; i++) v.push_back(i < 255 ? 10 : i < 510 ? 20 : 30);
  const std::vector<int> eq = values(applied(RaOp::kEqualize, 0, gray_row(v)));
  EXPECT_EQ(eq[0], 0);
  EXPECT_EQ(eq[300], 128);
  EXPECT_EQ(eq[600], 255);
  // Channels are equalised separately.
  Image rgb(2, 1, 3);
  rgb.pixels = {10, 50, 0, 20, 50, 9};
  EXPECT_EQ(values(applied(RaOp::kAutoContrast, 0, rgb)), (std::vector<int>{0, 50, 0, 255, 50, 255}));
}

// Enhance: d + f (x - d), clipped and truncated.
TEST(RandAugment, EnhanceOps) {
  EXPECT_EQ(values(applied(RaOp::kBrightness, 0.5, gray_row({100, 255, 3}))), (std::vector<int>{50, 127, 1}));
  EXPECT_EQ(values(applied(RaOp::kBrightness, 1.5, gray_row({100, 200}))), (std::vector<int>{150, 255}));
  // Contrast around the mean luma 150: factor 2 takes 100 -> 50 and 200 -> 250.
  EXPECT_EQ(values(applied(RaOp::kContrast, 2.0, gray_row({100, 200, 100, 200}))),
            (std::vector<int>{50, 250, 50, 250}));
  // Color 0 is the luma: (19595 * 255 + 2^15) >> 16 = 76 for pure red; Color 1 changes nothing.
  Image red(1, 1, 3);
  red.pixels = {255, 0, 0};
  EXPECT_EQ(values(applied(RaOp::kColor, 0.0, red)), (std::vector<int>{76, 76, 76}));
  EXPECT_EQ(values(applied(RaOp::kColor, 1.0, red)), (std::vector<int>{255, 0, 0}));
  // Sharpness 0 is the SMOOTH filter: a lone 255 becomes round(5 * 255 / 13) = 98 (borders unchanged);
  // factor 0.5 gives 98 + 0.5 * 157 = 176.5 -> 176.
  Image dot(3, 3, 1);
  dot.at(1, 1, 0) = 255;
  EXPECT_EQ(values(applied(RaOp::kSharpness, 0.0, dot)), (std::vector<int>{0, 0, 0, 0, 98, 0, 0, 0, 0}));
  EXPECT_EQ(applied(RaOp::kSharpness, 0.5, dot).at(1, 1, 0), 176);
}

// 90 degrees counter-clockwise on 4 x 4: output (x, y) = input (3 - y, x) exactly.
TEST(RandAugment, RotateIsCounterClockwiseAboutTheCentre) {
  Image img(4, 4, 1);
  for (int i = 0; i < 16; i++) img.pixels[size_t(i)] = uint8_t(10 * i);
  const Image out = applied(RaOp::kRotate, 90.0, img);
  for (int y = 0; y < 4; y++)
    for (int x = 0; x < 4; x++) EXPECT_EQ(out.at(x, y, 0), img.at(3 - y, x, 0)) << x << "," << y;
  EXPECT_EQ(values(applied(RaOp::kRotate, 360.0, img)), values(img));
  EXPECT_EQ(values(applied(RaOp::kRotate, -270.0, img)), values(out));
}

// Translate by 0.25 of 4 pixels: output x reads input x + 1; the last column falls outside and gets the
// fill. ShearX 0.5: row y reads x + 0.5 (y + 0.5) - 0.5 + 0.5 -> row 0 at x + 0.25: 0.75 a + 0.25 b.
TEST(RandAugment, TranslateAndShear) {
  Image img(4, 4, 3);
  const int row[4] = {0, 100, 200, 40};
  for (int y = 0; y < 4; y++)
    for (int x = 0; x < 4; x++)
      for (int c = 0; c < 3; c++) img.at(x, y, c) = uint8_t(row[x]);
  Image t = applied(RaOp::kTranslateX, 0.25, img);
  for (int c = 0; c < 3; c++) {
    EXPECT_EQ(t.at(0, 2, c), 100);
    EXPECT_EQ(t.at(2, 2, c), 40);
    EXPECT_EQ(t.at(3, 2, c), kFill[c]);
  }
  Image s = applied(RaOp::kShearX, 0.5, img);
  EXPECT_EQ(s.at(0, 0, 0), 25);
  EXPECT_EQ(s.at(1, 0, 0), 125);
  EXPECT_EQ(s.at(2, 0, 0), 160);
  EXPECT_EQ(s.at(3, 0, 0), 40);                     // x + 0.25 past the last centre: the clamped neighbour
  EXPECT_EQ(s.at(0, 3, 1), 175);                    // row 3 reads x + 1.75: 0.25 * 100 + 0.75 * 200
  EXPECT_EQ(s.at(2, 3, 2), kFill[2]);               // 2 + 2.25 >= 4: outside
  Image v = applied(RaOp::kTranslateY, -0.5, img);  // rows move down by 2; the top two are filled
  EXPECT_EQ(v.at(1, 0, 0), kFill[0]);
  EXPECT_EQ(v.at(1, 3, 0), 100);
}

// The draws for one image, replayed from a copy of the generator: the ops first, then per op its coin,
// its magnitude (9 + 0.5 N(0, 1), clipped) and the level function's sign.
TEST(RandAugment, DrawOrderAndDeterminism) {
  const RandAugmentOptions o;
  Image img(16, 12, 3);
  for (size_t i = 0; i < img.pixels.size(); i++) img.pixels[i] = uint8_t((i * 37) % 256);
  for (uint64_t k = 0; k < 40; k++) {
    Rng rng = Rng::derive(7, RngStream::kAugment, 0, k), copy = rng;
    Image got = img, want = img;
    rand_augment(o, rng, &got);
    const RaOp a = RaOp(copy.below(15)), b = RaOp(copy.below(15));
    for (RaOp op : {a, b}) {
      if (double(copy.uniform()) > 0.5) continue;
      const double m = std::clamp(9.0 + 0.5 * copy.normal(), 0.0, 10.0);
      ra_apply(op, ra_argument(op, m, o, copy), o.fill, &want);
    }
    ASSERT_EQ(got.pixels, want.pixels) << k;
    ASSERT_EQ(rng.next(), copy.next());  // and the same number of draws
  }
}

// In the train transform: reproducible, and with every op skipped (p = 0) the 8-bit rounding is all
// that differs from the transform without RandAugment.
TEST(RandAugment, InTheTrainTransform) {
  Image img(80, 60, 3);
  for (size_t i = 0; i < img.pixels.size(); i++) img.pixels[i] = uint8_t((i * 13) % 251);
  TrainTransformOptions o;
  o.size = 32;
  o.use_randaugment = true;
  std::vector<float> a(3 * 32 * 32), b(a.size()), plain(a.size());
  for (uint64_t k = 0; k < 10; k++) {
    Rng r1 = Rng::derive(3, RngStream::kAugment, 0, k), r2 = r1, r3 = r1;
    train_transform(img, o, r1, a.data(), nullptr);
    train_transform(img, o, r2, b.data(), nullptr);
    ASSERT_EQ(a, b);
    o.randaugment.prob = 0.0;
    train_transform(img, o, r3, a.data(), nullptr);
    o.use_randaugment = false;
    Rng r4 = Rng::derive(3, RngStream::kAugment, 0, k);
    train_transform(img, o, r4, plain.data(), nullptr);
    for (size_t i = 0; i < a.size(); i++) ASSERT_NEAR(a[i], plain[i], 0.5f / 255.0f / 0.224f + 1e-5f) << i;
    o.use_randaugment = true;
    o.randaugment.prob = 0.5;
  }
}

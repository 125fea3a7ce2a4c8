// The antialiased resampler (data/resample.h) against values worked out by hand from Pillow's definition:
// centre (o + 0.5) * scale, filter stretched by max(scale, 1), taps clipped to the box, weights normalised;
// and the GPU resize's per-pixel taps (data/resample_taps.h) against it.
#include "data/resample.h"
#include "data/resample_taps.h"
#include "tests/test_util.h"

namespace {
// The image with pixel (x, y, c) = f(x, y, c).
template <class F>
Image make_image(int w, int h, int c, F f) {
  Image img(w, h, c);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int k = 0; k < c; k++) img.at(x, y, k) = uint8_t(f(x, y, k));
  return img;
}

std::vector<float> resize(const Image& img, Box box, int out_w, int out_h, Filter f) {
  std::vector<float> out(size_t(out_w) * size_t(out_h) * size_t(img.channels));
  resample(img, box, out_w, out_h, f, out.data(), nullptr);
  return out;
}
}  // namespace

TEST(Resample, ConstantImageStaysConstant) {
  const Image img = make_image(37, 23, 3, [](int, int, int c) { return 40 + 90 * c; });
  for (Filter f : {Filter::kBilinear, Filter::kBicubic})
    for (auto [box, ow, oh] : {std::tuple{Box{0, 0, 37, 23}, 224, 224}, std::tuple{Box{5, 3, 20, 11}, 7, 3},
                               std::tuple{Box{1, 2, 36, 21}, 50, 9}}) {
      const std::vector<float> out = resize(img, box, ow, oh, f);
      for (size_t i = 0; i < out.size(); i++) ASSERT_NEAR(out[i], 40 + 90 * (i % 3), 1e-3) << i;
    }
}

TEST(Resample, SameSizeIsTheIdentityExactly) {
  const Image img = make_image(13, 9, 3, [](int x, int y, int c) { return (x * 41 + y * 17 + c * 89) % 256; });
  for (Filter f : {Filter::kBilinear, Filter::kBicubic}) {
    const std::vector<float> out = resize(img, {0, 0, 13, 9}, 13, 9, f);
    for (size_t i = 0; i < out.size(); i++) ASSERT_EQ(out[i], float(img.pixels[i])) << i;
    // A box of the same size as the output is a plain crop.
    const std::vector<float> crop = resize(img, {4, 2, 5, 6}, 5, 6, f);
    for (int y = 0; y < 6; y++)
      for (int x = 0; x < 5; x++)
        for (int c = 0; c < 3; c++) ASSERT_EQ(crop[size_t((y * 5 + x) * 3 + c)], float(img.at(x + 4, y + 2, c)));
  }
}

// 4 -> 2 bilinear: scale 2, the triangle stretched to support 2. Output 0 is centred at 1.0 and reads
// pixels 0, 1, 2 with weights tri(-0.25), tri(0.25), tri(0.75) = 0.75, 0.75, 0.25, i.e. 3/7, 3/7, 1/7;
// output 1 (centre 3.0) reads 1, 2, 3 with 1/7, 3/7, 3/7. For v(x, y) = px[x] + py[y] with
// px = 0, 70, 140, 210 and py = 0, 14, 28, 42: px -> 50, 160 and py -> 10, 32. (A non-antialiased
// bilinear would give the 2x2 means 35 and 175 instead.)
TEST(Resample, BilinearHalvingMatchesHandComputedWeights) {
  const int px[4] = {0, 70, 140, 210}, py[4] = {0, 14, 28, 42};
  const Image img = make_image(4, 4, 1, [&](int x, int y, int) { return px[x] + py[y]; });
  const std::vector<float> out = resize(img, {0, 0, 4, 4}, 2, 2, Filter::kBilinear);
  const float want[4] = {60, 170, 82, 192};
  for (int i = 0; i < 4; i++) EXPECT_NEAR(out[size_t(i)], want[i], 1e-4) << i;
}

// 2 -> 4 bilinear (upscaling: no stretch): centres 0.25, 0.75, 1.25, 1.75 give a, 0.75a + 0.25b,
// 0.25a + 0.75b, b (the edges read one pixel: the other tap is outside the box).
TEST(Resample, BilinearDoublingMatchesHandComputedWeights) {
  const Image img = make_image(2, 1, 1, [](int x, int, int) { return x == 0 ? 0 : 200; });
  const std::vector<float> out = resize(img, {0, 0, 2, 1}, 4, 1, Filter::kBilinear);
  const float want[4] = {0, 50, 150, 200};
  for (int i = 0; i < 4; i++) EXPECT_NEAR(out[size_t(i)], want[i], 1e-4) << i;
}

// 4 -> 2 bicubic: support 4 after the stretch; output 0 (centre 1.0) reads pixels 0..3 at
// (i - 0.5) / 2 = -0.25, 0.25, 0.75, 1.25, where Keys' a = -0.5 cubic is 0.8671875, 0.8671875, 0.2265625,
// -0.0703125 (sum 1.890625). On 0, 70, 140, 210: (60.703125 + 31.71875 - 14.765625) / 1.890625.
TEST(Resample, BicubicHalvingMatchesHandComputedWeights) {
  const Image img = make_image(4, 1, 1, [](int x, int, int) { return 70 * x; });
  const std::vector<float> out = resize(img, {0, 0, 4, 1}, 2, 1, Filter::kBicubic);
  EXPECT_NEAR(out[0], 77.65625 / 1.890625, 1e-4);
  EXPECT_NEAR(out[1], 210.0 - 77.65625 / 1.890625, 1e-4);  // the mirror image
}

// A 1-pixel checkerboard shrunk 4x: inside, every output pixel averages as much black as white
// (antialiasing); point-sampling bilinear would give pure black or white.
TEST(Resample, DownscalingAveragesAwayFineDetail) {
  const Image img = make_image(16, 16, 1, [](int x, int y, int) { return (x + y) % 2 ? 255 : 0; });
  const std::vector<float> out = resize(img, {0, 0, 16, 16}, 4, 4, Filter::kBilinear);
  for (int y = 1; y <= 2; y++)
    for (int x = 1; x <= 2; x++) EXPECT_NEAR(out[size_t(y * 4 + x)], 127.5f, 1e-3) << x << "," << y;
}

// A window of the output (the eval transform's centre crop) is exactly that part of the full resize.
TEST(Resample, WindowEqualsTheCropOfTheFullResize) {
  const Image img = make_image(50, 31, 3, [](int x, int y, int c) { return (x * 7 + y * 29 + c * 50) % 256; });
  for (Filter f : {Filter::kBilinear, Filter::kBicubic}) {
    const std::vector<float> full = resize(img, {3, 1, 44, 29}, 23, 17, f);
    std::vector<float> win(size_t(9 * 6 * 3));
    resample(img, {3, 1, 44, 29}, 23, 17, 5, 8, 9, 6, f, win.data(), nullptr);
    for (int y = 0; y < 6; y++)
      for (int x = 0; x < 9; x++)
        for (int c = 0; c < 3; c++)
          ASSERT_EQ(win[size_t((y * 9 + x) * 3 + c)], full[size_t(((y + 8) * 23 + x + 5) * 3 + c)]);
  }
}

// Only pixels inside the box contribute: a bright frame around the box leaves no trace.
TEST(Resample, PixelsOutsideTheBoxDoNotContribute) {
  const Image img =
      make_image(20, 20, 1, [](int x, int y, int) { return x >= 4 && x < 16 && y >= 4 && y < 16 ? 80 : 255; });
  for (Filter f : {Filter::kBilinear, Filter::kBicubic}) {
    const std::vector<float> out = resize(img, {4, 4, 12, 12}, 5, 5, f);
    for (float v : out) ASSERT_NEAR(v, 80.0f, 1e-3);
  }
}

TEST(Resample, TapsFollowPillowsBounds) {
  // 10 -> 3: scale 10/3, support 10/3; output 1 is centred at 5: taps [trunc(2.1667), trunc(8.8333)) = [2, 8).
  const AxisTaps t = axis_taps(Filter::kBilinear, 10, 3, 0, 3);
  EXPECT_EQ(t.taps, 2 * 4 + 1);
  EXPECT_EQ(t.first, (std::vector<int>{0, 2, 5}));
  EXPECT_EQ(t.count, (std::vector<int>{5, 6, 5}));
  float sum = 0;
  for (int j = 0; j < t.count[1]; j++) sum += t.weight[size_t(t.taps + j)];
  EXPECT_NEAR(sum, 1.0f, 1e-6);
  EXPECT_FLOAT_EQ(t.weight[size_t(t.taps)], t.weight[size_t(t.taps + 5)]);  // symmetric about the centre
}

// The GPU's per-pixel taps (data/resample_taps.h, one output pixel at a time) are axis_taps' exactly: same
// windows, bitwise the same weights, for up- and downscaling, windows that start inside the axis, both filters.
TEST(Resample, PerPixelTapsAreAxisTapsExactly) {
  for (Filter f : {Filter::kBilinear, Filter::kBicubic})
    for (int in_len : {1, 2, 3, 7, 13, 64, 100, 375, 500, 2999})
      for (int out_len : {1, 2, 5, 8, 64, 224, 256, 341}) {
        const int first = out_len > 4 ? out_len / 3 : 0, count = out_len - first;
        const AxisTaps t = axis_taps(f, in_len, out_len, first, count);
        for (int k = 0; k < count; k++) {
          const TapWindow w = tap_window(f == Filter::kBicubic, in_len, out_len, first + k);
          ASSERT_EQ(w.first, t.first[size_t(k)]) << in_len << " -> " << out_len << ", pixel " << first + k;
          ASSERT_EQ(w.count, t.count[size_t(k)]) << in_len << " -> " << out_len << ", pixel " << first + k;
          for (int j = 0; j < w.count; j++)
            ASSERT_EQ(tap_weight(w, j), t.weight[size_t(k) * size_t(t.taps) + size_t(j)])
                << in_len << " -> " << out_len << ", pixel " << first + k << ", tap " << j;
        }
      }
}

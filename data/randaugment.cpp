#include "data/randaugment.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "common/cli.h"
#include "common/error.h"

namespace {
using Lut = std::array<uint8_t, 256>;

// Pillow's RGB -> L conversion (ITU-R 601-2 luma in 16-bit fixed point, rounded).
uint8_t luma(const uint8_t* p) { return uint8_t((19595u * p[0] + 38470u * p[1] + 7471u * p[2] + 0x8000u) >> 16); }

using Histogram = std::array<int64_t, 256>;

// Per-channel histograms (up to 3), one pass.
std::array<Histogram, 3> histograms(const Image& img) {
  std::array<Histogram, 3> h{};
  const uint8_t* p = img.pixels.data();
  const size_t n = img.pixels.size();
  if (img.channels == 3) {
    for (size_t i = 0; i < n; i += 3) {
      h[0][p[i]]++;
      h[1][p[i + 1]]++;
      h[2][p[i + 2]]++;
    }
  } else {
    for (size_t i = 0; i < n; i++) h[0][p[i]]++;
  }
  return h;
}

// Applies a table per channel, one pass.
void apply_luts(const Lut* luts, Image* img) {
  uint8_t* p = img->pixels.data();
  const size_t n = img->pixels.size();
  if (img->channels == 3) {
    for (size_t i = 0; i < n; i += 3) {
      p[i] = luts[0][p[i]];
      p[i + 1] = luts[1][p[i + 1]];
      p[i + 2] = luts[2][p[i + 2]];
    }
  } else {
    for (size_t i = 0; i < n; i++) p[i] = luts[0][p[i]];
  }
}

template <class F>
void apply_all(F f, Image* img) {
  Lut lut[3];
  for (int v = 0; v < 256; v++) lut[0][size_t(v)] = uint8_t(f(v));
  lut[1] = lut[2] = lut[0];
  apply_luts(lut, img);
}

// ImageOps.autocontrast (no cutoff): each channel's [lo, hi] stretched to [0, 255], truncated.
Lut autocontrast_lut(const Histogram& h) {
  Lut lut;
  int lo = 0, hi = 255;
  while (lo < 256 && h[size_t(lo)] == 0) lo++;
  while (hi >= 0 && h[size_t(hi)] == 0) hi--;
  for (int v = 0; v < 256; v++) {
    if (hi <= lo) {
      lut[size_t(v)] = uint8_t(v);
      continue;
    }
    const double scale = 255.0 / (hi - lo), offset = -lo * scale;
    lut[size_t(v)] = uint8_t(std::clamp(int(v * scale + offset), 0, 255));
  }
  return lut;
}

// ImageOps.equalize: step = (pixels - count of the last used level) / 255; level v maps to
// (step / 2 + pixels below v) / step (integer divisions, clipped to 255 as Pillow's point() does);
// identity when one level is used or step is 0.
Lut equalize_lut(const Histogram& h) {
  Lut lut;
  int64_t total = 0, last = 0, used = 0;
  for (int64_t n : h)
    if (n) {
      total += n;
      last = n;
      used++;
    }
  const int64_t step = (total - last) / 255;
  int64_t n = step / 2;
  for (int v = 0; v < 256; v++) {
    lut[size_t(v)] = used <= 1 || step == 0 ? uint8_t(v) : uint8_t(std::min<int64_t>(n / step, 255));
    n += h[size_t(v)];
  }
  return lut;
}

template <class F>
void per_channel_luts(F make, Image* img) {
  const std::array<Histogram, 3> h = histograms(*img);
  Lut lut[3];
  for (int c = 0; c < img->channels; c++) lut[c] = make(h[size_t(c)]);
  apply_luts(lut, img);
}

// ImageEnhance's blend(degenerate, img, f): d + f (x - d) clipped to [0, 255] and truncated, where
// degenerate(i) gives d for value i.
template <class D>
void blend(D degenerate, float f, Image* img) {
  uint8_t* p = img->pixels.data();
  for (size_t i = 0; i < img->pixels.size(); i++) {
    const float d = degenerate(i);
    p[i] = uint8_t(std::min(std::max(d + f * (float(p[i]) - d), 0.0f), 255.0f));
  }
}

// ImageEnhance.Color: the degenerate is the pixel's luma (a gray image is its own).
void color(float f, Image* img) {
  if (img->channels != 3) return;
  uint8_t* p = img->pixels.data();
  for (size_t i = 0; i < img->pixels.size(); i += 3) {
    const float d = luma(p + i);
    for (size_t c = 0; c < 3; c++) p[i + c] = uint8_t(std::min(std::max(d + f * (float(p[i + c]) - d), 0.0f), 255.0f));
  }
}

// ImageEnhance.Contrast's degenerate: the mean luma, rounded.
float mean_luma(const Image& img) {
  double sum = 0;
  const size_t n = img.pixels.size() / size_t(img.channels);
  for (size_t p = 0; p < n; p++) sum += img.channels == 3 ? luma(&img.pixels[p * 3]) : img.pixels[p];
  return float(int(sum / double(n) + 0.5));
}

// ImageFilter.SMOOTH, rounded; the border rows and columns keep their values.
std::vector<uint8_t> smooth(const Image& img) {
  std::vector<uint8_t> d(img.pixels);
  const size_t C = size_t(img.channels), stride = size_t(img.width) * C;
  for (int y = 1; y + 1 < img.height; y++) {
    const uint8_t* up = &img.pixels[size_t(y - 1) * stride];
    const uint8_t* mid = up + stride;
    const uint8_t* down = mid + stride;
    uint8_t* out = &d[size_t(y) * stride];
    for (size_t i = C; i + C < stride; i++) {
      const int sum =
          up[i - C] + up[i] + up[i + C] + mid[i - C] + 5 * mid[i] + mid[i + C] + down[i - C] + down[i] + down[i + C];
      out[i] = uint8_t((sum + 6) / 13);
    }
  }
  return d;
}

// Image.transform(AFFINE, a, BILINEAR, fillcolor): output (x, y) reads the input at
// (a0 X + a1 Y + a2, a3 X + a4 Y + a5) with X = x + 0.5, Y = y + 0.5.
void affine(const double a[6], const uint8_t fill[3], Image* img) {
  const std::vector<uint8_t> src = img->pixels;
  const int W = img->width, H = img->height, C = img->channels;
  const size_t stride = size_t(W) * size_t(C);
  uint8_t* out = img->pixels.data();
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++, out += C) {
      double xin = a[0] * (x + 0.5) + a[1] * (y + 0.5) + a[2], yin = a[3] * (x + 0.5) + a[4] * (y + 0.5) + a[5];
      if (xin < 0.0 || xin >= W || yin < 0.0 || yin >= H) {
        for (int c = 0; c < C; c++) out[c] = fill[c];
        continue;
      }
      xin -= 0.5;
      yin -= 0.5;
      const int x0 = int(xin + 1.0) - 1, y0 = int(yin + 1.0) - 1;  // floor: xin, yin >= -0.5 here
      const double dx = xin - x0, dy = yin - y0;
      const int r0 = std::max(y0, 0), r1 = y0 + 1 < H ? y0 + 1 : r0;  // Pillow: the row below, or the same
      const uint8_t* p0 = &src[size_t(r0) * stride];
      const uint8_t* p1 = &src[size_t(r1) * stride];
      const size_t xa = size_t(std::max(x0, 0)) * size_t(C), xb = size_t(std::min(x0 + 1, W - 1)) * size_t(C);
      for (size_t c = 0; c < size_t(C); c++) {
        const double v1 = p0[xa + c] + (p0[xb + c] - p0[xa + c]) * dx;
        const double v2 = p1[xa + c] + (p1[xb + c] - p1[xa + c]) * dx;
        out[c] = uint8_t(v1 + (v2 - v1) * dy);
      }
    }
}

double round15(double v) { return std::nearbyint(v * 1e15) / 1e15; }  // Python's round(v, 15)

// Image.rotate(angle) without expand: counter-clockwise about (w/2, h/2).
void rotate(double degrees, const uint8_t fill[3], Image* img) {
  const double t = -std::fmod(std::fmod(degrees, 360.0) + 360.0, 360.0) * M_PI / 180.0;
  const double cx = img->width / 2.0, cy = img->height / 2.0;
  double a[6] = {round15(std::cos(t)), round15(std::sin(t)), 0.0, round15(-std::sin(t)), round15(std::cos(t)), 0.0};
  a[2] = a[0] * -cx + a[1] * -cy + cx;
  a[5] = a[3] * -cx + a[4] * -cy + cy;
  affine(a, fill, img);
}

double random_sign(double v, Rng& rng) { return rng.uniform() > 0.5 ? -v : v; }  // timm's _randomly_negate
}  // namespace

RandAugmentOptions parse_randaugment(const std::string& spec) {
  RandAugmentOptions o;  // timm's defaults for keys not given: m10, mstd0, n2, p0.5, inc0
  o.magnitude = 10.0;
  o.magnitude_std = 0.0;
  o.increasing = false;
  const std::string usage = "; use timm's form, e.g. rand-m9-mstd0.5-inc1 (keys m, n, mstd, mmax, p, inc).";
  size_t start = 0, end = spec.find('-');
  if (spec.substr(0, end) != "rand") user_error("RandAugment spec '", spec, "' does not start with 'rand'", usage);
  while (end != std::string::npos) {
    start = end + 1;
    end = spec.find('-', start);
    const std::string part = spec.substr(start, end == std::string::npos ? std::string::npos : end - start);
    const size_t digit = part.find_first_of("0123456789.");
    const std::string key = part.substr(0, digit), value = digit == std::string::npos ? "" : part.substr(digit);
    const std::string what = "RandAugment '" + key + "' in '" + spec + "'";
    if (key == "m") {
      o.magnitude = parse_number(what, value);
    } else if (key == "mstd") {
      o.magnitude_std = parse_number(what, value);
      if (o.magnitude_std > 100) o.magnitude_std = std::numeric_limits<double>::infinity();  // timm: uniform [0, m]
    } else if (key == "mmax") {
      o.magnitude_max = parse_number(what, value);
    } else if (key == "n") {
      o.num_ops = int(parse_integer(what, value, 0, 100));
    } else if (key == "p") {
      o.prob = parse_number(what, value);
    } else if (key == "inc") {
      o.increasing = parse_integer(what, value, 0, 1) == 1;
    } else {
      user_error("RandAugment spec '", spec, "' has the unknown part '", part, "'", usage);
    }
  }
  if (!(o.magnitude >= 0 && o.magnitude_std >= 0 && o.magnitude_max > 0 && o.prob >= 0 && o.prob <= 1))
    user_error("RandAugment spec '", spec, "' needs m, mstd >= 0, mmax > 0 and p in [0, 1]", usage);
  return o;
}

double ra_argument(RaOp op, double magnitude, const RandAugmentOptions& o, Rng& rng) {
  const double level = magnitude / 10.0;
  switch (op) {
    case RaOp::kRotate:
      return random_sign(30.0 * level, rng);
    case RaOp::kShearX:
    case RaOp::kShearY:
      return random_sign(0.3 * level, rng);
    case RaOp::kTranslateX:
    case RaOp::kTranslateY:
      return random_sign(o.translate_pct * level, rng);
    case RaOp::kPosterize:
      return o.increasing ? 4 - int(4.0 * level) : int(4.0 * level);
    case RaOp::kSolarize:
      return o.increasing ? 256 - int(256.0 * level) : int(256.0 * level);
    case RaOp::kSolarizeAdd:
      return int(110.0 * level);
    case RaOp::kColor:
    case RaOp::kContrast:
    case RaOp::kBrightness:
    case RaOp::kSharpness:
      return o.increasing ? std::max(0.1, 1.0 + random_sign(0.9 * level, rng)) : 1.8 * level + 0.1;
    default:
      return 0.0;  // AutoContrast, Equalize, Invert
  }
}

void ra_apply(RaOp op, double arg, const uint8_t fill[3], Image* img) {
  switch (op) {
    case RaOp::kAutoContrast:
      return per_channel_luts(autocontrast_lut, img);
    case RaOp::kEqualize:
      return per_channel_luts(equalize_lut, img);
    case RaOp::kInvert:
      return apply_all([](int v) { return 255 - v; }, img);
    case RaOp::kPosterize: {
      const int bits = int(arg), mask = bits >= 8 ? 0xFF : ~((1 << (8 - std::max(bits, 0))) - 1) & 0xFF;
      return apply_all([&](int v) { return v & mask; }, img);
    }
    case RaOp::kSolarize:
      return apply_all([&](int v) { return v < int(arg) ? v : 255 - v; }, img);
    case RaOp::kSolarizeAdd:
      return apply_all([&](int v) { return v < 128 ? std::min(255, v + int(arg)) : v; }, img);
    case RaOp::kColor:
      return color(float(arg), img);
    case RaOp::kContrast: {
      const float mean = mean_luma(*img);
      return blend([&](size_t) { return mean; }, float(arg), img);
    }
    case RaOp::kBrightness:
      return blend([](size_t) { return 0.0f; }, float(arg), img);
    case RaOp::kSharpness: {
      const std::vector<uint8_t> d = smooth(*img);
      return blend([&](size_t i) { return float(d[i]); }, float(arg), img);
    }
    case RaOp::kRotate:
      return rotate(arg, fill, img);
    default:
      break;
  }
  double a[6] = {1, 0, 0, 0, 1, 0};
  if (op == RaOp::kShearX) a[1] = arg;
  if (op == RaOp::kShearY) a[3] = arg;
  if (op == RaOp::kTranslateX) a[2] = arg * img->width;
  if (op == RaOp::kTranslateY) a[5] = arg * img->height;
  affine(a, fill, img);
}

void rand_augment(const RandAugmentOptions& o, Rng& rng, Image* img) {
  RaOp ops[100];
  CHECK(o.num_ops >= 0 && o.num_ops <= 100);
  for (int k = 0; k < o.num_ops; k++) ops[k] = RaOp(rng.below(uint32_t(RaOp::kCount)));
  for (int k = 0; k < o.num_ops; k++) {
    if (o.prob < 1.0 && double(rng.uniform()) > o.prob) continue;
    double m = o.magnitude;
    if (std::isinf(o.magnitude_std))
      m = rng.uniform(0.0, o.magnitude);
    else if (o.magnitude_std > 0.0)
      m = o.magnitude + o.magnitude_std * rng.normal();
    m = std::clamp(m, 0.0, o.magnitude_max);
    ra_apply(ops[k], ra_argument(ops[k], m, o, rng), o.fill, img);
  }
}

#include "data/augment.h"

#include <cmath>

#include "common/error.h"

int round_half_even(double x) {
  const double f = std::floor(x), frac = x - f;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(f, 2.0) != 0.0)) return int(f) + 1;
  return int(f);
}

Box sample_rrc_box(int width, int height, const RrcOptions& o, Rng& rng, bool* fallback) {
  const double area = double(width) * height, log_lo = std::log(o.ratio_min), log_hi = std::log(o.ratio_max);
  if (fallback) *fallback = false;
  for (int attempt = 0; attempt < 10; attempt++) {
    const double target = area * rng.uniform(o.scale_min, o.scale_max);
    const double ratio = std::exp(rng.uniform(log_lo, log_hi));
    const int w = round_half_even(std::sqrt(target * ratio)), h = round_half_even(std::sqrt(target / ratio));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int y = int(rng.below(uint32_t(height - h + 1)));
      const int x = int(rng.below(uint32_t(width - w + 1)));
      return {x, y, w, h};
    }
  }
  if (fallback) *fallback = true;
  int w = width, h = height;
  const double in_ratio = double(width) / height;
  if (in_ratio < o.ratio_min) {
    h = round_half_even(w / o.ratio_min);
  } else if (in_ratio > o.ratio_max) {
    w = round_half_even(h * o.ratio_max);
  }
  return {(width - w) / 2, (height - h) / 2, w, h};
}

EvalGeometry eval_geometry(int width, int height, int size, double crop_pct) {
  CHECK(width > 0 && height > 0 && size > 0 && size <= 4096 && crop_pct >= 0.1 && crop_pct <= 1.0);  // ints fit
  const int64_t s = int64_t(std::floor(size / crop_pct));  // Python's math.floor(img_size / crop_pct)
  EvalGeometry g;
  if (width <= height) {
    g.resize_w = int(s);
    g.resize_h = int(s * height / width);
  } else {
    g.resize_h = int(s);
    g.resize_w = int(s * width / height);
  }
  g.crop = {round_half_even((g.resize_w - size) / 2.0), round_half_even((g.resize_h - size) / 2.0), size, size};
  return g;
}

ResizeGeometry train_geometry(int width, int height, const TrainTransformOptions& o, Rng& rng) {
  ResizeGeometry g;
  g.box = sample_rrc_box(width, height, o.rrc, rng);
  g.flip = rng.bernoulli(o.hflip);
  g.out_w = g.out_h = o.size;
  return g;
}

ResizeGeometry eval_resize_geometry(int width, int height, const EvalTransformOptions& o) {
  const EvalGeometry e = eval_geometry(width, height, o.size, o.crop_pct);
  ResizeGeometry g;
  g.box = {0, 0, width, height};
  g.out_w = e.resize_w;
  g.out_h = e.resize_h;
  g.out_x = e.crop.x;
  g.out_y = e.crop.y;
  return g;
}

void normalize_to_chw(const float* hwc, int w, int h, int c, bool flip, const Normalize& norm, float* chw) {
  for (int ch = 0; ch < c; ch++) {
    // (v / 255 - mean) / std as one multiply-add
    const float a = 1.0f / (255.0f * norm.std[ch]), b = -norm.mean[ch] / norm.std[ch];
    float* plane = chw + size_t(ch) * size_t(w) * size_t(h);
    for (int y = 0; y < h; y++) {
      const float* row = hwc + size_t(y) * size_t(w) * size_t(c) + size_t(ch);
      float* o = plane + size_t(y) * size_t(w);
      if (flip)
        for (int x = 0; x < w; x++) o[x] = row[size_t(w - 1 - x) * size_t(c)] * a + b;
      else
        for (int x = 0; x < w; x++) o[x] = row[size_t(x) * size_t(c)] * a + b;
    }
  }
}

namespace {
void check_normalize(const Normalize& n) {
  for (int c = 0; c < 3; c++)
    if (!(n.std[c] > 0.0f) || !std::isfinite(n.mean[c]))
      user_error("normalisation std must be positive and mean finite; channel ", c, " has mean ", n.mean[c],
                 " and std ", n.std[c], ".");
}
}  // namespace

void check_options(const TrainTransformOptions& o) {
  if (o.size <= 0 || o.size > 4096) user_error("image size ", o.size, " is out of range; use 1 to 4096 (e.g. 224).");
  const RrcOptions& r = o.rrc;
  if (!(r.scale_min > 0.0 && r.scale_min <= r.scale_max && r.scale_max <= 1.0))
    user_error("crop scale range (", r.scale_min, ", ", r.scale_max,
               ") is invalid; it needs 0 < min <= max <= 1 (timm's default is 0.08, 1).");
  if (!(r.ratio_min > 0.0 && r.ratio_min <= r.ratio_max && std::isfinite(r.ratio_max)))
    user_error("crop aspect ratio range (", r.ratio_min, ", ", r.ratio_max,
               ") is invalid; it needs 0 < min <= max (timm's default is 0.75, 1.333).");
  if (!(o.hflip >= 0.0 && o.hflip <= 1.0)) user_error("horizontal flip probability ", o.hflip, " is not in [0, 1].");
  check_normalize(o.norm);
}

void check_options(const EvalTransformOptions& o) {
  if (o.size <= 0 || o.size > 4096) user_error("image size ", o.size, " is out of range; use 1 to 4096 (e.g. 224).");
  if (!(o.crop_pct >= 0.1 && o.crop_pct <= 1.0))
    user_error("eval crop fraction ", o.crop_pct,
               " is not in [0.1, 1]; timm's default is 0.875 (resize 256, crop 224).");
  check_normalize(o.norm);
}

namespace {
// RandAugment on the 8-bit crop, as timm's Pillow pipeline has it: the resampled floats rounded, flipped
// if `flip`, augmented, and written back to s->hwc.
void randaugment_crop(const TrainTransformOptions& o, int C, bool flip, Rng& rng, AugmentScratch* s) {
  if (s->crop.width != o.size || s->crop.channels != C) s->crop = Image(o.size, o.size, C);  // reused
  for (int y = 0; y < o.size; y++)
    for (int x = 0; x < o.size; x++) {
      const float* v = &s->hwc[(size_t(y) * size_t(o.size) + size_t(flip ? o.size - 1 - x : x)) * size_t(C)];
      for (int c = 0; c < C; c++) s->crop.at(x, y, c) = uint8_t(std::lround(v[c]));
    }
  rand_augment(o.randaugment, rng, &s->crop);
  for (size_t i = 0; i < s->crop.pixels.size(); i++) s->hwc[i] = s->crop.pixels[i];
}
}  // namespace

void train_transform(const Image& img, const TrainTransformOptions& o, Rng& rng, float* out, AugmentScratch* scratch) {
  AugmentScratch local;
  AugmentScratch& s = scratch ? *scratch : local;
  const ResizeGeometry g = train_geometry(img.width, img.height, o, rng);
  s.hwc.resize(size_t(o.size) * size_t(o.size) * size_t(img.channels));
  resample(img, g.box, o.size, o.size, o.filter, s.hwc.data(), &s.resample);
  if (o.use_randaugment) randaugment_crop(o, img.channels, g.flip, rng, &s);  // flips too
  normalize_to_chw(s.hwc.data(), o.size, o.size, img.channels, g.flip && !o.use_randaugment, o.norm, out);
}

void eval_transform(const Image& img, const EvalTransformOptions& o, float* out, AugmentScratch* scratch) {
  AugmentScratch local;
  AugmentScratch& s = scratch ? *scratch : local;
  const EvalGeometry g = eval_geometry(img.width, img.height, o.size, o.crop_pct);
  s.hwc.resize(size_t(o.size) * size_t(o.size) * size_t(img.channels));
  resample(img, {0, 0, img.width, img.height}, g.resize_w, g.resize_h, g.crop.x, g.crop.y, o.size, o.size, o.filter,
           s.hwc.data(), &s.resample);
  normalize_to_chw(s.hwc.data(), o.size, o.size, img.channels, false, o.norm, out);
}

namespace {
// float (h, w, c) in [0, 255] to bytes, mirrored left to right if `flip`.
void to_bytes(const float* hwc, int w, int h, int c, bool flip, uint8_t* out) {
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int k = 0; k < c; k++) {
        const float v = hwc[(size_t(y) * size_t(w) + size_t(flip ? w - 1 - x : x)) * size_t(c) + size_t(k)];
        out[(size_t(y) * size_t(w) + size_t(x)) * size_t(c) + size_t(k)] =
            uint8_t(std::lround(std::min(255.0f, std::max(0.0f, v))));
      }
}
}  // namespace

void resize_u8(const Image& img, const ResizeGeometry& g, int size, Filter filter, uint8_t* out,
               AugmentScratch* scratch) {
  AugmentScratch local;
  AugmentScratch& s = scratch ? *scratch : local;
  s.hwc.resize(size_t(size) * size_t(size) * size_t(img.channels));
  resample(img, g.box, g.out_w, g.out_h, g.out_x, g.out_y, size, size, filter, s.hwc.data(), &s.resample);
  to_bytes(s.hwc.data(), size, size, img.channels, g.flip, out);
}

void train_transform_u8(const Image& img, const TrainTransformOptions& o, Rng& rng, uint8_t* out,
                        AugmentScratch* scratch) {
  AugmentScratch local;
  AugmentScratch& s = scratch ? *scratch : local;
  const ResizeGeometry g = train_geometry(img.width, img.height, o, rng);
  if (!o.use_randaugment) return resize_u8(img, g, o.size, o.filter, out, &s);
  s.crop = Image(o.size, o.size, img.channels);  // RandAugment works on the 8-bit crop, after the flip
  resize_u8(img, g, o.size, o.filter, s.crop.pixels.data(), &s);
  rand_augment(o.randaugment, rng, &s.crop);
  std::copy(s.crop.pixels.begin(), s.crop.pixels.end(), out);
}

void eval_transform_u8(const Image& img, const EvalTransformOptions& o, uint8_t* out, AugmentScratch* scratch) {
  resize_u8(img, eval_resize_geometry(img.width, img.height, o), o.size, o.filter, out, scratch);
}

// RandAugment as timm defines it (auto_augment.py, e.g. "rand-m9-mstd0.5-inc1", the DeiT / PyLO recipe),
// on the 8-bit crop after RandomResizedCrop and the flip, before normalisation.
//
// Per image: num_ops ops chosen uniformly with replacement from timm's 15 (the order of RaOp). Each is
// applied with probability prob; its magnitude is m + mstd * N(0, 1) (uniform in [0, m] for mstd > 100),
// clipped to [0, mmax], and turned into the op's argument by timm's level functions (level = magnitude / 10):
//   Rotate            angle = 30 level degrees, sign random         ShearX/Y   factor = 0.3 level, sign random
//   TranslateX/YRel   pct = 0.45 level of the width/height, sign random
//   Posterize         bits kept = 4 - floor(4 level) (inc1) | floor(4 level)
//   Solarize          threshold = 256 - floor(256 level) (inc1) | floor(256 level)
//   SolarizeAdd       add = floor(110 level) to pixels < 128
//   Color, Contrast, Brightness, Sharpness   factor = max(0.1, 1 +- 0.9 level) (inc1) | 1.8 level + 0.1
//   AutoContrast, Equalize, Invert           no argument
// The ops are Pillow's (ImageOps, ImageEnhance, Image.transform), per channel on 8-bit values:
//   enhance: blend(degenerate, img, f) = d + f (x - d), clipped to [0, 255] and truncated, where d is gray
//     (Color: Pillow's luma (19595 R + 38470 G + 7471 B + 2^15) >> 16), the mean luma rounded (Contrast),
//     black (Brightness), or the 3x3 SMOOTH filter (1 1 1 / 1 5 1 / 1 1 1) / 13 rounded, borders kept (Sharpness);
//   geometry: output pixel (x, y) samples the input at A (x + 0.5, y + 0.5) with A the inverse affine map
//     (Rotate: counter-clockwise about (w/2, h/2)), bilinearly between the clamped neighbours at that
//     point - 0.5, truncated; points outside the image get `fill` (timm: the mean, 124 116 104).
// Geometric ops use bilinear sampling always (timm with --train-interpolation random picks bilinear or
// bicubic per op). With one channel, Color does nothing and `fill[0]` is the fill.
#pragma once
#include <cstdint>
#include <string>

#include "data/image.h"
#include "data/rng.h"

// The defaults are the DeiT recipe's rand-m9-mstd0.5-inc1.
struct RandAugmentOptions {
  int num_ops = 2;                                                    // "n"
  double magnitude = 9.0, magnitude_std = 0.5, magnitude_max = 10.0;  // "m", "mstd", "mmax"
  double prob = 0.5;                                                  // "p"
  bool increasing = true;                                             // "inc"
  double translate_pct = 0.45;
  uint8_t fill[3] = {124, 116, 104};  // round(255 * ImageNet mean)
};

// timm's config string, "rand-m9-mstd0.5-inc1" (keys m, n, mstd, mmax, p, inc; a key not given takes
// timm's default: m10, n2, mstd0, mmax10, p0.5, inc0); UserError otherwise.
RandAugmentOptions parse_randaugment(const std::string& spec);

enum class RaOp {
  kAutoContrast,
  kEqualize,
  kInvert,
  kRotate,
  kPosterize,
  kSolarize,
  kSolarizeAdd,
  kColor,
  kContrast,
  kBrightness,
  kSharpness,
  kShearX,
  kShearY,
  kTranslateX,
  kTranslateY,
  kCount
};

// The op's argument for a magnitude (timm's level function; draws the random sign where there is one).
double ra_argument(RaOp op, double magnitude, const RandAugmentOptions& o, Rng& rng);
// Applies one op with its argument (angle, factor, bits, threshold, translation fraction, ...).
void ra_apply(RaOp op, double arg, const uint8_t fill[3], Image* img);
// The whole RandAugment step, drawing from rng: the ops, then per op its coin, magnitude and sign.
void rand_augment(const RandAugmentOptions& o, Rng& rng, Image* img);

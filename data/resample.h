// Separable resampling with an antialiasing filter, as Pillow's Image.resize (and torchvision's resize with
// antialias=True, which copies Pillow's weights) computes it.
//
// Along one axis, a box of `in_len` source pixels maps to `out_len` output pixels; scale = in_len / out_len.
// Output pixel o is centred at source position c = (o + 0.5) * scale (relative to the box). The filter is
// stretched by s = max(scale, 1), so downscaling averages over every source pixel it covers instead of
// sampling two of them (no aliasing), and its support is r = filter_support * s. The taps are the source
// pixels i in [trunc(c - r + 0.5), trunc(c + r + 0.5)) clipped to the box, each weighted by
// filter((i - c + 0.5) / s), and the weights are normalised to sum to 1. Pixels outside the box never
// contribute (Pillow's resize of a cropped image; torchvision crops, then resizes).
//   bilinear: the triangle filter max(0, 1 - |x|), support 1 (PIL.Image.BILINEAR).
//   bicubic:  Keys' cubic with a = -0.5, support 2 (PIL.Image.BICUBIC); results are clamped to [0, 255].
//
// The horizontal pass runs first, then the vertical one, both in float; the output is float in [0, 255],
// not rounded to 8 bits as Pillow's is (so values differ from Pillow's by at most about one 8-bit step).
// At scale 1 each output pixel has weight 1 on its own source pixel: an identity resize is exact.
#pragma once
#include <vector>

#include "data/image.h"

enum class Filter { kBilinear, kBicubic };

// A rectangle of source pixels: columns [x, x + w), rows [y, y + h).
struct Box {
  int x = 0, y = 0, w = 0, h = 0;
  bool operator==(const Box& o) const { return x == o.x && y == o.y && w == o.w && h == o.h; }
};

// A resize with a crop on both sides: `box` of the source resampled to a virtual out_w x out_h image, of
// which the size x size window at (out_x, out_y) is kept, mirrored left to right if `flip` (the train and
// eval transforms' geometry, data/augment.h).
struct ResizeGeometry {
  Box box;
  int out_w = 0, out_h = 0, out_x = 0, out_y = 0;
  bool flip = false;
};

// The taps of output pixels [out_first, out_first + out_count) of an axis resized from in_len to out_len:
// pixel k reads source pixels first[k] .. first[k] + count[k] - 1 (relative to the box) with weights
// weight[k * taps + j].
struct AxisTaps {
  int taps = 0;
  std::vector<int> first, count;
  std::vector<float> weight;
};
AxisTaps axis_taps(Filter filter, int in_len, int out_len, int out_first, int out_count);

// Reusable buffers of one worker thread (resampling allocates nothing once they have grown).
struct ResampleScratch {
  AxisTaps x, y;
  std::vector<float> rows;  // the horizontal pass's output
};

// Resizes `box` of `src` to a virtual out_w x out_h image and writes its window of out_count_x x out_count_y
// pixels starting at (out_x, out_y) to `out`: float (out_count_y, out_count_x, channels) in [0, 255].
// A crop of the resized image costs only the pixels kept (the eval transform's resize + center crop).
void resample(const Image& src, Box box, int out_w, int out_h, int out_x, int out_y, int out_count_x, int out_count_y,
              Filter filter, float* out, ResampleScratch* scratch);

// The whole box to out_w x out_h.
inline void resample(const Image& src, Box box, int out_w, int out_h, Filter filter, float* out,
                     ResampleScratch* scratch) {
  resample(src, box, out_w, out_h, 0, 0, out_w, out_h, filter, out, scratch);
}

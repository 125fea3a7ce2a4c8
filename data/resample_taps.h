// One output pixel of a resize on its own, for a GPU thread per pixel (data/gpu_resize.cu): its taps along
// each axis (what data/resample.cpp's fill_taps computes for a whole axis at once: the same double expressions
// in the same order, so the same float weights), then the horizontal sums of the rows it reads and their
// vertical sum in float, in resample()'s order, the clamp and the rounding of augment's resize_u8. Where
// neither side contracts a * b + c into an FMA (x86-64 without -mfma; nvcc -fmad=false) the bytes are
// resize_u8's: tests/cpu/test_resample.cpp checks the taps and the pixels on the CPU.
#pragma once
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "data/resample.h"

#ifdef __CUDACC__
#define RESAMPLE_HD __host__ __device__
#else
#define RESAMPLE_HD
#endif

// Pillow's filters (data/resample.h): the triangle (bilinear) or Keys' cubic with a = -0.5 (bicubic).
RESAMPLE_HD inline double resample_filter(bool bicubic, double x) {
  x = x < 0.0 ? -x : x;
  if (!bicubic) return x < 1.0 ? 1.0 - x : 0.0;
  constexpr double a = -0.5;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

// Output pixel `index` of an axis resized from in_len to out_len reads source pixels [first, first + count)
// (relative to the box) with weights tap_weight(t, 0 .. count - 1).
struct TapWindow {
  int first = 0, count = 0;
  double center = 0.0, inv_stretch = 0.0, sum = 0.0;
  bool bicubic = false;
};

RESAMPLE_HD inline TapWindow tap_window(bool bicubic, int in_len, int out_len, int index) {
  TapWindow t;
  t.bicubic = bicubic;
  const double scale = double(in_len) / out_len, stretch = scale > 1.0 ? scale : 1.0;
  t.inv_stretch = 1.0 / stretch;
  const double support = (bicubic ? 2.0 : 1.0) * stretch;  // the filter's support widens with the scale
  t.center = (index + 0.5) * scale;
  const int lo = int(t.center - support + 0.5), hi = int(t.center + support + 0.5);  // trunc, then clip
  t.first = lo > 0 ? lo : 0;
  t.count = (hi < in_len ? hi : in_len) - t.first;
  for (int i = t.first; i < t.first + t.count; i++)
    t.sum += resample_filter(bicubic, (i - t.center + 0.5) * t.inv_stretch);
  return t;
}

RESAMPLE_HD inline float tap_weight(const TapWindow& t, int j) {
  const int i = t.first + j;
  return float(t.sum != 0.0 ? resample_filter(t.bicubic, (i - t.center + 0.5) * t.inv_stretch) / t.sum : 0.0);
}

// Output pixel (x, y) of the size x size window of `g` applied to `src` (rows of `pitch` bytes, C channels
// interleaved), into out[0 .. C).
template <int C>
RESAMPLE_HD inline void resize_pixel(const uint8_t* src, size_t pitch, const ResizeGeometry& g, bool bicubic, int size,
                                     int x, int y, uint8_t* out) {
  const int col = g.flip ? size - 1 - x : x;  // the column of the unmirrored window it shows
  const TapWindow tx = tap_window(bicubic, g.box.w, g.out_w, g.out_x + col);
  const TapWindow ty = tap_window(bicubic, g.box.h, g.out_h, g.out_y + y);
  float acc[C] = {};
  for (int r = 0; r < ty.count; r++) {
    const uint8_t* px = src + size_t(g.box.y + ty.first + r) * pitch + size_t(g.box.x + tx.first) * C;
    float row[C] = {};  // the horizontal pass at this source row
    for (int i = 0; i < tx.count; i++) {
      const float w = tap_weight(tx, i);
      for (int c = 0; c < C; c++) row[c] += w * float(px[i * C + c]);
    }
    const float w = tap_weight(ty, r);
    for (int c = 0; c < C; c++) acc[c] += w * row[c];
  }
  for (int c = 0; c < C; c++) out[c] = uint8_t(lroundf(fminf(255.0f, fmaxf(0.0f, acc[c]))));
}

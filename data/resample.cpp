#include "data/resample.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace {
double triangle(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Keys' cubic convolution kernel with a = -0.5 (Pillow's BICUBIC).
double keys_cubic(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

void fill_taps(Filter filter, int in_len, int out_len, int out_first, int out_count, AxisTaps* t) {
  CHECK(in_len > 0 && out_len > 0 && out_first >= 0 && out_count > 0 && out_first + out_count <= out_len);
  double (*f)(double) = filter == Filter::kBilinear ? triangle : keys_cubic;
  const double scale = double(in_len) / out_len, stretch = std::max(scale, 1.0), inv_stretch = 1.0 / stretch;
  const double support = (filter == Filter::kBilinear ? 1.0 : 2.0) * stretch;
  t->taps = int(std::ceil(support)) * 2 + 1;
  t->first.resize(size_t(out_count));
  t->count.resize(size_t(out_count));
  t->weight.assign(size_t(out_count) * size_t(t->taps), 0.0f);
  for (int k = 0; k < out_count; k++) {
    const double center = (out_first + k + 0.5) * scale;
    // trunc, then clip: Pillow's (int) casts (the same as floor wherever the clip does not apply).
    const int lo = std::max(int(center - support + 0.5), 0), hi = std::min(int(center + support + 0.5), in_len);
    double sum = 0.0;
    for (int i = lo; i < hi; i++) sum += f((i - center + 0.5) * inv_stretch);
    float* out = &t->weight[size_t(k) * size_t(t->taps)];
    for (int i = lo; i < hi; i++) out[i - lo] = float(sum != 0.0 ? f((i - center + 0.5) * inv_stretch) / sum : 0.0);
    t->first[size_t(k)] = lo;
    t->count[size_t(k)] = hi - lo;
  }
}

// One row of the horizontal pass: `in` is the box's first pixel in a source row, `out` n pixels.
template <int C>
void horizontal_row(const uint8_t* in, const AxisTaps& t, int n, float* out) {
  for (int k = 0; k < n; k++) {
    const float* w = &t.weight[size_t(k) * size_t(t.taps)];
    const uint8_t* p = in + size_t(t.first[size_t(k)]) * C;
    float acc[C] = {};
    for (int j = 0; j < t.count[size_t(k)]; j++)
      for (int c = 0; c < C; c++) acc[c] += w[j] * float(p[j * C + c]);
    for (int c = 0; c < C; c++) out[k * C + c] = acc[c];
  }
}
}  // namespace

AxisTaps axis_taps(Filter filter, int in_len, int out_len, int out_first, int out_count) {
  AxisTaps t;
  fill_taps(filter, in_len, out_len, out_first, out_count, &t);
  return t;
}

void resample(const Image& src, Box box, int out_w, int out_h, int out_x, int out_y, int out_count_x, int out_count_y,
              Filter filter, float* out, ResampleScratch* scratch) {
  CHECK(src.channels == 1 || src.channels == 3);
  CHECK(box.x >= 0 && box.y >= 0 && box.w > 0 && box.h > 0 && box.x + box.w <= src.width &&
        box.y + box.h <= src.height);
  ResampleScratch local;
  ResampleScratch& s = scratch ? *scratch : local;
  fill_taps(filter, box.w, out_w, out_x, out_count_x, &s.x);
  fill_taps(filter, box.h, out_h, out_y, out_count_y, &s.y);
  // Horizontal pass over only the box rows the vertical taps read: rows [r0, r1) of the box.
  const int C = src.channels, row_len = out_count_x * C;
  const int r0 = s.y.first.front(), r1 = s.y.first.back() + s.y.count.back();
  s.rows.resize(size_t(r1 - r0) * size_t(row_len));
  for (int r = r0; r < r1; r++) {
    const uint8_t* in = &src.pixels[(size_t(box.y + r) * size_t(src.width) + size_t(box.x)) * size_t(C)];
    float* row = &s.rows[size_t(r - r0) * size_t(row_len)];
    if (C == 3)
      horizontal_row<3>(in, s.x, out_count_x, row);
    else
      horizontal_row<1>(in, s.x, out_count_x, row);
  }
  // Vertical pass: each output row is a weighted sum of whole intermediate rows (vectorises).
  const bool clamp = filter == Filter::kBicubic;  // the cubic's negative lobes overshoot near edges
  for (int k = 0; k < out_count_y; k++) {
    float* o = out + size_t(k) * size_t(row_len);
    std::fill(o, o + row_len, 0.0f);
    const float* w = &s.y.weight[size_t(k) * size_t(s.y.taps)];
    for (int j = 0; j < s.y.count[size_t(k)]; j++) {
      const float* row = &s.rows[size_t(s.y.first[size_t(k)] + j - r0) * size_t(row_len)];
      for (int i = 0; i < row_len; i++) o[i] += w[j] * row[i];
    }
    if (clamp)
      for (int i = 0; i < row_len; i++) o[i] = std::min(std::max(o[i], 0.0f), 255.0f);
  }
}

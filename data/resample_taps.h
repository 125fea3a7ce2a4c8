// One output pixel's taps along one axis, on its own: what data/resample.cpp's fill_taps computes for a whole
// axis at once, for a GPU thread that resamples one pixel (data/gpu_resize.cu). The same double expressions in
// the same order give the same float weights as axis_taps() where neither side contracts a * b + c into an FMA
// (x86-64 without -mfma; nvcc -fmad=false): tests/cpu/test_resample.cpp checks that they agree.
#pragma once

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

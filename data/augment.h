// Per-image transforms of timm's ImageNet recipe, from a decoded 8-bit image to the model's input,
// (channels, size, size) floats normalised by mean and std:
//
//   train: RandomResizedCrop(size, scale, ratio) -> RandomHorizontalFlip(p) [-> RandAugment] -> ToTensor
//          -> Normalize   (with RandAugment the crop is rounded to 8 bits first, as Pillow's is)
//   eval:  Resize(floor(size / crop_pct)) -> CenterCrop(size) -> ToTensor -> Normalize
//
// with the geometry exactly as torchvision and timm define it (see each function) and the resampler of
// data/resample.h (Pillow's antialiased bilinear or bicubic, computed in float). The channel count is the
// decoded image's: 3 (RGB) or 1 (gray, e.g. Fashion-MNIST with in_chans 1); decode with the model's
// in_chans (stb replicates gray to RGB, or takes the luma of colour).
#pragma once
#include <vector>

#include "data/image.h"
#include "data/randaugment.h"
#include "data/resample.h"
#include "data/rng.h"

// Python's round(): to the nearest integer, ties to even (round(58.5) = 58, round(13.5) = 14).
int round_half_even(double x);

struct RrcOptions {
  double scale_min = 0.08, scale_max = 1.0;             // crop area / image area
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;  // crop width / height, sampled log-uniformly
};

// torchvision's RandomResizedCrop.get_params on a width x height image. Up to 10 attempts draw
// area = W*H * U(scale_min, scale_max) and ratio = exp(U(log ratio_min, log ratio_max)), take
// w = round(sqrt(area * ratio)), h = round(sqrt(area / ratio)), and accept the first with 0 < w <= W and
// 0 < h <= H, placed at y ~ U{0..H-h}, then x ~ U{0..W-w}. Otherwise (very wide or tall images) the
// fallback is the largest centred crop whose ratio is clamped to [ratio_min, ratio_max]:
// x = (W - w) / 2, y = (H - h) / 2 rounded down. `fallback` (if given) tells which case it was.
Box sample_rrc_box(int width, int height, const RrcOptions& o, Rng& rng, bool* fallback = nullptr);

// timm's eval geometry: the shorter side resized to S = floor(size / crop_pct) (224 / 0.875 = 256), the
// longer to floor(S * long / short) (torchvision's Resize(int)); then a size x size crop at
// (round((resize_w - size) / 2), round((resize_h - size) / 2)) with Python's round (torchvision's CenterCrop).
struct EvalGeometry {
  int resize_w = 0, resize_h = 0;
  Box crop;  // in the resized image
};
EvalGeometry eval_geometry(int width, int height, int size, double crop_pct);

struct Normalize {
  float mean[3] = {0.485f, 0.456f, 0.406f};  // ImageNet's, per channel (channel 0 only for gray images)
  float std[3] = {0.229f, 0.224f, 0.225f};
};

// (h, w, c) floats in [0, 255] to (c, h, w) floats (v / 255 - mean) / std, mirrored left to right if `flip`.
void normalize_to_chw(const float* hwc, int w, int h, int c, bool flip, const Normalize& norm, float* chw);

struct TrainTransformOptions {
  int size = 224;
  RrcOptions rrc;
  double hflip = 0.5;  // probability of a horizontal flip
  Filter filter = Filter::kBilinear;
  Normalize norm;
  bool use_randaugment = false;  // timm's --aa rand-...: see data/randaugment.h
  RandAugmentOptions randaugment;
};
struct EvalTransformOptions {
  int size = 224;
  double crop_pct = 0.875;
  Filter filter = Filter::kBilinear;
  Normalize norm;
};
// UserError naming the bad option (sizes, probabilities, ranges) and what is allowed.
void check_options(const TrainTransformOptions& o);
void check_options(const EvalTransformOptions& o);

// What the transforms do geometrically (data/resample.h's ResizeGeometry): the train transform draws the
// box and the flip (sample_rrc_box, then the flip); the eval one has none (resize + centre crop). A decoder
// on the GPU (data/nvjpeg_decoder) takes the same geometry, drawn on the CPU.
ResizeGeometry train_geometry(int width, int height, const TrainTransformOptions& o, Rng& rng);
ResizeGeometry eval_resize_geometry(int width, int height, const EvalTransformOptions& o);

// Buffers one worker thread reuses from image to image.
struct AugmentScratch {
  ResampleScratch resample;
  std::vector<float> hwc;
  Image crop;  // the 8-bit crop RandAugment works on
};

// `out`: (img.channels, size, size). Draws from `rng` in timm's order: the crop box, the flip, RandAugment.
void train_transform(const Image& img, const TrainTransformOptions& o, Rng& rng, float* out, AugmentScratch* scratch);
void eval_transform(const Image& img, const EvalTransformOptions& o, float* out, AugmentScratch* scratch);
// The same transforms up to the normalisation, into 8-bit (size, size, img.channels) pixels rounded to
// nearest, as Pillow's resize gives them (train_vit normalises on the GPU). The same draws as above.
void train_transform_u8(const Image& img, const TrainTransformOptions& o, Rng& rng, uint8_t* out,
                        AugmentScratch* scratch);
void eval_transform_u8(const Image& img, const EvalTransformOptions& o, uint8_t* out, AugmentScratch* scratch);
// Their resampling step alone: `g` applied to img, rounded to bytes (size, size, img.channels).
void resize_u8(const Image& img, const ResizeGeometry& g, int size, Filter filter, uint8_t* out,
               AugmentScratch* scratch);

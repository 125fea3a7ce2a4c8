// A batch's mixup or cutmix draw: the batch mixed with itself reversed (sample i with sample B-1-i), as
// timm's Mixup does in its 'batch' mode. The data loader draws it (data/image_loader), the patch kernel
// applies it to the normalised pixels (kernels/patch_embed), the model carries it in its Batch: a plain
// struct at the bottom layer, so that none of them includes another's header.
#pragma once
#include <cstdint>

struct ImageMix {
  enum Mode : int32_t { kNone = 0, kMixup = 1, kCutmix = 2 };
  Mode mode = kNone;
  float lambda = 1.0f;                     // mixup: the weight of a sample's own image
  int32_t y0 = 0, y1 = 0, x0 = 0, x1 = 0;  // cutmix: pixels in [y0, y1) x [x0, x1) come from the partner
};

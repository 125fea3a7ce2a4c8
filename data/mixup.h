// Mixup and CutMix with label smoothing, as timm's Mixup in 'batch' mode: one draw per batch, sample i
// mixed with sample B-1-i (the batch flipped), soft targets (B, classes).
//
// Per batch: with probability `prob` the batch is mixed; then, when both alphas are positive, CutMix with
// probability `switch_prob`, else Mixup (only one positive alpha: that one); lambda ~ Beta(alpha, alpha).
//   Mixup:  x_i <- lambda * x_i + (1 - lambda) * x_{B-1-i}
//   CutMix: a box of cut = (floor(H * sqrt(1 - lambda)), floor(W * sqrt(1 - lambda))) centred at
//           cy ~ U{0..H-1}, cx ~ U{0..W-1} (drawn in that order), [cy - cut_h/2, cy + cut_h/2) and
//           likewise in x, clipped to the image, is copied from x_{B-1-i} into x_i; with correct_lam,
//           lambda becomes 1 - box area / image area (what is actually left of x_i).
// Targets: y_i = lambda * smooth(label_i) + (1 - lambda) * smooth(label_{B-1-i}), where smooth() is the
// one-hot vector with 1 - s + s/K on the label and s/K elsewhere (s = label_smoothing, K classes).
// An odd batch's middle sample is paired with itself (unchanged; timm refuses odd batches).
#pragma once
#include <cstdint>

#include "data/rng.h"

struct MixupOptions {
  double mixup_alpha = 0.8, cutmix_alpha = 1.0;  // 0 turns one off
  double prob = 1.0;                             // chance that a batch is mixed at all
  double switch_prob = 0.5;                      // chance of CutMix rather than Mixup when both are on
  double label_smoothing = 0.1;
  bool correct_lam = true;  // CutMix's lambda from the clipped box's area
};
void check_options(const MixupOptions& o);  // UserError naming the bad option

// What one batch got: lambda = 1 means unmixed (then only label smoothing applies).
struct MixDraw {
  bool cutmix = false;
  double lambda = 1.0;
  int y0 = 0, y1 = 0, x0 = 0, x1 = 0;  // CutMix's box: rows [y0, y1), columns [x0, x1)
};

// The draws for one batch of H x W images, in timm's order (mix?, cutmix?, lambda, cy, cx).
MixDraw draw_mix(const MixupOptions& o, int H, int W, Rng& rng);
// Mixes images (B, C, H, W) in place as `d` says.
void apply_mix(const MixDraw& d, float* images, int B, int C, int H, int W);
// soft_targets (B, classes) from the labels, lambda and label smoothing.
void mix_targets(const int32_t* labels, int B, int classes, double lambda, double label_smoothing, float* soft_targets);

// All three: draw, mix the images, write the targets; returns the draw.
MixDraw mixup_batch(const MixupOptions& o, float* images, const int32_t* labels, int B, int C, int H, int W,
                    int classes, float* soft_targets, Rng& rng);

#include "data/mixup.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/error.h"

void check_options(const MixupOptions& o) {
  if (!(o.mixup_alpha >= 0.0 && o.cutmix_alpha >= 0.0 && std::isfinite(o.mixup_alpha) && std::isfinite(o.cutmix_alpha)))
    user_error("mixup alpha ", o.mixup_alpha, " and cutmix alpha ", o.cutmix_alpha,
               " must be >= 0 (0 turns one off; timm's recipe uses 0.8 and 1.0).");
  if (!(o.prob >= 0.0 && o.prob <= 1.0 && o.switch_prob >= 0.0 && o.switch_prob <= 1.0))
    user_error("mixup probability ", o.prob, " and switch probability ", o.switch_prob, " must be in [0, 1].");
  if (!(o.label_smoothing >= 0.0 && o.label_smoothing < 1.0))
    user_error("label smoothing ", o.label_smoothing, " must be in [0, 1) (timm's recipe uses 0.1).");
}

MixDraw draw_mix(const MixupOptions& o, int H, int W, Rng& rng) {
  MixDraw d;
  const bool mixup_on = o.mixup_alpha > 0.0, cutmix_on = o.cutmix_alpha > 0.0;
  if ((!mixup_on && !cutmix_on) || !rng.bernoulli(o.prob)) return d;
  d.cutmix = mixup_on && cutmix_on ? rng.bernoulli(o.switch_prob) : cutmix_on;
  const double alpha = d.cutmix ? o.cutmix_alpha : o.mixup_alpha;
  d.lambda = rng.beta(alpha, alpha);
  if (!d.cutmix || d.lambda == 1.0) return d;  // timm returns before drawing a box when lambda is 1
  const double cut = std::sqrt(1.0 - d.lambda);
  const int cut_h = int(H * cut), cut_w = int(W * cut);
  const int cy = int(rng.below(uint32_t(H))), cx = int(rng.below(uint32_t(W)));
  d.y0 = std::clamp(cy - cut_h / 2, 0, H);
  d.y1 = std::clamp(cy + cut_h / 2, 0, H);
  d.x0 = std::clamp(cx - cut_w / 2, 0, W);
  d.x1 = std::clamp(cx + cut_w / 2, 0, W);
  if (o.correct_lam) d.lambda = 1.0 - double(d.y1 - d.y0) * (d.x1 - d.x0) / (double(H) * W);
  return d;
}

void apply_mix(const MixDraw& d, float* images, int B, int C, int H, int W) {
  if (d.lambda == 1.0) return;
  const size_t plane = size_t(H) * size_t(W), image = size_t(C) * plane;
  const float lam = float(d.lambda), rest = float(1.0 - d.lambda);
  // Pairs (i, B-1-i) read each other's original values, so both are updated together.
  for (int i = 0; i < B / 2; i++) {
    float* a = images + size_t(i) * image;
    float* b = images + size_t(B - 1 - i) * image;
    if (!d.cutmix) {
      for (size_t k = 0; k < image; k++) {
        const float va = a[k], vb = b[k];
        a[k] = lam * va + rest * vb;
        b[k] = lam * vb + rest * va;
      }
      continue;
    }
    for (int c = 0; c < C; c++)
      for (int y = d.y0; y < d.y1; y++) {
        const size_t row = size_t(c) * plane + size_t(y) * size_t(W);
        std::swap_ranges(a + row + d.x0, a + row + d.x1, b + row + d.x0);
      }
  }
}

void mix_targets(const int32_t* labels, int B, int classes, double lambda, double label_smoothing,
                 float* soft_targets) {
  const double off = label_smoothing / classes, on = 1.0 - label_smoothing + off;
  for (int i = 0; i < B; i++) {
    const int32_t a = labels[i], b = labels[B - 1 - i];
    CHECK(a >= 0 && a < classes && b >= 0 && b < classes);
    float* row = soft_targets + size_t(i) * size_t(classes);
    std::fill(row, row + classes, float(off));
    row[a] = float(lambda * on + (1.0 - lambda) * off);
    row[b] = float(a == b ? on : (1.0 - lambda) * on + lambda * off);
  }
}

MixDraw mixup_batch(const MixupOptions& o, float* images, const int32_t* labels, int B, int C, int H, int W,
                    int classes, float* soft_targets, Rng& rng) {
  const MixDraw d = draw_mix(o, H, W, rng);
  apply_mix(d, images, B, C, H, W);
  mix_targets(labels, B, classes, d.lambda, o.label_smoothing, soft_targets);
  return d;
}

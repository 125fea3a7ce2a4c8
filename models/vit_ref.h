// CPU reference ViT in double precision: the oracle for a GPU ViT. timm's VisionTransformer with a class
// token, global_pool='token', no dropout and no drop-path:
//   tokens = [cls + pos[0], patch_embed(patch_i) + pos[1 + i]]   (patches in row-major order of the grid)
//   L pre-LN blocks (models/ref_block, VitShape::block(): attention without a mask, erf GELU, eps 1e-6)
//   logits = head(LayerNorm(the cls token's row))                (LayerNorm eps 1e-6)
//   loss = mean over the batch of the cross-entropy against hard labels or soft targets
// The patch embedding is a convolution with kernel = stride = patch, computed as a matmul of the flattened
// patches (in_chans, p, p) against the weight (C, in_chans, p, p). Parameters and gradients use the arena's
// flat layout (vit_param_table).
#pragma once
#include <cstdint>
#include <vector>

#include "models/model_tables.h"
#include "models/ref_block.h"

// ViT initialisation as its table says (vit_param_table): init_params after checking the table is the
// ViT's. Deterministic in `seed`; fp32 in the arena's layout.
std::vector<float> vit_init(const ParamTable& table, const VitShape& s, uint64_t seed);

class VitRef {
 public:
  VitRef(const VitShape& shape, const ParamTable& table);
  // Mean cross-entropy of a batch of B images (B, in_chans, image, image), normalised, NCHW. Targets: with
  // soft_targets null, `labels` (B class indices); otherwise *soft_targets (B, classes), rows summing to 1
  // (`labels` unused). Keeps what backward needs.
  double forward(const std::vector<double>& params, const std::vector<float>& images, const std::vector<int>& labels,
                 const std::vector<float>* soft_targets, int B);
  // Gradient of the last forward's loss, in the flat layout (padding zero).
  std::vector<double> backward(const std::vector<double>& params);
  const std::vector<double>& logits() const { return logits_; }  // (B, classes) of the last forward
  // (B, tokens, C): the token embeddings block 0 read in the last forward (cls row first).
  const std::vector<double>& embeddings() const { return embeddings_; }

 private:
  void set_targets(const std::vector<int>& labels, const std::vector<float>* soft_targets, int B);
  void patchify(const std::vector<float>& images);
  void embed(const double* P, std::vector<double>* x);
  double head_loss(const double* P, const std::vector<double>& x);
  void embed_backward(const double* P, const std::vector<double>& dx, double* G) const;
  const double* W(const std::vector<double>& P, int i) const { return &P[size_t(t_[i].offset)]; }

  VitShape s_;
  const ParamTable& t_;
  VitTensors ix_;
  std::vector<RefBlock> blocks_;
  int B_ = 0;
  std::vector<double> targets_;  // (B, classes): one-hot rows for hard labels
  std::vector<double> patches_;  // (B * grid^2, patch_dim): each patch flattened as (in_chans, p, p)
  std::vector<double> embeddings_;
  std::vector<RefBlockActs> acts_;  // one per block
  // the cls rows of the final stream (B, C), their LayerNorm and its statistics, the logits and
  // d(loss)/d(logits)
  std::vector<double> cls_x_, cls_ln_, ln_mean_, ln_rstd_, logits_, dlogits_;
};

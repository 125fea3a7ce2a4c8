#include "models/vit_ref.h"

#include <cmath>

#include "common/error.h"
#include "models/ref_ops.h"

std::vector<float> vit_init(const ParamTable& table, const VitShape& s, uint64_t seed) {
  (void)vit_tensors(table, s);  // the table must be the ViT's: its rows carry the initialisation
  return init_params(table, seed);
}

VitRef::VitRef(const VitShape& shape, const ParamTable& table) : s_(shape), t_(table), ix_(vit_tensors(table, shape)) {
  blocks_.reserve(size_t(s_.layers));
  for (int l = 0; l < s_.layers; l++) blocks_.emplace_back(s_.block(), ix_.blocks[size_t(l)], table);  // no dropout
}

// Hard labels become one-hot rows, so that both kinds of target share one loss and one gradient.
void VitRef::set_targets(const std::vector<int>& labels, const std::vector<float>* soft_targets, int B) {
  const int K = s_.classes;
  targets_.assign(size_t(B) * size_t(K), 0.0);
  if (soft_targets) {
    if (soft_targets->size() != targets_.size())
      user_error("expected ", B, " x ", K, " soft targets, got ", soft_targets->size(), ".");
    for (size_t i = 0; i < targets_.size(); i++) targets_[i] = (*soft_targets)[i];
    return;
  }
  if (labels.size() != size_t(B)) user_error("expected ", B, " labels, got ", labels.size(), ".");
  for (int b = 0; b < B; b++) {
    const int y = labels[size_t(b)];
    if (y < 0 || y >= K) user_error("label ", y, " of image ", b, " is outside 0..", K - 1, ".");
    targets_[size_t(b) * size_t(K) + size_t(y)] = 1.0;
  }
}

// patches_ row b grid^2 + gy grid + gx (timm's flatten(2).transpose(1, 2)), column (ic p + ky) p + kx: the
// pixel (ic, gy p + ky, gx p + kx) of image b, the index of the weight it meets in (C, in_chans, p, p).
void VitRef::patchify(const std::vector<float>& images) {
  const int p = s_.patch, g = s_.grid(), S = s_.image, IC = s_.in_chans, PD = s_.patch_dim();
  if (images.size() != size_t(B_) * size_t(IC) * size_t(S) * size_t(S))
    user_error("expected ", B_, " images of ", IC, " x ", S, " x ", S, " values, got ", images.size(), " values.");
  patches_.resize(size_t(B_) * size_t(g * g) * size_t(PD));
  for (int b = 0; b < B_; b++)
    for (int gy = 0; gy < g; gy++)
      for (int gx = 0; gx < g; gx++) {
        double* row = &patches_[(size_t(b) * size_t(g * g) + size_t(gy * g + gx)) * size_t(PD)];
        for (int ic = 0; ic < IC; ic++)
          for (int ky = 0; ky < p; ky++)
            for (int kx = 0; kx < p; kx++)
              row[(ic * p + ky) * p + kx] =
                  images[((size_t(b) * size_t(IC) + size_t(ic)) * size_t(S) + size_t(gy * p + ky)) * size_t(S) +
                         size_t(gx * p + kx)];
      }
}

// x (B, tokens, C): row 0 of each image cls + pos[0], row 1 + i the embedded patch i + pos[1 + i].
void VitRef::embed(const double* P, std::vector<double>* x) {
  const int C = s_.channels, T = s_.tokens(), NP = T - 1;
  std::vector<double> emb(size_t(B_) * size_t(NP) * size_t(C));
  ref_linear(patches_.data(), P + t_[ix_.patchw].offset, P + t_[ix_.patchb].offset, emb.data(), B_ * NP, s_.patch_dim(),
             C);
  const double* cls = P + t_[ix_.cls].offset;
  const double* pos = P + t_[ix_.pos].offset;
  x->resize(size_t(B_) * size_t(T) * size_t(C));
  for (int b = 0; b < B_; b++)
    for (int t = 0; t < T; t++)
      for (int c = 0; c < C; c++) {
        const double tok = t == 0 ? cls[c] : emb[(size_t(b) * size_t(NP) + size_t(t - 1)) * size_t(C) + size_t(c)];
        (*x)[(size_t(b) * size_t(T) + size_t(t)) * size_t(C) + size_t(c)] = tok + pos[t * C + c];
      }
}

// The final LayerNorm and the head on the cls rows of x (B, tokens, C); the mean cross-entropy and its
// gradient with respect to the logits.
double VitRef::head_loss(const double* P, const std::vector<double>& x) {
  const int C = s_.channels, T = s_.tokens(), K = s_.classes;
  cls_x_.resize(size_t(B_) * size_t(C));
  for (int b = 0; b < B_; b++)
    for (int c = 0; c < C; c++) cls_x_[size_t(b * C + c)] = x[size_t(b) * size_t(T) * size_t(C) + size_t(c)];
  cls_ln_.resize(cls_x_.size());
  ln_mean_.resize(size_t(B_));
  ln_rstd_.resize(size_t(B_));
  // Only the cls rows are normalised: the other rows never reach the head (timm normalises all of them).
  ref_layernorm(cls_x_.data(), P + t_[ix_.normw].offset, P + t_[ix_.normb].offset, cls_ln_.data(), ln_mean_.data(),
                ln_rstd_.data(), B_, C, s_.block().ln_eps);
  logits_.resize(size_t(B_) * size_t(K));
  ref_linear(cls_ln_.data(), P + t_[ix_.headw].offset, P + t_[ix_.headb].offset, logits_.data(), B_, C, K);
  dlogits_.resize(logits_.size());
  double loss = 0;
  for (int b = 0; b < B_; b++) {
    const size_t r = size_t(b) * size_t(K);
    loss += ref_crossentropy_soft(&logits_[r], &targets_[r], &dlogits_[r], K);
  }
  for (double& g : dlogits_) g /= B_;
  return loss / B_;
}

double VitRef::forward(const std::vector<double>& P, const std::vector<float>& images, const std::vector<int>& labels,
                       const std::vector<float>* soft_targets, int B) {
  CHECK(P.size() == size_t(t_.total_elems()));
  B_ = B;
  set_targets(labels, soft_targets, B);
  patchify(images);
  std::vector<double> x;
  embed(P.data(), &x);
  embeddings_ = x;
  acts_.assign(size_t(s_.layers), RefBlockActs{});
  for (int l = 0; l < s_.layers; l++)
    blocks_[size_t(l)].forward(P.data(), RefDropout{}, B, s_.tokens(), x.data(), &acts_[size_t(l)]);
  return head_loss(P.data(), x);
}

std::vector<double> VitRef::backward(const std::vector<double>& P) {
  const int C = s_.channels, T = s_.tokens(), K = s_.classes;
  std::vector<double> G(P.size(), 0.0);
  auto D = [&](int i) { return &G[size_t(t_[i].offset)]; };
  std::vector<double> dln(cls_x_.size(), 0.0), dcls(cls_x_.size(), 0.0);
  ref_linear_back(cls_ln_.data(), W(P, ix_.headw), dlogits_.data(), dln.data(), D(ix_.headw), D(ix_.headb), B_, C, K);
  ref_layernorm_back(cls_x_.data(), W(P, ix_.normw), ln_mean_.data(), ln_rstd_.data(), dln.data(), dcls.data(),
                     D(ix_.normw), D(ix_.normb), B_, C);
  std::vector<double> dx(size_t(B_) * size_t(T) * size_t(C), 0.0);  // only the cls rows reach the loss directly
  for (int b = 0; b < B_; b++)
    for (int c = 0; c < C; c++) dx[size_t(b) * size_t(T) * size_t(C) + size_t(c)] = dcls[size_t(b * C + c)];
  for (int l = s_.layers - 1; l >= 0; l--)
    blocks_[size_t(l)].backward(P.data(), RefDropout{}, acts_[size_t(l)], dx.data(), G.data());
  embed_backward(P.data(), dx, G.data());
  return G;
}

// d(tokens) (B, tokens, C) into the cls token, the position embeddings and the patch embedding.
void VitRef::embed_backward(const double* P, const std::vector<double>& dx, double* G) const {
  const int C = s_.channels, T = s_.tokens(), NP = T - 1;
  double* dcls = G + t_[ix_.cls].offset;
  double* dpos = G + t_[ix_.pos].offset;
  std::vector<double> demb(size_t(B_) * size_t(NP) * size_t(C));
  for (int b = 0; b < B_; b++)
    for (int t = 0; t < T; t++)
      for (int c = 0; c < C; c++) {
        const double g = dx[(size_t(b) * size_t(T) + size_t(t)) * size_t(C) + size_t(c)];
        dpos[t * C + c] += g;
        if (t == 0) dcls[c] += g;
        if (t > 0) demb[(size_t(b) * size_t(NP) + size_t(t - 1)) * size_t(C) + size_t(c)] = g;
      }
  std::vector<double> dpatches(patches_.size(), 0.0);  // the images' gradient: computed, not needed
  const int64_t w = t_[ix_.patchw].offset, b = t_[ix_.patchb].offset;
  ref_linear_back(patches_.data(), P + w, demb.data(), dpatches.data(), G + w, G + b, B_ * NP, s_.patch_dim(), C);
}

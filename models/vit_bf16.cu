#include <algorithm>

#include "common/cuda_check.h"
#include "kernels/column_sums.h"
#include "kernels/crossentropy.h"
#include "kernels/layernorm.h"
#include "kernels/reduce.h"
#include "models/vit_bf16.h"

VitBf16::VitBf16(const VitShape& shape, Arena& arena, int B, const ImageNorm& norm, Attention attention)
    : s_(shape),
      geom_{B, shape.image, shape.image, shape.in_chans, shape.patch},
      B_(B),
      T_(shape.tokens()),
      P_(shape.tokens() - 1),
      K_(shape.patch_dim()),
      Cp_((shape.classes + 7) / 8 * 8),
      ctx_(shape.block(), arena, dropout_, B, shape.tokens(), attention) {
  if (B < 1) user_error("the batch size must be at least 1 (got ", B, ").");
  if (s_.in_chans > 3) user_error("images must have 1 to 3 channels (got ", s_.in_chans, ").");
  for (int c = 0; c < 3; c++) {
    norm_.mean[c] = norm.mean[c];
    norm_.inv_std[c] = 1.0f / norm.std[c];
  }
  const ParamTable& t = arena.table();
  const VitTensors ix = vit_tensors(t, s_);
  cls_ = t[ix.cls].offset;
  pos_ = t[ix.pos].offset;
  patchw_ = t[ix.patchw].offset;
  patchb_ = t[ix.patchb].offset;
  normw_ = t[ix.normw].offset;
  normb_ = t[ix.normb].offset;
  headw_ = t[ix.headw].offset;
  headb_ = t[ix.headb].offset;
  const uint32_t none = 0;  // ViT runs without dropout: the sites are never drawn
  blocks_.reserve(size_t(s_.layers));
  for (int l = 0; l < s_.layers; l++)
    blocks_.emplace_back(s_.block(), ix.blocks[size_t(l)], t, BlockSites{none, none, none}, B, T_);
  // N = B*T token rows (T = 1 + P: the cls token, then P patches), BP = B*P patch rows, K = in_chans*p*p
  // values per patch. Buffers: the residual stream entering each block and the final norm ((N, C) each),
  // the batch as uploaded, patches (BP, K), their projections (BP, C), the cls rows and their LayerNorm
  // (B, C), logits (B, Cp: classes padded to a multiple of 8 for the matmul).
  const size_t N = size_t(B) * size_t(T_), C = size_t(s_.channels), BP = size_t(B) * size_t(P_);
  const char* act = "activations";
  stream_.resize(size_t(s_.layers) + 1);
  for (auto& x : stream_) x.alloc(N * C, act);
  pixels_.alloc(size_t(B) * size_t(s_.image) * size_t(s_.image) * size_t(s_.in_chans), "pixels");
  labels_.alloc(size_t(B), "labels");
  soft_.alloc(size_t(B) * size_t(s_.classes), "soft targets");
  mix_.alloc(1, "mix");
  patches_.alloc(BP * size_t(K_), act);
  proj_.alloc(BP * C, act);  // the patch projections; in backward their gradient
  cls_rows_.alloc(size_t(B) * C, act);
  lnf_.alloc(size_t(B) * C, act);
  lnf_mean_.alloc(size_t(B), act);
  lnf_rstd_.alloc(size_t(B), act);
  logits_.alloc(size_t(B) * size_t(Cp_), "logits");
  losses_.alloc(size_t(B), "losses");
  loss_mean_.alloc(1, "loss");
  dres_.alloc(N * C, "activation gradients");
  dcls_.alloc(size_t(B) * C, "activation gradients");
  head_scratch_.alloc(column_sums_scratch_floats(std::max(s_.channels, (Cp_ + 3) / 4)), "scratch");
}

void VitBf16::set_batch(const Batch& b, cudaStream_t s) {
  CHECK(b.pixels && !b.tokens);
  CUDA_CHECK(cudaMemcpyAsync(pixels_.get(), b.pixels, pixels_.bytes(), cudaMemcpyHostToDevice, s));
  soft_on_ = b.soft_targets != nullptr;
  if (soft_on_) CUDA_CHECK(cudaMemcpyAsync(soft_.get(), b.soft_targets, soft_.bytes(), cudaMemcpyHostToDevice, s));
  if (b.targets) CUDA_CHECK(cudaMemcpyAsync(labels_.get(), b.targets, labels_.bytes(), cudaMemcpyHostToDevice, s));
  if (b.mix)
    CUDA_CHECK(cudaMemcpyAsync(mix_.get(), b.mix, sizeof(ImageMix), cudaMemcpyHostToDevice, s));
  else
    CUDA_CHECK(cudaMemsetAsync(mix_.get(), 0, sizeof(ImageMix), s));  // mode kNone
}

// Pixels -> normalised, mixed patch rows (BP, K) -> one matmul to (BP, C) (the stride-p convolution) ->
// tokens (B, T, C) with the cls token and position embeddings -> the blocks -> LN of the cls rows -> head.
void VitBf16::forward(cudaStream_t s) {
  const int C = s_.channels, BP = B_ * P_;
  ctx_.prof.begin(s);
  image_patches(patches_.get(), pixels_.get(), geom_, norm_, mix_.get(), s);
  ctx_.mm.forward(proj_.get(), C, patches_.get(), K_, ctx_.W(patchw_), ctx_.W(patchb_), BP, K_, C, s);
  tokens_forward(stream_[0].get(), proj_.get(), ctx_.W(cls_), ctx_.W(pos_), B_, P_, C, s);
  ctx_.prof.mark("fwd patch embedding", s);
  for (size_t l = 0; l < blocks_.size(); l++) blocks_[l].forward(stream_[l + 1].get(), stream_[l].get(), ctx_, s);
  // Only the cls token reaches the head: normalise just its rows (timm normalises every token, then keeps
  // the cls token's; the other rows' values never matter).
  const size_t row = size_t(C) * sizeof(bf16);
  CUDA_CHECK(cudaMemcpy2DAsync(cls_rows_.get(), row, stream_.back().get(), row * size_t(T_), row, size_t(B_),
                               cudaMemcpyDeviceToDevice, s));
  layernorm_forward(lnf_.get(), lnf_mean_.get(), lnf_rstd_.get(), cls_rows_.get(), ctx_.W(normw_), ctx_.W(normb_), B_,
                    C, s_.block().ln_eps, s);
  ctx_.mm.forward(logits_.get(), Cp_, lnf_.get(), C, ctx_.W(headw_), ctx_.W(headb_), B_, C, s_.classes, s);
  ctx_.prof.mark("fwd head", s);
}

// Cross-entropy against labels or soft targets (mixup, cutmix, label smoothing); mean over the B images.
void VitBf16::loss_and_dlogits(float grad_scale, cudaStream_t s) {
  const float scale = grad_scale / float(B_);
  if (soft_on_)
    crossentropy_soft_forward_backward(logits_.get(), Cp_, losses_.get(), soft_.get(), B_, s_.classes, scale, s);
  else
    crossentropy_forward_backward(logits_.get(), Cp_, losses_.get(), labels_.get(), B_, s_.classes, scale, s);
  mean_reduce(loss_mean_.get(), losses_.get(), B_, s);
  ctx_.prof.mark("crossentropy", s);
}

void VitBf16::backward(cudaStream_t s) {
  const int C = s_.channels, BP = B_ * P_;
  bf16* dln = ctx_.dln.get();
  // head; the bias sum runs over the padded width, whose logit gradients are 0 (the arena pads every tensor)
  ctx_.mm.backward_dx(dln, C, false, logits_.get(), Cp_, ctx_.W(headw_), B_, C, s_.classes, s);
  ctx_.mm.backward_dw(ctx_.G(headw_), logits_.get(), Cp_, lnf_.get(), C, B_, C, s_.classes, s);
  bias_backward(ctx_.G(headb_), logits_.get(), Cp_, B_, Cp_, head_scratch_.get(), s);
  // final LayerNorm of the cls rows, whose gradient then enters the stream's cls rows (the rest are 0)
  CUDA_CHECK(cudaMemsetAsync(dcls_.get(), 0, dcls_.bytes(), s));
  float* last_bias = blocks_.empty() ? nullptr : blocks_.back().out_bias_grad(ctx_);
  layernorm_backward(dcls_.get(), ctx_.G(normw_), ctx_.G(normb_), dln, cls_rows_.get(), ctx_.W(normw_), lnf_mean_.get(),
                     lnf_rstd_.get(), B_, C, head_scratch_.get(), s, last_bias);
  CUDA_CHECK(cudaMemsetAsync(dres_.get(), 0, dres_.bytes(), s));
  const size_t row = size_t(C) * sizeof(bf16);
  CUDA_CHECK(
      cudaMemcpy2DAsync(dres_.get(), row * size_t(T_), dcls_.get(), row, row, size_t(B_), cudaMemcpyDeviceToDevice, s));
  ctx_.prof.mark("bwd head", s);
  for (int l = s_.layers - 1; l >= 0; l--) {
    float* in_bias = l > 0 ? blocks_[size_t(l - 1)].out_bias_grad(ctx_) : nullptr;
    blocks_[size_t(l)].backward(dres_.get(), stream_[size_t(l)].get(), in_bias, ctx_, s, [&] { mlp_done(l, s); });
    block_done(l, s);
  }
  // the embedding: cls and position gradients, the patch rows' gradient into proj_, then the projection's
  tokens_backward(ctx_.G(cls_), ctx_.G(pos_), proj_.get(), dres_.get(), B_, P_, C, s);
  ctx_.mm.backward_dw(ctx_.G(patchw_), proj_.get(), C, patches_.get(), K_, BP, K_, C, s);
  bias_backward(ctx_.G(patchb_), proj_.get(), C, BP, C, ctx_.scratch.get(), s);
  ctx_.prof.mark("bwd patch embedding", s);
  block_done(-1, s);
  ctx_.prof.collect();
}

void VitBf16::logits_to_host(float* host) const {
  std::vector<bf16> rows(size_t(B_) * size_t(Cp_));
  CUDA_CHECK(cudaMemcpy(rows.data(), logits_.get(), rows.size() * sizeof(bf16), cudaMemcpyDeviceToHost));
  for (int r = 0; r < B_; r++)
    for (int c = 0; c < s_.classes; c++)
      host[size_t(r) * size_t(s_.classes) + size_t(c)] = __bfloat162float(rows[size_t(r) * size_t(Cp_) + size_t(c)]);
}

#include "common/cuda_check.h"
#include "kernels/dropout_kernels.h"
#include "kernels/gpt2_fp32_kernels.h"
#include "kernels/reduce.h"
#include "models/gpt2_fp32.h"
#include "models/gpt2_sites.h"

Gpt2Fp32::Gpt2Fp32(const Gpt2Shape& shape, Arena& arena, int B, int T)
    : s_(shape), arena_(arena), B_(B), T_(T), N_(B * T), batch_(B * T, shape.vocab) {
  if (T > s_.max_seq)
    user_error("sequence length ", T, " exceeds the model's context of ", s_.max_seq, "; use -t ", s_.max_seq,
               " or less.");
  if (s_.channels % s_.heads) user_error("channels (", s_.channels, ") must divide into ", s_.heads, " heads.");
  CUBLAS_CHECK(cublasCreate(&blas_));
  CUBLAS_CHECK(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH));  // fp32, no TF32
  const ParamTable& t = arena.table();
  const Gpt2Tensors ix = gpt2_tensors(t, s_);
  auto P = [&](int i) -> float* { return arena.params() + t[i].offset; };
  auto G = [&](int i) -> float* { return arena.grads() + t[i].offset; };
  wte_ = P(ix.wte);
  wpe_ = P(ix.wpe);
  lnfw_ = P(ix.lnfw);
  lnfb_ = P(ix.lnfb);
  d_wte_ = G(ix.wte);
  d_wpe_ = G(ix.wpe);
  d_lnfw_ = G(ix.lnfw);
  d_lnfb_ = G(ix.lnfb);
  const int64_t C = s_.channels, N = N_;
  for (int l = 0; l < s_.layers; l++) {
    const BlockTensors& b = ix.blocks[size_t(l)];
    LayerParams q{};
    q.ln1w = P(b.ln1w);
    q.ln1b = P(b.ln1b);
    q.d_ln1w = G(b.ln1w);
    q.d_ln1b = G(b.ln1b);
    for (int k = 0; k < (s_.separate_qkv ? 3 : 1); k++) {
      q.qkvw[k] = P(b.qkvw[k]);
      q.qkvb[k] = P(b.qkvb[k]);
      q.d_qkvw[k] = G(b.qkvw[k]);
      q.d_qkvb[k] = G(b.qkvb[k]);
    }
    q.projw = P(b.projw);
    q.projb = P(b.projb);
    q.d_projw = G(b.projw);
    q.d_projb = G(b.projb);
    q.ln2w = P(b.ln2w);
    q.ln2b = P(b.ln2b);
    q.d_ln2w = G(b.ln2w);
    q.d_ln2b = G(b.ln2b);
    q.fcw = P(b.fcw);
    q.fcb = P(b.fcb);
    q.d_fcw = G(b.fcw);
    q.d_fcb = G(b.fcb);
    q.fcprojw = P(b.fcprojw);
    q.fcprojb = P(b.fcprojb);
    q.d_fcprojw = G(b.fcprojw);
    q.d_fcprojb = G(b.fcprojb);
    lp_.push_back(q);
    LayerActs a;
    a.x_in.alloc(size_t(N * C), "activations");
    a.ln1.alloc(size_t(N * C), "activations");
    a.ln1_mean.alloc(size_t(N), "activations");
    a.ln1_rstd.alloc(size_t(N), "activations");
    a.qkv.alloc(size_t(N * 3 * C), "activations");
    a.att.alloc(size_t(N * C), "activations");
    a.lse.alloc(size_t(N * s_.heads), "activations");
    a.x_mid.alloc(size_t(N * C), "activations");
    a.ln2.alloc(size_t(N * C), "activations");
    a.ln2_mean.alloc(size_t(N), "activations");
    a.ln2_rstd.alloc(size_t(N), "activations");
    a.fc.alloc(size_t(N * 4 * C), "activations");
    a.gelu.alloc(size_t(N * 4 * C), "activations");
    la_.push_back(std::move(a));
  }
  x_final_.alloc(size_t(N * C), "activations");
  lnf_.alloc(size_t(N * C), "activations");
  lnf_mean_.alloc(size_t(N), "activations");
  lnf_rstd_.alloc(size_t(N), "activations");
  logits_.alloc(size_t(N) * size_t(s_.vocab), "logits");
  losses_.alloc(size_t(N), "losses");
  loss_mean_.alloc(1, "loss");
  dres_.alloc(size_t(N * C), "gradients");
  dln_.alloc(size_t(N * C), "gradients");
  datt_.alloc(size_t(N * C), "gradients");
  dqkv_.alloc(size_t(N * 3 * C), "gradients");
  dbig_.alloc(size_t(N * 4 * C), "gradients");
  att_D_.alloc(size_t(N * s_.heads), "gradients");
}

Gpt2Fp32::~Gpt2Fp32() {
  if (blas_) cublasDestroy(blas_);
}

void Gpt2Fp32::set_batch(const Batch& b, cudaStream_t s) {
  CHECK(b.tokens && !b.pixels && !b.soft_targets);
  batch_.set(b.tokens, b.targets, s);
}

void Gpt2Fp32::logits_to_host(int first, int count, float* host) const {
  CHECK(first >= 0 && count >= 0 && first + count <= N_);
  CUDA_CHECK(cudaMemcpy(host, logits_.get() + size_t(first) * size_t(s_.vocab),
                        size_t(count) * size_t(s_.vocab) * sizeof(float), cudaMemcpyDeviceToHost));
}

// branch = stream + dropout(branch), in place.
void Gpt2Fp32::add_branch(float* branch, const float* stream, uint32_t site, cudaStream_t s) {
  if (dropout_.on())
    dropout_forward(branch, branch, stream, N_, s_.channels, dropout_.site(site), s);
  else
    add_inplace(branch, stream, int64_t(N_) * s_.channels, s);
}

// The gradient of a residual branch's output: the stream's gradient dres, dropped out as in forward (into
// dln_, free until the layer's next LayerNorm backward) or dres itself.
const float* Gpt2Fp32::branch_grad(const float* dres, uint32_t site, cudaStream_t s) {
  if (!dropout_.on()) return dres;
  dropout_forward(dln_.get(), dres, nullptr, N_, s_.channels, dropout_.site(site), s);
  return dln_.get();
}

void Gpt2Fp32::forward(cudaStream_t s) {
  const int C = s_.channels, N = N_, NH = s_.heads, hs = C / NH;
  float* x0 = la_.empty() ? x_final_.get() : la_[0].x_in.get();
  encoder_forward(x0, batch_.tokens(), wte_, wpe_, N, T_, C, s);
  if (dropout_.on()) dropout_forward(x0, x0, nullptr, N, C, dropout_.site(dropout_site_embedding()), s);
  for (int l = 0; l < s_.layers; l++) {
    const LayerParams& p = lp_[size_t(l)];
    LayerActs& a = la_[size_t(l)];
    float* x_out = l + 1 < s_.layers ? la_[size_t(l + 1)].x_in.get() : x_final_.get();
    layernorm_forward(a.ln1.get(), a.ln1_mean.get(), a.ln1_rstd.get(), a.x_in.get(), p.ln1w, p.ln1b, N, C, kGpt2LnEps,
                      s);
    if (s_.separate_qkv)
      for (int k = 0; k < 3; k++)
        linear_forward(blas_, a.qkv.get() + k * C, 3 * C, a.ln1.get(), C, p.qkvw[k], p.qkvb[k], N, C, C, s);
    else
      linear_forward(blas_, a.qkv.get(), 3 * C, a.ln1.get(), C, p.qkvw[0], p.qkvb[0], N, C, 3 * C, s);
    attention_forward(a.att.get(), a.lse.get(), a.qkv.get(), a.qkv.get() + C, a.qkv.get() + 2 * C, 3 * C, B_, T_, NH,
                      hs, s, dropout_.site(dropout_site_attention(l)));
    linear_forward(blas_, a.x_mid.get(), C, a.att.get(), C, p.projw, p.projb, N, C, C, s);
    add_branch(a.x_mid.get(), a.x_in.get(), dropout_site_attn_proj(l), s);
    layernorm_forward(a.ln2.get(), a.ln2_mean.get(), a.ln2_rstd.get(), a.x_mid.get(), p.ln2w, p.ln2b, N, C, kGpt2LnEps,
                      s);
    linear_forward(blas_, a.fc.get(), 4 * C, a.ln2.get(), C, p.fcw, p.fcb, N, C, 4 * C, s);
    gelu_forward(a.gelu.get(), a.fc.get(), int64_t(N) * 4 * C, s);
    linear_forward(blas_, x_out, C, a.gelu.get(), 4 * C, p.fcprojw, p.fcprojb, N, 4 * C, C, s);
    add_branch(x_out, a.x_mid.get(), dropout_site_mlp_proj(l), s);
  }
  layernorm_forward(lnf_.get(), lnf_mean_.get(), lnf_rstd_.get(), x_final_.get(), lnfw_, lnfb_, N, C, kGpt2LnEps, s);
  linear_forward(blas_, logits_.get(), s_.vocab, lnf_.get(), C, wte_, nullptr, N, C, s_.vocab, s);  // tied head
}

void Gpt2Fp32::loss_and_dlogits(float grad_scale, cudaStream_t s) {
  crossentropy_forward_backward(logits_.get(), losses_.get(), batch_.targets(), N_, s_.vocab, grad_scale, s);
  mean_reduce(loss_mean_.get(), losses_.get(), N_, s);
}

void Gpt2Fp32::backward(cudaStream_t s) {
  const int C = s_.channels, N = N_, NH = s_.heads, hs = C / NH, V = s_.vocab;
  float* dres = dres_.get();
  CUDA_CHECK(cudaMemsetAsync(dres, 0, size_t(N) * C * sizeof(float), s));
  linear_backward(blas_, dln_.get(), C, false, d_wte_, nullptr, logits_.get(), V, lnf_.get(), C, wte_, N, C, V, s);
  layernorm_backward(dres, d_lnfw_, d_lnfb_, dln_.get(), x_final_.get(), lnfw_, lnf_mean_.get(), lnf_rstd_.get(), N, C,
                     s);
  for (int l = s_.layers - 1; l >= 0; l--) {
    const LayerParams& p = lp_[size_t(l)];
    LayerActs& a = la_[size_t(l)];
    // MLP
    const float* dbranch = branch_grad(dres, dropout_site_mlp_proj(l), s);
    linear_backward(blas_, dbig_.get(), 4 * C, false, p.d_fcprojw, p.d_fcprojb, dbranch, C, a.gelu.get(), 4 * C,
                    p.fcprojw, N, 4 * C, C, s);
    gelu_backward(dbig_.get(), a.fc.get(), dbig_.get(), int64_t(N) * 4 * C, s);
    linear_backward(blas_, dln_.get(), C, false, p.d_fcw, p.d_fcb, dbig_.get(), 4 * C, a.ln2.get(), C, p.fcw, N, C,
                    4 * C, s);
    layernorm_backward(dres, p.d_ln2w, p.d_ln2b, dln_.get(), a.x_mid.get(), p.ln2w, a.ln2_mean.get(), a.ln2_rstd.get(),
                       N, C, s);
    // Attention
    dbranch = branch_grad(dres, dropout_site_attn_proj(l), s);
    linear_backward(blas_, datt_.get(), C, false, p.d_projw, p.d_projb, dbranch, C, a.att.get(), C, p.projw, N, C, C,
                    s);
    attention_backward(dqkv_.get(), dqkv_.get() + C, dqkv_.get() + 2 * C, datt_.get(), a.att.get(), a.lse.get(),
                       a.qkv.get(), a.qkv.get() + C, a.qkv.get() + 2 * C, 3 * C, B_, T_, NH, hs, att_D_.get(), s,
                       dropout_.site(dropout_site_attention(l)));
    if (s_.separate_qkv)
      for (int k = 0; k < 3; k++)
        linear_backward(blas_, dln_.get(), C, k > 0, p.d_qkvw[k], p.d_qkvb[k], dqkv_.get() + k * C, 3 * C, a.ln1.get(),
                        C, p.qkvw[k], N, C, C, s);
    else
      linear_backward(blas_, dln_.get(), C, false, p.d_qkvw[0], p.d_qkvb[0], dqkv_.get(), 3 * C, a.ln1.get(), C,
                      p.qkvw[0], N, C, 3 * C, s);
    layernorm_backward(dres, p.d_ln1w, p.d_ln1b, dln_.get(), a.x_in.get(), p.ln1w, a.ln1_mean.get(), a.ln1_rstd.get(),
                       N, C, s);
    block_done(l, s);
  }
  if (dropout_.on()) dropout_forward(dres, dres, nullptr, N, C, dropout_.site(dropout_site_embedding()), s);
  encoder_backward(d_wte_, d_wpe_, dres, batch_.groups(), B_, T_, C, s);
  dropout_.advance(s);
  block_done(-1, s);
}

#include "common/cuda_check.h"
#include "kernels/dropout_kernels.h"
#include "kernels/gpt2_fp32_kernels.h"
#include "kernels/reduce.h"
#include "models/gpt2_fp32.h"
#include "models/gpt2_sites.h"

Gpt2Fp32::Gpt2Fp32(const Gpt2Shape& shape, Arena& arena, int B, int T)
    : s_(shape), arena_(arena), B_(B), T_(T), N_(B * T), batch_(B * T, shape.vocab, shape.channels) {
  if (T > s_.max_seq)
    user_error("sequence length ", T, " exceeds the model's context of ", s_.max_seq, "; use -t ", s_.max_seq,
               " or less.");
  if (s_.channels % s_.heads) user_error("channels (", s_.channels, ") must divide into ", s_.heads, " heads.");
  CUBLAS_CHECK(cublasCreate(&blas_));
  CUBLAS_CHECK(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH));  // fp32, no TF32
  const ParamTable& t = arena.table();
  const Gpt2Tensors ix = gpt2_tensors(t, s_);
  wte_ = param(ix.wte);
  wpe_ = param(ix.wpe);
  lnfw_ = param(ix.lnfw);
  lnfb_ = param(ix.lnfb);
  d_wte_ = grad(ix.wte);
  d_wpe_ = grad(ix.wpe);
  d_lnfw_ = grad(ix.lnfw);
  d_lnfb_ = grad(ix.lnfb);
  for (int l = 0; l < s_.layers; l++) {
    lp_.push_back(layer_params(ix.blocks[size_t(l)]));
    la_.push_back(layer_acts());
  }
  alloc_top_and_gradients();
}

float* Gpt2Fp32::param(int i) const { return arena_.params() + arena_.table()[i].offset; }
float* Gpt2Fp32::grad(int i) const { return arena_.grads() + arena_.table()[i].offset; }

// A block's weights and gradients in the arena; qkvw[1..2] stay null when q, k, v are one fused matrix.
Gpt2Fp32::LayerParams Gpt2Fp32::layer_params(const BlockTensors& b) const {
  LayerParams q{};
  q.ln1w = param(b.ln1w);
  q.ln1b = param(b.ln1b);
  q.d_ln1w = grad(b.ln1w);
  q.d_ln1b = grad(b.ln1b);
  for (int k = 0; k < (s_.separate_qkv ? 3 : 1); k++) {
    q.qkvw[k] = param(b.qkvw[k]);
    q.qkvb[k] = param(b.qkvb[k]);
    q.d_qkvw[k] = grad(b.qkvw[k]);
    q.d_qkvb[k] = grad(b.qkvb[k]);
  }
  q.projw = param(b.projw);
  q.projb = param(b.projb);
  q.d_projw = grad(b.projw);
  q.d_projb = grad(b.projb);
  q.ln2w = param(b.ln2w);
  q.ln2b = param(b.ln2b);
  q.d_ln2w = grad(b.ln2w);
  q.d_ln2b = grad(b.ln2b);
  q.fcw = param(b.fcw);
  q.fcb = param(b.fcb);
  q.d_fcw = grad(b.fcw);
  q.d_fcb = grad(b.fcb);
  q.fcprojw = param(b.fcprojw);
  q.fcprojb = param(b.fcprojb);
  q.d_fcprojw = grad(b.fcprojw);
  q.d_fcprojb = grad(b.fcprojb);
  return q;
}

// What a block's forward keeps for its backward (N = B*T rows).
Gpt2Fp32::LayerActs Gpt2Fp32::layer_acts() const {
  const int64_t C = s_.channels, N = N_;
  LayerActs a;
  a.x_in.alloc(size_t(N * C), "activations");        // (N, C) the residual stream entering the block
  a.ln1.alloc(size_t(N * C), "activations");         // (N, C)
  a.ln1_mean.alloc(size_t(N), "activations");        // (N)
  a.ln1_rstd.alloc(size_t(N), "activations");        // (N)
  a.qkv.alloc(size_t(N * 3 * C), "activations");     // (N, 3C) q | k | v
  a.att.alloc(size_t(N * C), "activations");         // (N, C) attention output, heads side by side
  a.lse.alloc(size_t(N * s_.heads), "activations");  // (B, NH, T) log-sum-exp of each softmax row
  a.x_mid.alloc(size_t(N * C), "activations");       // (N, C) the stream after the attention branch
  a.ln2.alloc(size_t(N * C), "activations");         // (N, C)
  a.ln2_mean.alloc(size_t(N), "activations");        // (N)
  a.ln2_rstd.alloc(size_t(N), "activations");        // (N)
  a.fc.alloc(size_t(N * 4 * C), "activations");      // (N, 4C) before GELU
  a.gelu.alloc(size_t(N * 4 * C), "activations");    // (N, 4C) after GELU
  return a;
}

// The final LayerNorm's and the head's activations, then the gradient buffers backward reuses for every block.
void Gpt2Fp32::alloc_top_and_gradients() {
  const int64_t C = s_.channels, N = N_;
  x_final_.alloc(size_t(N * C), "activations");
  lnf_.alloc(size_t(N * C), "activations");
  lnf_mean_.alloc(size_t(N), "activations");
  lnf_rstd_.alloc(size_t(N), "activations");
  logits_.alloc(size_t(N) * size_t(s_.vocab), "logits");  // (N, V), then d(loss)/d(logits) in place
  losses_.alloc(size_t(N), "losses");
  loss_mean_.alloc(1, "loss");
  dres_.alloc(size_t(N * C), "gradients");          // (N, C) d(loss)/d(residual stream)
  dln_.alloc(size_t(N * C), "gradients");           // (N, C) d(loss)/d(a LayerNorm's output)
  datt_.alloc(size_t(N * C), "gradients");          // (N, C)
  dqkv_.alloc(size_t(N * 3 * C), "gradients");      // (N, 3C)
  dbig_.alloc(size_t(N * 4 * C), "gradients");      // (N, 4C) the MLP's hidden gradient
  att_D_.alloc(size_t(N * s_.heads), "gradients");  // (B, NH, T) rowsum(dO * O) of attention backward
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

// Pre-LayerNorm blocks: x_mid = x_in + proj(attention(LN1(x_in))), x_out = x_mid + fcproj(GELU(fc(LN2(x_mid)))),
// each branch dropped out before its add; then logits = LN_f(x) wte^T. N = B*T rows, hs = C / NH.
void Gpt2Fp32::forward(cudaStream_t s) {
  const int C = s_.channels, N = N_, NH = s_.heads, hs = C / NH;
  float* x0 = la_.empty() ? x_final_.get() : la_[0].x_in.get();
  // (N, C) = wte[token] + wpe[position]
  encoder_forward(x0, batch_.tokens(), wte_, wpe_, N, T_, C, s);
  if (dropout_.on()) dropout_forward(x0, x0, nullptr, N, C, dropout_.site(dropout_site_embedding()), s);
  for (int l = 0; l < s_.layers; l++) {
    const LayerParams& p = lp_[size_t(l)];
    LayerActs& a = la_[size_t(l)];
    float* x_out = l + 1 < s_.layers ? la_[size_t(l + 1)].x_in.get() : x_final_.get();  // the next block's x_in
    layernorm_forward(a.ln1.get(), a.ln1_mean.get(), a.ln1_rstd.get(), a.x_in.get(), p.ln1w, p.ln1b, N, C, kGpt2LnEps,
                      s);
    // (N, 3C): q, k, v side by side, from three (C, C) matrices or one (3C, C)
    if (s_.separate_qkv)
      for (int k = 0; k < 3; k++)
        linear_forward(blas_, a.qkv.get() + k * C, 3 * C, a.ln1.get(), C, p.qkvw[k], p.qkvb[k], N, C, C, s);
    else
      linear_forward(blas_, a.qkv.get(), 3 * C, a.ln1.get(), C, p.qkvw[0], p.qkvb[0], N, C, 3 * C, s);
    // att (N, C), heads side by side; lse (B, NH, T) for backward
    attention_forward(a.att.get(), a.lse.get(), a.qkv.get(), a.qkv.get() + C, a.qkv.get() + 2 * C, 3 * C, B_, T_, NH,
                      hs, s, dropout_.site(dropout_site_attention(l)));
    linear_forward(blas_, a.x_mid.get(), C, a.att.get(), C, p.projw, p.projb, N, C, C, s);
    add_branch(a.x_mid.get(), a.x_in.get(), dropout_site_attn_proj(l), s);
    layernorm_forward(a.ln2.get(), a.ln2_mean.get(), a.ln2_rstd.get(), a.x_mid.get(), p.ln2w, p.ln2b, N, C, kGpt2LnEps,
                      s);
    // MLP: (N, C) -> (N, 4C) -> GELU -> (N, C)
    linear_forward(blas_, a.fc.get(), 4 * C, a.ln2.get(), C, p.fcw, p.fcb, N, C, 4 * C, s);
    gelu_forward(a.gelu.get(), a.fc.get(), int64_t(N) * 4 * C, s);
    linear_forward(blas_, x_out, C, a.gelu.get(), 4 * C, p.fcprojw, p.fcprojb, N, 4 * C, C, s);
    add_branch(x_out, a.x_mid.get(), dropout_site_mlp_proj(l), s);
  }
  layernorm_forward(lnf_.get(), lnf_mean_.get(), lnf_rstd_.get(), x_final_.get(), lnfw_, lnfb_, N, C, kGpt2LnEps, s);
  linear_forward(blas_, logits_.get(), s_.vocab, lnf_.get(), C, wte_, nullptr, N, C, s_.vocab, s);  // (N, V), tied head
}

// losses (N), their mean; logits_ becomes grad_scale * d(mean loss)/d(logits).
void Gpt2Fp32::loss_and_dlogits(float grad_scale, cudaStream_t s) {
  crossentropy_forward_backward(logits_.get(), losses_.get(), batch_.targets(), N_, s_.vocab, grad_scale, s);
  mean_reduce(loss_mean_.get(), losses_.get(), N_, s);
}

// The forward in reverse. dres (N, C) carries d(loss)/d(residual stream) down the blocks: each LayerNorm
// backward adds its input gradient to it, which is the residual add's backward. Every parameter gradient
// accumulates (+=) into the arena, so micro-batches sum.
void Gpt2Fp32::backward(cudaStream_t s) {
  const int C = s_.channels, N = N_, NH = s_.heads, hs = C / NH, V = s_.vocab;
  float* dres = dres_.get();
  CUDA_CHECK(cudaMemsetAsync(dres, 0, size_t(N) * C * sizeof(float), s));
  // The head: dln (N, C) = dlogits wte, d_wte += dlogits^T lnf; then LN_f's backward into dres
  linear_backward(blas_, dln_.get(), C, false, d_wte_, nullptr, logits_.get(), V, lnf_.get(), C, wte_, N, C, V, s);
  layernorm_backward(dres, d_lnfw_, d_lnfb_, dln_.get(), x_final_.get(), lnfw_, lnf_mean_.get(), lnf_rstd_.get(), N, C,
                     s);
  for (int l = s_.layers - 1; l >= 0; l--) {
    const LayerParams& p = lp_[size_t(l)];
    LayerActs& a = la_[size_t(l)];
    // MLP: through fcproj (dbig (N, 4C)), GELU (in place), fc (dln (N, C)), then LN2 into dres
    const float* dbranch = branch_grad(dres, dropout_site_mlp_proj(l), s);
    linear_backward(blas_, dbig_.get(), 4 * C, false, p.d_fcprojw, p.d_fcprojb, dbranch, C, a.gelu.get(), 4 * C,
                    p.fcprojw, N, 4 * C, C, s);
    gelu_backward(dbig_.get(), a.fc.get(), dbig_.get(), int64_t(N) * 4 * C, s);
    linear_backward(blas_, dln_.get(), C, false, p.d_fcw, p.d_fcb, dbig_.get(), 4 * C, a.ln2.get(), C, p.fcw, N, C,
                    4 * C, s);
    layernorm_backward(dres, p.d_ln2w, p.d_ln2b, dln_.get(), a.x_mid.get(), p.ln2w, a.ln2_mean.get(), a.ln2_rstd.get(),
                       N, C, s);
    // Attention: through proj (datt (N, C)), attention (dqkv (N, 3C)), the q/k/v matmuls (dln), LN1
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
  // d_wte[token] += dres, d_wpe[position] += dres; positions grouped by token on the device (deterministic)
  encoder_backward(d_wte_, d_wpe_, dres, batch_.groups(), B_, T_, C, s);
  dropout_.advance(s);
  block_done(-1, s);
}

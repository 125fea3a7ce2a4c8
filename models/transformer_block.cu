#include <algorithm>

#include "common/cuda_check.h"
#include "common/device_random.h"
#include "common/event_timer.h"
#include "kernels/column_sums.h"
#include "kernels/flash_attention.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "models/transformer_block.h"

BlockContext::BlockContext(const BlockShape& s, const Arena& a, const DropoutState& d, int B, int T,
                           Attention attention)
    : arena(a), dropout(d) {
  CHECK(a.params_bf16() != nullptr);
  if (attention != Attention::kOurs) cudnn = std::make_unique<CudnnAttention>(attention == Attention::kCudnn);
  const size_t N = size_t(B) * size_t(T), C = size_t(s.channels);
  const char* grads = "activation gradients";
  dln.alloc(N * C, grads);
  datt.alloc(N * C, grads);
  dqkv.alloc(N * 3 * C, grads);
  dfc.alloc(N * size_t(s.hidden), grads);
  // column sums of up to 4C columns per C (column_sums.h), and attention's row sums (N * heads)
  const int widest = std::max(s.channels, (s.hidden + 3) / 4);
  scratch.alloc(std::max(column_sums_scratch_floats(widest), N * size_t(s.heads)), "scratch");
}

TransformerBlock::TransformerBlock(const BlockShape& s, const BlockTensors& ix, const ParamTable& t, BlockSites sites,
                                   int B, int T)
    : s_(s), sites_(sites), B_(B), T_(T), N_(B * T) {
  if (s.channels != 64 * s.heads)
    user_error("the bf16 transformer block needs 64 channels per head (got ", s.channels, " for ", s.heads, " heads).");
  auto off = [&](int i) { return t[i].offset; };
  const int64_t C = s.channels;
  ln1w_ = off(ix.ln1w);
  ln1b_ = off(ix.ln1b);
  qkvw_ = off(ix.qkvw[0]);
  qkvb_ = off(ix.qkvb[0]);
  CHECK(qkv_is_one_piece(t, ix));  // separate q/k/v: one (3C, C) matmul over the three matrices
  projw_ = off(ix.projw);
  projb_ = off(ix.projb);
  ln2w_ = off(ix.ln2w);
  ln2b_ = off(ix.ln2b);
  fcw_ = off(ix.fcw);
  fcb_ = off(ix.fcb);
  fcprojw_ = off(ix.fcprojw);
  fcprojb_ = off(ix.fcprojb);
  // What forward keeps for backward (N = B*T rows, H the MLP width): LN1's output, q | k | v (N, 3C), the
  // attention output (N, C), the stream after attention (mid), LN2's output, fc before and after GELU
  // (N, H), the LayerNorms' statistics (N), and attention's log-sum-exp per (b, head, query).
  const size_t N = size_t(N_), H = size_t(s.hidden);
  const char* act = "activations";
  ln1_.alloc(N * C, act);
  qkv_.alloc(N * 3 * C, act);
  att_.alloc(N * C, act);
  mid_.alloc(N * C, act);
  ln2_.alloc(N * C, act);
  fc_pre_.alloc(N * H, act);
  fc_.alloc(N * H, act);
  ln1_mean_.alloc(N, act);
  ln1_rstd_.alloc(N, act);
  ln2_mean_.alloc(N, act);
  ln2_rstd_.alloc(N, act);
  lse_.alloc(N * size_t(s.heads), act);
}

// Which place of the tanh GELU's backward is faster depends on the shape. On the H100 the epilogue wins at
// 124M (0.78 vs 1.08 ms per layer with the bias sum) and 774M, the separate kernel at 355M (0.81 vs 1.02
// ms: cuBLASLt offers a single, slow DGELU algorithm for 4096 x 32768 x 1024). So both are timed once, on
// random inputs in this block's buffers. The kernel must win by 10%, so that near ties do not flip.
bool TransformerBlock::gelu_epilogue_faster(BlockContext& c) {
  const int C = s_.channels, H = s_.hidden, N = N_;
  fill_normal(c.dln.get(), int64_t(N) * C, 11, 1e-3f, 0);
  fill_normal(fc_pre_.get(), int64_t(N) * H, 12, 1.0f, 0);
  DeviceBuffer<float> db(size_t(H), "timing buffer");
  auto epilogue = [&] {
    c.mm.backward_dx(c.dfc.get(), H, false, c.dln.get(), C, c.W(fcprojw_), N, H, C, 0, fc_pre_.get());
    bias_backward(db.get(), c.dfc.get(), H, N, H, c.scratch.get(), 0);
  };
  auto kernel = [&] {
    c.mm.backward_dx(c.dfc.get(), H, false, c.dln.get(), C, c.W(fcprojw_), N, H, C, 0);
    gelu_bias_backward(db.get(), c.dfc.get(), fc_pre_.get(), H, N, H, c.scratch.get(), 0);
  };
  return !(median_event_ms(kernel, 0) < 0.9 * median_event_ms(epilogue, 0));
}

// out = stream + dropout(x W^T + b) for a projection (I inputs) that writes the residual stream. Without
// dropout the add is the matmul's accumulate; with it the projection goes to datt (free in forward).
void TransformerBlock::project_into_stream(bf16* out, const bf16* stream, const bf16* x, int I, int64_t w, int64_t b,
                                           uint32_t site, BlockContext& c, cudaStream_t s) {
  const int C = s_.channels, N = N_;
  if (!c.dropout.on()) {
    c.mm.forward(out, C, x, I, c.W(w), c.W(b), N, I, C, s, stream);
    return;
  }
  c.mm.forward(c.datt.get(), C, x, I, c.W(w), c.W(b), N, I, C, s);
  dropout_forward(out, c.datt.get(), stream, N, C, c.dropout.site(site), s);
}

// att (N, C) and lse from qkv (N, 3C): our flash attention, or cuDNN's (which has no dropout).
void TransformerBlock::attention_kernels_forward(BlockContext& c, cudaStream_t s) {
  if (!c.cudnn) {
    flash_attention_forward(att_.get(), lse_.get(), qkv_.get(), B_, T_, s_.heads, s_.causal, s,
                            c.dropout.site(sites_.attention));
    return;
  }
  if (c.dropout.on()) user_error("--attention cudnn has no attention dropout; use --attention ours with --dropout.");
  c.cudnn->forward(att_.get(), lse_.get(), qkv_.get(), B_, T_, s_.heads, s_.causal, s);
}

// dqkv (N, 3C) from datt, recomputing the probabilities from lse; scratch holds the row sums D.
void TransformerBlock::attention_kernels_backward(bf16* dqkv, BlockContext& c, cudaStream_t s) {
  if (!c.cudnn) {
    flash_attention_backward(dqkv, c.datt.get(), att_.get(), lse_.get(), qkv_.get(), c.scratch.get(), B_, T_, s_.heads,
                             s_.causal, s, c.dropout.site(sites_.attention));
    return;
  }
  if (c.dropout.on()) user_error("--attention cudnn has no attention dropout; use --attention ours with --dropout.");
  c.cudnn->backward(dqkv, c.datt.get(), att_.get(), lse_.get(), qkv_.get(), c.scratch.get(), B_, T_, s_.heads,
                    s_.causal, s);
}

// Pre-LayerNorm: mid = in + proj(attention(LN1(in))), out = mid + fcproj(GELU(fc(LN2(mid)))), in and out
// (N, C). q, k, v come from one (3C, C) matmul; the tanh GELU is fused into fc's epilogue (which also keeps
// its input, fc_pre, for backward); the erf form runs as a kernel after a plain matmul.
void TransformerBlock::forward(bf16* out, const bf16* in, BlockContext& c, cudaStream_t s) {
  const int C = s_.channels, H = s_.hidden, N = N_;
  OpTimer& p = c.prof;
  layernorm_forward(ln1_.get(), ln1_mean_.get(), ln1_rstd_.get(), in, c.W(ln1w_), c.W(ln1b_), N, C, s_.ln_eps, s);
  p.mark("fwd layernorm", s);
  c.mm.forward(qkv_.get(), 3 * C, ln1_.get(), C, c.W(qkvw_), c.W(qkvb_), N, C, 3 * C, s);
  p.mark("fwd matmul qkv", s);
  attention_kernels_forward(c, s);
  p.mark("fwd attention", s);
  project_into_stream(mid_.get(), in, att_.get(), C, projw_, projb_, sites_.attn_proj, c, s);
  p.mark("fwd matmul proj", s);
  layernorm_forward(ln2_.get(), ln2_mean_.get(), ln2_rstd_.get(), mid_.get(), c.W(ln2w_), c.W(ln2b_), N, C, s_.ln_eps,
                    s);
  p.mark("fwd layernorm", s);
  if (s_.gelu == Gelu::kTanh) {
    c.mm.forward(fc_.get(), H, ln2_.get(), C, c.W(fcw_), c.W(fcb_), N, C, H, s, nullptr, fc_pre_.get());  // epilogue
  } else {
    c.mm.forward(fc_pre_.get(), H, ln2_.get(), C, c.W(fcw_), c.W(fcb_), N, C, H, s);
    gelu_forward(fc_.get(), fc_pre_.get(), H, N, H, s_.gelu, s);
  }
  p.mark("fwd matmul fc+gelu", s);
  project_into_stream(out, mid_.get(), fc_.get(), H, fcprojw_, fcprojb_, sites_.mlp_proj, c, s);
  p.mark("fwd matmul fcproj", s);
}

// The gradient of a projection's output that joined the stream: dres itself, or with dropout its masked
// copy in dln (free until the block's next LayerNorm backward) plus the projection's bias gradient,
// which the LayerNorm backward gives only when no mask stands between.
const bf16* TransformerBlock::branch_grad(const bf16* dres, float* dbias, uint32_t site, BlockContext& c,
                                          cudaStream_t s) {
  if (!c.dropout.on()) return dres;
  const int C = s_.channels;
  dropout_forward(c.dln.get(), dres, nullptr, N_, C, c.dropout.site(site), s);
  bias_backward(dbias, c.dln.get(), C, N_, C, c.scratch.get(), s);
  return c.dln.get();
}

// dres (N, C): on entry d(loss)/d(out), on return d(loss)/d(in) (the residual adds pass it through; each
// LayerNorm backward adds its branch's part). in_bias_grad: the previous block's mlp.proj bias gradient,
// summed by this block's LN1 backward (null for the first block).
void TransformerBlock::backward(bf16* dres, const bf16* in, float* in_bias_grad, BlockContext& c, cudaStream_t s,
                                const std::function<void()>& mlp_final) {
  mlp_backward(dres, c, s);  // dres becomes d(mid)
  if (mlp_final) mlp_final();
  attention_backward(dres, in, in_bias_grad, c, s);
}

// Bias gradients: the projections that write the residual stream (attn.proj, mlp.proj) get theirs from the
// LayerNorm backward that produces that stream's gradient; fc and qkv from column sums.
void TransformerBlock::mlp_backward(bf16* dres, BlockContext& c, cudaStream_t s) {
  const int C = s_.channels, H = s_.hidden, N = N_;
  OpTimer& p = c.prof;
  float* scratch = c.scratch.get();
  bf16* dfc = c.dfc.get();
  // fcproj: dW += dy^T fc; dfc (N, H) = dy W, times GELU'(fc_pre) in the matmul's epilogue or in the
  // kernel that also sums fc's bias gradient
  const bf16* dy = branch_grad(dres, c.G(fcprojb_), sites_.mlp_proj, c, s);
  c.mm.backward_dw(c.G(fcprojw_), dy, C, fc_.get(), H, N, H, C, s);
  p.mark("bwd matmul dW", s);
  if (s_.gelu == Gelu::kTanh && c.gelu_in_epilogue) {
    c.mm.backward_dx(dfc, H, false, dy, C, c.W(fcprojw_), N, H, C, s, fc_pre_.get());  // GELU' epilogue
    p.mark("bwd matmul dx", s);
    bias_backward(c.G(fcb_), dfc, H, N, H, scratch, s);
    p.mark("bwd bias", s);
  } else {
    c.mm.backward_dx(dfc, H, false, dy, C, c.W(fcprojw_), N, H, C, s);
    p.mark("bwd matmul dx", s);
    gelu_bias_backward(c.G(fcb_), dfc, fc_pre_.get(), H, N, H, scratch, s, s_.gelu);
    p.mark("bwd gelu+bias", s);
  }
  // fc: dW += dfc^T ln2, dln (N, C) = dfc W; then LN2's backward adds into dres (and sums proj's bias gradient)
  c.mm.backward_dw(c.G(fcw_), dfc, H, ln2_.get(), C, N, C, H, s);
  p.mark("bwd matmul dW", s);
  c.mm.backward_dx(c.dln.get(), C, false, dfc, H, c.W(fcw_), N, C, H, s);
  p.mark("bwd matmul dx", s);
  layernorm_backward(dres, c.G(ln2w_), c.G(ln2b_), c.dln.get(), mid_.get(), c.W(ln2w_), ln2_mean_.get(),
                     ln2_rstd_.get(), N, C, scratch, s, c.dropout.on() ? nullptr : c.G(projb_));
  p.mark("bwd layernorm", s);
}

// proj's gradients and datt (N, C); flash attention's backward to dqkv (N, 3C) (recomputing the probabilities
// from lse); qkv's dW, bias and dln; LN1's backward into dres.
void TransformerBlock::attention_backward(bf16* dres, const bf16* in, float* in_bias_grad, BlockContext& c,
                                          cudaStream_t s) {
  const int C = s_.channels, N = N_;
  OpTimer& p = c.prof;
  float* scratch = c.scratch.get();
  bf16* dqkv = c.dqkv.get();
  const bf16* dy = branch_grad(dres, c.G(projb_), sites_.attn_proj, c, s);
  c.mm.backward_dw(c.G(projw_), dy, C, att_.get(), C, N, C, C, s);
  p.mark("bwd matmul dW", s);
  c.mm.backward_dx(c.datt.get(), C, false, dy, C, c.W(projw_), N, C, C, s);
  p.mark("bwd matmul dx", s);
  attention_kernels_backward(dqkv, c, s);
  p.mark("bwd attention", s);
  c.mm.backward_dw(c.G(qkvw_), dqkv, 3 * C, ln1_.get(), C, N, C, 3 * C, s);
  p.mark("bwd matmul dW", s);
  bias_backward(c.G(qkvb_), dqkv, 3 * C, N, 3 * C, scratch, s);
  p.mark("bwd bias", s);
  c.mm.backward_dx(c.dln.get(), C, false, dqkv, 3 * C, c.W(qkvw_), N, C, 3 * C, s);
  p.mark("bwd matmul dx", s);
  layernorm_backward(dres, c.G(ln1w_), c.G(ln1b_), c.dln.get(), in, c.W(ln1w_), ln1_mean_.get(), ln1_rstd_.get(), N, C,
                     scratch, s, c.dropout.on() ? nullptr : in_bias_grad);
  p.mark("bwd layernorm", s);
}

#include "common/cuda_check.h"
#include "kernels/crossentropy.h"
#include "kernels/dropout_kernels.h"
#include "kernels/layernorm.h"
#include "kernels/reduce.h"
#include "models/gpt2_bf16.h"
#include "models/gpt2_sites.h"

Gpt2Bf16::Gpt2Bf16(const Gpt2Shape& shape, Arena& arena, int B, int T, Attention attention)
    : s_(shape),
      arena_(arena),
      B_(B),
      T_(T),
      N_(B * T),
      Vp_(gpt2_padded_vocab(shape.vocab)),
      ctx_(shape.block(), arena, dropout_, B, T, attention),
      batch_(B * T, shape.vocab, shape.channels) {
  if (T > s_.max_seq)
    user_error("sequence length ", T, " exceeds the model's context of ", s_.max_seq, "; use -t ", s_.max_seq,
               " or less.");
  if (s_.channels != 64 * s_.heads)
    user_error("the bf16 model needs 64 channels per head (got ", s_.channels, " for ", s_.heads,
               " heads); use --precision fp32.");
  const ParamTable& t = arena.table();
  const Gpt2Tensors ix = gpt2_tensors(t, s_);
  wte_ = t[ix.wte].offset;
  wpe_ = t[ix.wpe].offset;
  lnfw_ = t[ix.lnfw].offset;
  lnfb_ = t[ix.lnfb].offset;
  wte_index_ = ix.wte;
  wpe_index_ = ix.wpe;
  lnfw_index_ = ix.lnfw;
  lnfb_index_ = ix.lnfb;
  // Activations, N = B*T rows: the residual stream entering each block and ln_f (L + 1 of (N, C)), ln_f's
  // output (N, C) and statistics (N), the logits (N, Vp), later their gradient in place; the blocks keep their
  // own (models/transformer_block.h).
  const size_t N = size_t(N_), C = size_t(s_.channels);
  const char* act = "activations";
  blocks_.reserve(size_t(s_.layers));
  for (int l = 0; l < s_.layers; l++) {
    const BlockSites sites{dropout_site_attention(l), dropout_site_attn_proj(l), dropout_site_mlp_proj(l)};
    blocks_.emplace_back(s_.block(), ix.blocks[size_t(l)], t, sites, B, T);
  }
  stream_.resize(size_t(s_.layers) + 1);
  for (auto& x : stream_) x.alloc(N * C, act);
  lnf_.alloc(N * C, act);
  lnf_mean_.alloc(N, act);
  lnf_rstd_.alloc(N, act);
  logits_.alloc(N * size_t(Vp_), "logits");
  losses_.alloc(N, "losses");
  loss_mean_.alloc(1, "loss");
  dres_.alloc(N * C, "activation gradients");
  // Where the GELU backward runs (matmul epilogue or column-sum kernel) is timed once, on this shape.
  if (!blocks_.empty()) ctx_.gelu_in_epilogue = blocks_[0].gelu_epilogue_faster(ctx_);
}

std::string Gpt2Bf16::kernel_choices() const {
  return ctx_.gelu_in_epilogue ? "gelu_backward=epilogue" : "gelu_backward=kernel";
}

void Gpt2Bf16::set_kernel_choices(const std::string& choices) {
  if (choices == "gelu_backward=epilogue" || choices == "gelu_backward=kernel")
    ctx_.gelu_in_epilogue = choices == "gelu_backward=epilogue";
  else
    user_error("unknown kernel choices '", choices, "' (a checkpoint from another version of train_gpt2?).");
}

void Gpt2Bf16::set_batch(const Batch& b, cudaStream_t s) {
  CHECK(b.tokens && !b.pixels && !b.soft_targets);
  batch_.set(b.tokens, b.targets, s);
}

// stream_[0] = wte[token] + wpe[position] (dropped out), stream_[l + 1] = block l (stream_[l]), then
// logits (N, Vp) = LN_f(stream_[L]) wte^T. Each p.mark closes one timed op for GPT2_PROFILE=1.
void Gpt2Bf16::forward(cudaStream_t s) {
  const int C = s_.channels, N = N_;
  OpTimer& p = ctx_.prof;
  p.begin(s);
  bf16* x0 = stream_[0].get();
  encoder_forward(x0, batch_.tokens(), ctx_.W(wte_), ctx_.W(wpe_), N, T_, C, s);
  if (dropout_.on()) dropout_forward(x0, x0, nullptr, N, C, dropout_.site(dropout_site_embedding()), s);
  p.mark("fwd encoder", s);
  for (size_t l = 0; l < blocks_.size(); l++) blocks_[l].forward(stream_[l + 1].get(), stream_[l].get(), ctx_, s);
  layernorm_forward(lnf_.get(), lnf_mean_.get(), lnf_rstd_.get(), stream_.back().get(), ctx_.W(lnfw_), ctx_.W(lnfb_), N,
                    C, kGpt2LnEps, s);
  p.mark("fwd layernorm", s);
  // the tied head; wte's padded rows give 0
  ctx_.mm.forward(logits_.get(), Vp_, lnf_.get(), C, ctx_.W(wte_), nullptr, N, C, Vp_, s);
  p.mark("fwd matmul head", s);
}

// losses (N) and their mean; the logits become grad_scale * d(mean loss)/d(logits), bf16, in place.
void Gpt2Bf16::loss_and_dlogits(float grad_scale, cudaStream_t s) {
  crossentropy_forward_backward(logits_.get(), Vp_, losses_.get(), batch_.targets(), N_, s_.vocab,
                                grad_scale / float(N_), s);
  mean_reduce(loss_mean_.get(), losses_.get(), N_, s);
  ctx_.prof.mark("crossentropy", s);
}

// The forward in reverse: dres (N, C) is the residual stream's gradient, which every LayerNorm backward
// adds into; the blocks run L-1 ... 0, each calling the block hook when its gradients are final; then the
// embedding's. Parameter gradients accumulate (+=) in fp32 in the arena.
void Gpt2Bf16::backward(cudaStream_t s) {
  const int C = s_.channels, N = N_;
  OpTimer& p = ctx_.prof;
  bf16* dres = dres_.get();
  bf16* dln = ctx_.dln.get();
  // head: d(lnf) = dlogits wte (the padded columns of dlogits are 0), d(wte) += dlogits^T lnf (the padded
  // rows' gradient is exactly 0); then ln_f sets the residual gradient
  ctx_.mm.backward_dx(dln, C, false, logits_.get(), Vp_, ctx_.W(wte_), N, C, Vp_, s);
  p.mark("bwd matmul dx", s);
  ctx_.mm.backward_dw(ctx_.G(wte_), logits_.get(), Vp_, lnf_.get(), C, N, C, Vp_, s);
  p.mark("bwd matmul dW", s);
  CUDA_CHECK(cudaMemsetAsync(dres, 0, size_t(N) * C * sizeof(bf16), s));
  p.mark("bwd memset", s);
  const bool drop = dropout_.on();  // then the LayerNorms do not give the projections' bias gradients
  float* last_bias = blocks_.empty() || drop ? nullptr : blocks_.back().out_bias_grad(ctx_);
  layernorm_backward(dres, ctx_.G(lnfw_), ctx_.G(lnfb_), dln, stream_.back().get(), ctx_.W(lnfw_), lnf_mean_.get(),
                     lnf_rstd_.get(), N, C, ctx_.scratch.get(), s, last_bias);
  p.mark("bwd layernorm", s);
  const bool parts = emb_.early && block_hook_;  // a hook marks the backward that makes gradients final
  if (parts) emb_.early(s);                      // wte's head part and ln_f are known: their sum can start
  for (int l = s_.layers - 1; l >= 0; l--) {
    // block l's first LayerNorm backward also sums the bias gradient of block l - 1's mlp.proj (in_bias)
    float* in_bias = l > 0 ? blocks_[size_t(l - 1)].out_bias_grad(ctx_) : nullptr;
    blocks_[size_t(l)].backward(dres, stream_[size_t(l)].get(), in_bias, ctx_, s, [&] { mlp_done(l, s); });
    block_done(l, s);  // its mlp.proj bias came from block l + 1's LayerNorm backward, the rest from here
  }
  if (drop) dropout_forward(dres, dres, nullptr, N, C, dropout_.site(dropout_site_embedding()), s);
  embedding_backward(parts, s);
  dropout_.advance(s);
  p.mark("bwd encoder", s);
  block_done(-1, s);
  p.collect();
}

// d(wte) += and d(wpe) += the residual gradient at each position, by its token and its place. Summed in
// parts (sum_embedding_in_parts), the lookup's part of the table's gradient is the sum over the processes
// on every one of them: every process's sums per token added rank by rank where the processes map each
// other's memory, else from every process's positions, gathered. The sums move a row per distinct token
// (1,217 tokens in 16,384 positions of the KJV) where the gather moves every position's, and the grouping
// by token was done beside forward; on 4 H100s at GPT-2 355M the gather, sort and backward over every
// position took 0.7-0.9 ms after block 0, the wait for the slowest process included (docs/data_parallel.md).
void Gpt2Bf16::embedding_backward(bool parts, cudaStream_t s) {
  const int C = s_.channels;
  if (!parts) return encoder_backward(ctx_.G(wte_), ctx_.G(wpe_), dres_.get(), batch_.groups(), B_, T_, C, s);
  if (!shared_.empty()) {
    token_sums(shared_[size_t(emb_.rank)], dres_.get(), batch_.groups(), B_, T_, C, s);
    emb_.barrier(s);
    for (void* sums : shared_) add_token_sums(ctx_.G(wte_), ctx_.G(wpe_), sums, N_, T_, C, s);
    return;
  }
  const size_t N = size_t(N_);
  emb_.gather(batch_.tokens(), tokens_all_.get(), N * sizeof(int), s);
  emb_.gather(dres_.get(), dres_all_.get(), N * size_t(C) * sizeof(bf16), s);
  groups_all_->build(tokens_all_.get(), s);
  encoder_backward(ctx_.G(wte_), ctx_.G(wpe_), dres_all_.get(), *groups_all_, emb_.world * B_, T_, C, s);
}

Model::EmbeddingParts Gpt2Bf16::sum_embedding_in_parts(const EmbeddingSum& e) {
  CHECK(e.world >= 1 && e.rank >= 0 && e.rank < e.world && e.early && e.gather && !e.shared == !e.barrier);
  emb_ = e;
  if (e.shared) {
    shared_ = e.shared(token_sums_bytes(N_, T_, s_.channels));
    CHECK(int(shared_.size()) == e.world);
    batch_.keep_runs();
  } else {
    const size_t all = size_t(e.world) * size_t(N_);
    tokens_all_.alloc(all, "every process's tokens");
    dres_all_.alloc(all * size_t(s_.channels), "every process's residual gradients");
    groups_all_ = std::make_unique<TokenGroups>(int(all), s_.vocab, s_.channels);
  }
  EmbeddingParts parts;
  parts.early = {wte_index_, lnfw_index_, lnfb_index_};
  parts.gathered = {wte_index_, wpe_index_};
  return parts;
}

void Gpt2Bf16::logits_to_host(int first, int count, float* host) const {
  CHECK(first >= 0 && count >= 0 && first + count <= N_);
  std::vector<bf16> rows(size_t(count) * size_t(Vp_));
  CUDA_CHECK(cudaMemcpy(rows.data(), logits_.get() + size_t(first) * size_t(Vp_), rows.size() * sizeof(bf16),
                        cudaMemcpyDeviceToHost));
  for (int r = 0; r < count; r++)
    for (int v = 0; v < s_.vocab; v++)
      host[size_t(r) * size_t(s_.vocab) + size_t(v)] = __bfloat162float(rows[size_t(r) * size_t(Vp_) + size_t(v)]);
}

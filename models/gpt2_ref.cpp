// The CPU reference GPT-2 (see gpt2_ref.h): embedding, the reference blocks, ln_f, the tied head, softmax
// cross-entropy; backward in the reverse order, every sum in a fixed order, in double precision.
#include "models/gpt2_ref.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "models/gpt2_sites.h"

std::vector<float> gpt2_init(const ParamTable& table, const Gpt2Shape& s, uint64_t seed) {
  (void)gpt2_tensors(table, s);  // the table must be GPT-2's: its rows carry the initialisation
  return init_params(table, seed);
}

Gpt2Ref::Gpt2Ref(const Gpt2Shape& shape, const ParamTable& table)
    : s_(shape), t_(table), ix_(gpt2_tensors(table, shape)) {
  blocks_.reserve(size_t(s_.layers));
  for (int l = 0; l < s_.layers; l++) {
    const BlockSites sites{dropout_site_attention(l), dropout_site_attn_proj(l), dropout_site_mlp_proj(l)};
    blocks_.emplace_back(s_.block(), ix_.blocks[size_t(l)], table, sites);
  }
}

// x (B*T, C) = dropout(wte[token] + wpe[position]).
void Gpt2Ref::embed(const double* P, std::vector<double>* x) const {
  const int C = s_.channels, N = B_ * T_;
  const double* wte = P + t_[ix_.wte].offset;
  const double* wpe = P + t_[ix_.wpe].offset;
  x->resize(size_t(N * C));
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++)
      (*x)[size_t(n * C + c)] =
          (wte[tokens_[size_t(n)] * C + c] + wpe[(n % T_) * C + c]) * drop_.keep(dropout_site_embedding(), n, c);
}

// The final LayerNorm of x_final, the tied head's logits, their softmax; returns the mean cross-entropy.
double Gpt2Ref::head_loss(const double* P) {
  const int C = s_.channels, V = s_.vocab, N = B_ * T_;
  lnf.resize(x_final.size());
  lnf_mean.resize(size_t(N));
  lnf_rstd.resize(size_t(N));
  ref_layernorm(x_final.data(), P + t_[ix_.lnfw].offset, P + t_[ix_.lnfb].offset, lnf.data(), lnf_mean.data(),
                lnf_rstd.data(), N, C, kGpt2LnEps);
  logits_.resize(size_t(N) * size_t(V));
  ref_linear(lnf.data(), P + t_[ix_.wte].offset, nullptr, logits_.data(), N, C, V);  // tied head
  probs_.resize(logits_.size());
  double loss = 0;
  for (int n = 0; n < N; n++) {
    const double* z = &logits_[size_t(n) * size_t(V)];
    double mx = -1e300, sum = 0;
    for (int v = 0; v < V; v++) mx = std::max(mx, z[v]);
    for (int v = 0; v < V; v++) sum += std::exp(z[v] - mx);
    for (int v = 0; v < V; v++) probs_[size_t(n) * size_t(V) + size_t(v)] = std::exp(z[v] - mx) / sum;
    loss += -(z[targets_[size_t(n)]] - mx - std::log(sum));
  }
  return loss / N;
}

// x (B*T, C) goes through the blocks in place; each block keeps its activations in acts_[l].
double Gpt2Ref::forward(const std::vector<double>& P, const std::vector<int>& tokens, const std::vector<int>& targets,
                        int B, int T) {
  if (T > s_.max_seq) user_error("sequence length ", T, " exceeds the model's context of ", s_.max_seq, ".");
  B_ = B;
  T_ = T;
  tokens_ = tokens;
  targets_ = targets;
  std::vector<double> x;
  embed(P.data(), &x);
  acts_.assign(size_t(s_.layers), RefBlockActs{});
  for (int l = 0; l < s_.layers; l++) blocks_[size_t(l)].forward(P.data(), drop_, B, T, x.data(), &acts_[size_t(l)]);
  x_final = x;
  return head_loss(P.data());
}

// dlogits = (softmax - onehot(target)) / N (the mean over rows); the tied head gives d(lnf) and wte's head
// part; ln_f, the blocks L-1 ... 0 carry dx (B*T, C) down; the embedding adds dx into wte's and wpe's rows.
std::vector<double> Gpt2Ref::backward(const std::vector<double>& P) {
  const int T = T_, C = s_.channels, V = s_.vocab, N = B_ * T_;
  std::vector<double> G(P.size(), 0.0);
  auto W = [&](int i) { return &P[size_t(t_[i].offset)]; };
  auto D = [&](int i) { return &G[size_t(t_[i].offset)]; };
  std::vector<double> dlogits(logits_.size());
  for (int n = 0; n < N; n++)
    for (int v = 0; v < V; v++)
      dlogits[size_t(n) * size_t(V) + size_t(v)] =
          (probs_[size_t(n) * size_t(V) + size_t(v)] - (v == targets_[size_t(n)])) / N;
  std::vector<double> dlnf(size_t(N * C), 0.0), dx(size_t(N * C), 0.0);
  ref_linear_back(lnf.data(), W(ix_.wte), dlogits.data(), dlnf.data(), D(ix_.wte), nullptr, N, C, V);
  ref_layernorm_back(x_final.data(), W(ix_.lnfw), lnf_mean.data(), lnf_rstd.data(), dlnf.data(), dx.data(), D(ix_.lnfw),
                     D(ix_.lnfb), N, C);
  for (int l = s_.layers - 1; l >= 0; l--)
    blocks_[size_t(l)].backward(P.data(), drop_, acts_[size_t(l)], dx.data(), G.data());
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++) {
      const double g = dx[size_t(n * C + c)] * drop_.keep(dropout_site_embedding(), n, c);
      D(ix_.wte)[tokens_[size_t(n)] * C + c] += g;
      D(ix_.wpe)[(n % T) * C + c] += g;
    }
  return G;
}

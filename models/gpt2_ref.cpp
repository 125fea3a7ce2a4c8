#include "models/gpt2_ref.h"

#include <cmath>
#include <random>

#include "common/error.h"
#include "kernels/dropout.h"
#include "models/gpt2_sites.h"
#include "models/ref_ops.h"

std::vector<float> gpt2_init(const ParamTable& table, const Gpt2Shape& s, uint64_t seed) {
  (void)gpt2_tensors(table, s);  // the table must be GPT-2's: its rows carry the initialisation
  return init_params(table, seed);
}

double Gpt2Ref::keep(uint32_t site, uint32_t row, uint32_t col) const {
  const uint32_t threshold = dropout_threshold(p_);
  if (threshold == 0) return 1.0;
  return dropout_keep(dropout_row(dropout_site_key(seed_, counter_, site), row), col, threshold)
             ? double(dropout_scale(threshold))
             : 0.0;
}

double Gpt2Ref::forward(const std::vector<double>& P, const std::vector<int>& tokens, const std::vector<int>& targets,
                        int B, int T) {
  const int C = s_.channels, NH = s_.heads, hs = C / NH, V = s_.vocab, N = B * T, L = s_.layers;
  if (T > s_.max_seq) user_error("sequence length ", T, " exceeds the model's context of ", s_.max_seq, ".");
  B_ = B;
  T_ = T;
  tokens_ = tokens;
  targets_ = targets;
  auto W = [&](int i) { return &P[size_t(t_[i].offset)]; };
  std::vector<double> x(size_t(N * C));
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++)
      x[size_t(n * C + c)] =
          (W(ix_.wte)[tokens[size_t(n)] * C + c] + W(ix_.wpe)[(n % T) * C + c]) * keep(dropout_site_embedding(), n, c);
  layers_.assign(size_t(L), Layer{});
  for (int l = 0; l < L; l++) {
    Layer& a = layers_[size_t(l)];
    const BlockTensors& bt = ix_.blocks[size_t(l)];
    a.x_in = x;
    a.ln1.resize(x.size());
    a.ln1_mean.resize(size_t(N));
    a.ln1_rstd.resize(size_t(N));
    ref_layernorm(x.data(), W(bt.ln1w), W(bt.ln1b), a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), N, C,
                  kGpt2LnEps);
    a.q.resize(x.size());
    a.k.resize(x.size());
    a.v.resize(x.size());
    if (s_.separate_qkv) {
      ref_linear(a.ln1.data(), W(bt.qkvw[0]), W(bt.qkvb[0]), a.q.data(), N, C, C);
      ref_linear(a.ln1.data(), W(bt.qkvw[1]), W(bt.qkvb[1]), a.k.data(), N, C, C);
      ref_linear(a.ln1.data(), W(bt.qkvw[2]), W(bt.qkvb[2]), a.v.data(), N, C, C);
    } else {
      std::vector<double> qkv(size_t(N * 3 * C));
      ref_linear(a.ln1.data(), W(bt.qkvw[0]), W(bt.qkvb[0]), qkv.data(), N, C, 3 * C);
      for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
          a.q[size_t(n * C + c)] = qkv[size_t(n * 3 * C + c)];
          a.k[size_t(n * C + c)] = qkv[size_t(n * 3 * C + C + c)];
          a.v[size_t(n * C + c)] = qkv[size_t(n * 3 * C + 2 * C + c)];
        }
    }
    a.att.assign(size_t(B * NH * T * T), 0.0);  // softmax probabilities (reference only: tiny T)
    a.att_keep.assign(a.att.size(), 0.0);       // their dropout factors
    a.ctx.assign(x.size(), 0.0);
    const double scale = 1.0 / std::sqrt(double(hs));
    for (int b = 0; b < B; b++)
      for (int h = 0; h < NH; h++)
        for (int i = 0; i < T; i++) {
          double* row = &a.att[size_t(((b * NH + h) * T + i) * T)];
          double mx = -1e300;
          for (int j = 0; j <= i; j++) {
            double d = 0;
            for (int e = 0; e < hs; e++)
              d += a.q[size_t((b * T + i) * C + h * hs + e)] * a.k[size_t((b * T + j) * C + h * hs + e)];
            row[j] = d * scale;
            mx = std::max(mx, row[j]);
          }
          double sum = 0;
          for (int j = 0; j <= i; j++) sum += row[j] = std::exp(row[j] - mx);
          for (int j = 0; j <= i; j++) row[j] /= sum;
          double* z = &a.att_keep[size_t(((b * NH + h) * T + i) * T)];
          for (int j = 0; j <= i; j++) z[j] = keep(dropout_site_attention(l), uint32_t((b * NH + h) * T + i), j);
          for (int j = 0; j <= i; j++)
            for (int e = 0; e < hs; e++)
              a.ctx[size_t((b * T + i) * C + h * hs + e)] += z[j] * row[j] * a.v[size_t((b * T + j) * C + h * hs + e)];
        }
    std::vector<double> proj(x.size());
    ref_linear(a.ctx.data(), W(bt.projw), W(bt.projb), proj.data(), N, C, C);
    for (size_t i = 0; i < x.size(); i++)
      x[i] += proj[i] * keep(dropout_site_attn_proj(l), uint32_t(i / C), uint32_t(i % C));
    a.x_mid = x;
    a.ln2.resize(x.size());
    a.ln2_mean.resize(size_t(N));
    a.ln2_rstd.resize(size_t(N));
    ref_layernorm(x.data(), W(bt.ln2w), W(bt.ln2b), a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), N, C,
                  kGpt2LnEps);
    a.fc.resize(size_t(N * 4 * C));
    a.gelu.resize(size_t(N * 4 * C));
    ref_linear(a.ln2.data(), W(bt.fcw), W(bt.fcb), a.fc.data(), N, C, 4 * C);
    for (size_t i = 0; i < a.fc.size(); i++) {
      a.gelu[i] = ref_gelu_tanh(a.fc[i]);
    }
    ref_linear(a.gelu.data(), W(bt.fcprojw), W(bt.fcprojb), proj.data(), N, 4 * C, C);
    for (size_t i = 0; i < x.size(); i++)
      x[i] += proj[i] * keep(dropout_site_mlp_proj(l), uint32_t(i / C), uint32_t(i % C));
  }
  x_final = x;
  lnf.resize(x.size());
  lnf_mean.resize(size_t(N));
  lnf_rstd.resize(size_t(N));
  ref_layernorm(x.data(), W(ix_.lnfw), W(ix_.lnfb), lnf.data(), lnf_mean.data(), lnf_rstd.data(), N, C, kGpt2LnEps);
  logits_.resize(size_t(N) * size_t(V));
  ref_linear(lnf.data(), W(ix_.wte), nullptr, logits_.data(), N, C, V);  // tied head
  probs_.resize(logits_.size());
  double loss = 0;
  for (int n = 0; n < N; n++) {
    const double* z = &logits_[size_t(n) * size_t(V)];
    double mx = -1e300, sum = 0;
    for (int v = 0; v < V; v++) mx = std::max(mx, z[v]);
    for (int v = 0; v < V; v++) sum += std::exp(z[v] - mx);
    for (int v = 0; v < V; v++) probs_[size_t(n) * size_t(V) + size_t(v)] = std::exp(z[v] - mx) / sum;
    loss += -(z[targets[size_t(n)]] - mx - std::log(sum));
  }
  return loss / N;
}

std::vector<double> Gpt2Ref::backward(const std::vector<double>& P) {
  const int B = B_, T = T_, C = s_.channels, NH = s_.heads, hs = C / NH, V = s_.vocab, N = B * T, L = s_.layers;
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
  for (int l = L - 1; l >= 0; l--) {
    const Layer& a = layers_[size_t(l)];
    const BlockTensors& bt = ix_.blocks[size_t(l)];
    // MLP: x_out = x_mid + dropout(proj(gelu(fc(ln2(x_mid)))))
    std::vector<double> dgelu(size_t(N * 4 * C), 0.0), dln2(size_t(N * C), 0.0), dproj(dx.size());
    for (size_t i = 0; i < dx.size(); i++)
      dproj[i] = dx[i] * keep(dropout_site_mlp_proj(l), uint32_t(i / C), uint32_t(i % C));
    ref_linear_back(a.gelu.data(), W(bt.fcprojw), dproj.data(), dgelu.data(), D(bt.fcprojw), D(bt.fcprojb), N, 4 * C,
                    C);
    for (size_t i = 0; i < dgelu.size(); i++) {
      dgelu[i] *= ref_gelu_tanh_grad(a.fc[i]);
    }
    ref_linear_back(a.ln2.data(), W(bt.fcw), dgelu.data(), dln2.data(), D(bt.fcw), D(bt.fcb), N, C, 4 * C);
    ref_layernorm_back(a.x_mid.data(), W(bt.ln2w), a.ln2_mean.data(), a.ln2_rstd.data(), dln2.data(), dx.data(),
                       D(bt.ln2w), D(bt.ln2b), N, C);
    // Attention: x_mid = x_in + dropout(proj(attn(ln1(x_in)))), the probabilities dropped out too
    std::vector<double> dctx(size_t(N * C), 0.0), dq(size_t(N * C), 0.0), dk(size_t(N * C), 0.0),
        dv(size_t(N * C), 0.0);
    for (size_t i = 0; i < dx.size(); i++)
      dproj[i] = dx[i] * keep(dropout_site_attn_proj(l), uint32_t(i / C), uint32_t(i % C));
    ref_linear_back(a.ctx.data(), W(bt.projw), dproj.data(), dctx.data(), D(bt.projw), D(bt.projb), N, C, C);
    const double scale = 1.0 / std::sqrt(double(hs));
    for (int b = 0; b < B; b++)
      for (int h = 0; h < NH; h++)
        for (int i = 0; i < T; i++) {
          const double* row = &a.att[size_t(((b * NH + h) * T + i) * T)];
          const double* z = &a.att_keep[size_t(((b * NH + h) * T + i) * T)];
          std::vector<double> dp(size_t(i + 1));
          double dot = 0;
          for (int j = 0; j <= i; j++) {
            double s = 0;
            for (int e = 0; e < hs; e++) {
              s += dctx[size_t((b * T + i) * C + h * hs + e)] * a.v[size_t((b * T + j) * C + h * hs + e)];
              dv[size_t((b * T + j) * C + h * hs + e)] += z[j] * row[j] * dctx[size_t((b * T + i) * C + h * hs + e)];
            }
            dp[size_t(j)] = z[j] * s;
            dot += dp[size_t(j)] * row[j];
          }
          for (int j = 0; j <= i; j++) {
            const double ds = row[j] * (dp[size_t(j)] - dot) * scale;
            for (int e = 0; e < hs; e++) {
              dq[size_t((b * T + i) * C + h * hs + e)] += ds * a.k[size_t((b * T + j) * C + h * hs + e)];
              dk[size_t((b * T + j) * C + h * hs + e)] += ds * a.q[size_t((b * T + i) * C + h * hs + e)];
            }
          }
        }
    std::vector<double> dln1(size_t(N * C), 0.0);
    if (s_.separate_qkv) {
      ref_linear_back(a.ln1.data(), W(bt.qkvw[0]), dq.data(), dln1.data(), D(bt.qkvw[0]), D(bt.qkvb[0]), N, C, C);
      ref_linear_back(a.ln1.data(), W(bt.qkvw[1]), dk.data(), dln1.data(), D(bt.qkvw[1]), D(bt.qkvb[1]), N, C, C);
      ref_linear_back(a.ln1.data(), W(bt.qkvw[2]), dv.data(), dln1.data(), D(bt.qkvw[2]), D(bt.qkvb[2]), N, C, C);
    } else {
      std::vector<double> dqkv(size_t(N * 3 * C));
      for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
          dqkv[size_t(n * 3 * C + c)] = dq[size_t(n * C + c)];
          dqkv[size_t(n * 3 * C + C + c)] = dk[size_t(n * C + c)];
          dqkv[size_t(n * 3 * C + 2 * C + c)] = dv[size_t(n * C + c)];
        }
      ref_linear_back(a.ln1.data(), W(bt.qkvw[0]), dqkv.data(), dln1.data(), D(bt.qkvw[0]), D(bt.qkvb[0]), N, C, 3 * C);
    }
    ref_layernorm_back(a.x_in.data(), W(bt.ln1w), a.ln1_mean.data(), a.ln1_rstd.data(), dln1.data(), dx.data(),
                       D(bt.ln1w), D(bt.ln1b), N, C);
  }
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++) {
      const double g = dx[size_t(n * C + c)] * keep(dropout_site_embedding(), n, c);
      D(ix_.wte)[tokens_[size_t(n)] * C + c] += g;
      D(ix_.wpe)[(n % T) * C + c] += g;
    }
  return G;
}

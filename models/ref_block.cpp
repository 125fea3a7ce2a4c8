// The CPU reference block (see ref_block.h). Plain loops in double precision; the order of every sum is
// part of the contract: GPT-2's reference results must not change by a bit when it is built from blocks.
#include "models/ref_block.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

RefBlock::RefBlock(const BlockShape& s, const BlockTensors& ix, const ParamTable& t, BlockSites sites)
    : s_(s), sites_(sites) {
  CHECK(s.heads >= 1 && s.channels % s.heads == 0);
  auto off = [&](int i) { return i < 0 ? int64_t(-1) : t[i].offset; };
  ln1w_ = off(ix.ln1w);
  ln1b_ = off(ix.ln1b);
  for (int k = 0; k < 3; k++) {
    qkvw_[k] = off(ix.qkvw[k]);
    qkvb_[k] = off(ix.qkvb[k]);
  }
  projw_ = off(ix.projw);
  projb_ = off(ix.projb);
  ln2w_ = off(ix.ln2w);
  ln2b_ = off(ix.ln2b);
  fcw_ = off(ix.fcw);
  fcb_ = off(ix.fcb);
  fcprojw_ = off(ix.fcprojw);
  fcprojb_ = off(ix.fcprojb);
}

double RefBlock::gelu(double u) const { return s_.gelu == Gelu::kErf ? ref_gelu_erf(u) : ref_gelu_tanh(u); }
double RefBlock::gelu_grad(double u) const {
  return s_.gelu == Gelu::kErf ? ref_gelu_erf_grad(u) : ref_gelu_tanh_grad(u);
}

void RefBlock::forward(const double* P, const RefDropout& drop, int B, int T, double* x, RefBlockActs* a) const {
  const int C = s_.channels, N = B * T;
  const size_t NC = size_t(N) * size_t(C);
  a->B = B;
  a->T = T;
  a->x_in.assign(x, x + NC);
  a->ln1.resize(NC);
  a->ln1_mean.resize(size_t(N));
  a->ln1_rstd.resize(size_t(N));
  ref_layernorm(x, P + ln1w_, P + ln1b_, a->ln1.data(), a->ln1_mean.data(), a->ln1_rstd.data(), N, C, s_.ln_eps);
  qkv_forward(P, a);
  attention_forward(drop, a);
  std::vector<double> proj(NC);
  ref_linear(a->ctx.data(), P + projw_, P + projb_, proj.data(), N, C, C);
  add_dropped(drop, sites_.attn_proj, proj, x);
  a->x_mid.assign(x, x + NC);
  a->ln2.resize(NC);
  a->ln2_mean.resize(size_t(N));
  a->ln2_rstd.resize(size_t(N));
  ref_layernorm(x, P + ln2w_, P + ln2b_, a->ln2.data(), a->ln2_mean.data(), a->ln2_rstd.data(), N, C, s_.ln_eps);
  mlp_forward(P, a, &proj);
  add_dropped(drop, sites_.mlp_proj, proj, x);
}

// q, k, v (B*T, C) each from LN1's output: three (C, C) matrices, or one (3C, C) whose rows are q's, k's, v's.
void RefBlock::qkv_forward(const double* P, RefBlockActs* a) const {
  const int C = s_.channels, N = a->B * a->T;
  const double* x = a->ln1.data();
  a->q.resize(a->ln1.size());
  a->k.resize(a->ln1.size());
  a->v.resize(a->ln1.size());
  if (s_.separate_qkv) {
    ref_linear(x, P + qkvw_[0], P + qkvb_[0], a->q.data(), N, C, C);
    ref_linear(x, P + qkvw_[1], P + qkvb_[1], a->k.data(), N, C, C);
    ref_linear(x, P + qkvw_[2], P + qkvb_[2], a->v.data(), N, C, C);
    return;
  }
  std::vector<double> qkv(size_t(N) * 3 * size_t(C));
  ref_linear(x, P + qkvw_[0], P + qkvb_[0], qkv.data(), N, C, 3 * C);
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++) {
      a->q[size_t(n * C + c)] = qkv[size_t(n * 3 * C + c)];
      a->k[size_t(n * C + c)] = qkv[size_t(n * 3 * C + C + c)];
      a->v[size_t(n * C + c)] = qkv[size_t(n * 3 * C + 2 * C + c)];
    }
}

// Per (batch, head, query): softmax(q k^T / sqrt(hs)) over the keys the mask lets it see, the
// probabilities dropped out (row (b NH + h) T + i of the attention site, column the key), times v.
void RefBlock::attention_forward(const RefDropout& drop, RefBlockActs* a) const {
  const int B = a->B, T = a->T, C = s_.channels, NH = s_.heads, hs = C / NH;
  a->att.assign(size_t(B * NH * T * T), 0.0);  // the whole matrix: the reference runs at tiny T
  a->att_keep.assign(a->att.size(), 0.0);
  a->ctx.assign(a->q.size(), 0.0);
  const double scale = 1.0 / std::sqrt(double(hs));
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int i = 0; i < T; i++) {
        const int nk = keys(i, T);
        double* row = &a->att[size_t(((b * NH + h) * T + i) * T)];
        double mx = -1e300;
        for (int j = 0; j < nk; j++) {
          double d = 0;
          for (int e = 0; e < hs; e++)
            d += a->q[size_t((b * T + i) * C + h * hs + e)] * a->k[size_t((b * T + j) * C + h * hs + e)];
          row[j] = d * scale;
          mx = std::max(mx, row[j]);
        }
        double sum = 0;
        for (int j = 0; j < nk; j++) sum += row[j] = std::exp(row[j] - mx);
        for (int j = 0; j < nk; j++) row[j] /= sum;
        double* z = &a->att_keep[size_t(((b * NH + h) * T + i) * T)];
        for (int j = 0; j < nk; j++) z[j] = drop.keep(sites_.attention, uint32_t((b * NH + h) * T + i), j);
        for (int j = 0; j < nk; j++)
          for (int e = 0; e < hs; e++)
            a->ctx[size_t((b * T + i) * C + h * hs + e)] += z[j] * row[j] * a->v[size_t((b * T + j) * C + h * hs + e)];
      }
}

// out (B*T, C) = fc_proj(gelu(fc(ln2))), keeping fc's output and the GELU's.
void RefBlock::mlp_forward(const double* P, RefBlockActs* a, std::vector<double>* out) const {
  const int C = s_.channels, H = s_.hidden, N = a->B * a->T;
  a->fc.resize(size_t(N) * size_t(H));
  a->gelu.resize(a->fc.size());
  ref_linear(a->ln2.data(), P + fcw_, P + fcb_, a->fc.data(), N, C, H);
  for (size_t i = 0; i < a->fc.size(); i++) a->gelu[i] = gelu(a->fc[i]);
  ref_linear(a->gelu.data(), P + fcprojw_, P + fcprojb_, out->data(), N, H, C);
}

// x += dropout(y) for a projection's output y (B*T, C): the residual add.
void RefBlock::add_dropped(const RefDropout& drop, uint32_t site, const std::vector<double>& y, double* x) const {
  const size_t C = size_t(s_.channels);
  for (size_t i = 0; i < y.size(); i++) x[i] += y[i] * drop.keep(site, uint32_t(i / C), uint32_t(i % C));
}

void RefBlock::backward(const double* P, const RefDropout& drop, const RefBlockActs& a, double* dx, double* G) const {
  mlp_backward(P, drop, a, dx, G);
  attention_backward(P, drop, a, dx, G);
}

// out = mid + dropout(fc_proj(gelu(fc(LN2(mid))))): dx becomes d(mid).
void RefBlock::mlp_backward(const double* P, const RefDropout& drop, const RefBlockActs& a, double* dx,
                            double* G) const {
  const int C = s_.channels, H = s_.hidden, N = a.B * a.T;
  const size_t NC = size_t(N) * size_t(C);
  std::vector<double> dgelu(size_t(N) * size_t(H), 0.0), dln2(NC, 0.0), dproj(NC);
  for (size_t i = 0; i < NC; i++)
    dproj[i] = dx[i] * drop.keep(sites_.mlp_proj, uint32_t(i / size_t(C)), uint32_t(i % size_t(C)));
  ref_linear_back(a.gelu.data(), P + fcprojw_, dproj.data(), dgelu.data(), G + fcprojw_, G + fcprojb_, N, H, C);
  for (size_t i = 0; i < dgelu.size(); i++) dgelu[i] *= gelu_grad(a.fc[i]);
  ref_linear_back(a.ln2.data(), P + fcw_, dgelu.data(), dln2.data(), G + fcw_, G + fcb_, N, C, H);
  ref_layernorm_back(a.x_mid.data(), P + ln2w_, a.ln2_mean.data(), a.ln2_rstd.data(), dln2.data(), dx, G + ln2w_,
                     G + ln2b_, N, C);
}

// mid = in + dropout(proj(attention(LN1(in)))): dx becomes d(in).
void RefBlock::attention_backward(const double* P, const RefDropout& drop, const RefBlockActs& a, double* dx,
                                  double* G) const {
  const int C = s_.channels, N = a.B * a.T;
  const size_t NC = size_t(N) * size_t(C);
  std::vector<double> dproj(NC), dctx(NC, 0.0), dq(NC, 0.0), dk(NC, 0.0), dv(NC, 0.0), dln1(NC, 0.0);
  for (size_t i = 0; i < NC; i++)
    dproj[i] = dx[i] * drop.keep(sites_.attn_proj, uint32_t(i / size_t(C)), uint32_t(i % size_t(C)));
  ref_linear_back(a.ctx.data(), P + projw_, dproj.data(), dctx.data(), G + projw_, G + projb_, N, C, C);
  attention_core_backward(a, dctx, &dq, &dk, &dv);
  qkv_backward(P, a, dq, dk, dv, dln1.data(), G);
  ref_layernorm_back(a.x_in.data(), P + ln1w_, a.ln1_mean.data(), a.ln1_rstd.data(), dln1.data(), dx, G + ln1w_,
                     G + ln1b_, N, C);
}

// From d(ctx) to d(q), d(k), d(v) through the (dropped-out) softmax probabilities.
void RefBlock::attention_core_backward(const RefBlockActs& a, const std::vector<double>& dctx, std::vector<double>* dq,
                                       std::vector<double>* dk, std::vector<double>* dv) const {
  const int B = a.B, T = a.T, C = s_.channels, NH = s_.heads, hs = C / NH;
  const double scale = 1.0 / std::sqrt(double(hs));
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int i = 0; i < T; i++) {
        const int nk = keys(i, T);
        const double* row = &a.att[size_t(((b * NH + h) * T + i) * T)];
        const double* z = &a.att_keep[size_t(((b * NH + h) * T + i) * T)];
        std::vector<double> dp(static_cast<size_t>(nk));  // d(the probabilities before their dropout)
        double dot = 0;
        for (int j = 0; j < nk; j++) {
          double s = 0;
          for (int e = 0; e < hs; e++) {
            s += dctx[size_t((b * T + i) * C + h * hs + e)] * a.v[size_t((b * T + j) * C + h * hs + e)];
            (*dv)[size_t((b * T + j) * C + h * hs + e)] += z[j] * row[j] * dctx[size_t((b * T + i) * C + h * hs + e)];
          }
          dp[size_t(j)] = z[j] * s;
          dot += dp[size_t(j)] * row[j];
        }
        // through the softmax: ds_ij = p_ij (dp_ij - sum_k p_ik dp_ik), then the 1 / sqrt(hs) of the scores
        for (int j = 0; j < nk; j++) {
          const double ds = row[j] * (dp[size_t(j)] - dot) * scale;
          for (int e = 0; e < hs; e++) {
            (*dq)[size_t((b * T + i) * C + h * hs + e)] += ds * a.k[size_t((b * T + j) * C + h * hs + e)];
            (*dk)[size_t((b * T + j) * C + h * hs + e)] += ds * a.q[size_t((b * T + i) * C + h * hs + e)];
          }
        }
      }
}

// d(q), d(k), d(v) back through their projections: the weight and bias gradients, and d(LN1's output).
void RefBlock::qkv_backward(const double* P, const RefBlockActs& a, const std::vector<double>& dq,
                            const std::vector<double>& dk, const std::vector<double>& dv, double* dln1,
                            double* G) const {
  const int C = s_.channels, N = a.B * a.T;
  const double* x = a.ln1.data();
  if (s_.separate_qkv) {
    ref_linear_back(x, P + qkvw_[0], dq.data(), dln1, G + qkvw_[0], G + qkvb_[0], N, C, C);
    ref_linear_back(x, P + qkvw_[1], dk.data(), dln1, G + qkvw_[1], G + qkvb_[1], N, C, C);
    ref_linear_back(x, P + qkvw_[2], dv.data(), dln1, G + qkvw_[2], G + qkvb_[2], N, C, C);
    return;
  }
  std::vector<double> dqkv(size_t(N) * 3 * size_t(C));
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++) {
      dqkv[size_t(n * 3 * C + c)] = dq[size_t(n * C + c)];
      dqkv[size_t(n * 3 * C + C + c)] = dk[size_t(n * C + c)];
      dqkv[size_t(n * 3 * C + 2 * C + c)] = dv[size_t(n * C + c)];
    }
  ref_linear_back(x, P + qkvw_[0], dqkv.data(), dln1, G + qkvw_[0], G + qkvb_[0], N, C, 3 * C);
}

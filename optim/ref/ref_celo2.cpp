// CELO2 reference (celo2.md 5): one step over every tensor, the learned path of one tensor, and the
// AdamW side path with its own moments. ELO_CELO2 differs only in the AdamW path (ref_elo_celo2.cpp).
#include "optim/ref/ref_celo2.h"

#include <cmath>

#include "optim/lopt/lo_record16.h"

RefCelo2::RefCelo2(const ParamTable& t, const OptimOptions& o, const Celo2Options& h, const Celo2Weights& w,
                   std::string name, bool own_adam, Celo2Trace* trace)
    : RefOptimizer(t, o), h_(h), w_(w), name_(std::move(name)), trace_(trace), dec_(celo2_decays()) {
  const TieRule tie = parse_tie_rule(h.tie, kCelo2PyloTie);
  lo_.resize(size_t(t.size()));
  adam_m_.resize(lo_.size());
  adam_v_.resize(lo_.size());
  for (const auto& ti : t.tensors()) {
    const size_t i = size_t(ti.index);
    if (own_adam && celo2_uses_adamw(ti, h)) {
      adam_m_[i].assign(size_t(ti.numel), 0.0f);
      adam_v_[i].assign(size_t(ti.numel), 0.0f);
    } else {
      lo_[i] = std::make_unique<RefLoTensor>(ti.shape, tie);
    }
  }
}

void RefCelo2::step(std::vector<float>& params, const std::vector<float>& grads, float gs, float) {
  const float clip = h_.clip_grad ? ref_global_clip_scale(table_, grads, gs, h_.clip_norm) : 1.0f;
  const double lr = h_.lr * opts_.schedule.factor(t_);
  t_++;  // AdamW's bias corrections count this step
  if (trace_) {
    for (auto* v : {&trace_->direction, &trace_->magnitude, &trace_->d, &trace_->ns, &trace_->step})
      v->assign(size_t(table_.total_elems()), 0.0f);
    trace_->inputs.assign(size_t(table_.total_elems()) * 30, 0.0f);
  }
  const float cv = float(h_.grad_clip_val);
  for (const auto& ti : table_.tensors()) {
    // 5.1: the global clip factor (applied only when it is not 1, as PyLO does), then the clamp.
    std::vector<float> g(static_cast<size_t>(ti.numel));
    for (int64_t i = 0; i < ti.numel; i++) {
      float x = grads[size_t(ti.offset + i)] * gs;
      if (clip != 1.0f) x *= clip;
      g[size_t(i)] = clamp_keep_nan(x, -cv, cv);
    }
    float* p = &params[size_t(ti.offset)];
    if (celo2_uses_adamw(ti, h_))
      adamw_tensor(ti, p, g, float(h_.adam_lr_mult * lr), ti.decay ? float(h_.adam_wd()) : 0.0f);
    else
      learned_tensor(ti, p, g, float(lr), ti.decay ? float(h_.weight_decay) : 0.0f);
  }
}

void RefCelo2::adamw_tensor(const TensorInfo& ti, float* p, const std::vector<float>& g, float lr, float wd) {
  std::vector<float>& m = adam_m_[size_t(ti.index)];
  std::vector<float>& v = adam_v_[size_t(ti.index)];
  const float b1 = float(h_.adam_beta1), b2 = float(h_.adam_beta2);
  const float w1 = float(1.0 - h_.adam_beta1), w2 = float(1.0 - h_.adam_beta2);
  for (size_t i = 0; i < g.size(); i++) {  // PyLO: mul_(beta).add_(g, alpha=1-beta), addcmul_(g, g, 1-beta)
    m[i] = m[i] * b1 + w1 * g[i];
    v[i] = v[i] * b2 + w2 * g[i] * g[i];
  }
  celo2_adam_apply({h_.adam_beta1, h_.adam_beta2, h_.adam_eps}, t_, lr, wd, p, m.data(), v.data(), ti.numel);
}

namespace {
// Elements per slice of the last two axes: matrices are normalised and orthogonalised slice by slice
// (celo2.md 5.7, 5.9.1); a vector is one slice.
int64_t slice_size(const TensorInfo& ti) { return ti.ndim() >= 2 ? ti.rows() * ti.cols() : ti.numel; }

float rms(const float* p, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += double(p[i]) * p[i];
  return std::sqrt(float(s / double(n)) + 1e-9f);
}
}  // namespace

void RefCelo2::learned_tensor(const TensorInfo& ti, float* p, const std::vector<float>& g, float lr, float wd) {
  RefLoTensor& s = *lo_[size_t(ti.index)];
  // 5.4, 5.5; with bf16 records the draws of this step (t_ counts it already)
  const uint64_t key = lo_r16_tensor_key(uint64_t(t_ - 1), uint32_t(ti.index));
  s.update(g, dec_, h_.bf16_record ? &key : nullptr);
  const int64_t n = ti.numel, slice = slice_size(ti);
  const int nf = s.fd.factored ? 30 : 15;
  // Pass 1: each channel's mean square over each slice (5.7).
  std::vector<double> sq(size_t(n / slice * nf), 0.0);
  float x[30];
  for (int64_t i = 0; i < n; i++) {
    celo2_features(s, i, g[size_t(i)], p[i], x);
    double* q = &sq[size_t(i / slice * nf)];
    for (int c = 0; c < nf; c++) q[c] += double(x[c]) * x[c];
  }
  std::vector<float> scale(sq.size());
  for (size_t j = 0; j < sq.size(); j++) scale[j] = 1.0f / std::sqrt(1e-9f + float(sq[j] / double(slice)));
  // Pass 2: the MLP's direction, times exp(exp_mult magnitude) (5.8, 5.9).
  const float ps = h_.param_scale_mult ? rms(p, n) : 1.0f;
  std::vector<double> D(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i++) {
    celo2_features(s, i, g[size_t(i)], p[i], x);
    for (int c = 0; c < nf; c++) x[c] *= scale[size_t(i / slice * nf + c)];
    float out[8];
    celo2_mlp(w_, x, nf, out);
    const float mag = std::exp(out[1] * float(h_.exp_mult));
    D[size_t(i)] = h_.param_scale_mult ? out[0] * (ps * mag) : out[0] * mag;
    if (!trace_) continue;
    const size_t at = size_t(ti.offset + i);
    std::copy(x, x + nf, &trace_->inputs[at * 30]);
    trace_->direction[at] = out[0];
    trace_->magnitude[at] = out[1];
    trace_->d[at] = float(D[size_t(i)]);
  }
  // Newton-Schulz and the second RMS normalisation, slice by slice (5.9.1).
  const bool ns = h_.orthogonalize && ti.ndim() >= 2;
  std::vector<float> u(static_cast<size_t>(n));
  for (int64_t b = 0; b < n / slice; b++) {
    std::vector<double> X(D.begin() + b * slice, D.begin() + (b + 1) * slice);
    if (ns) X = celo2_newton_schulz(X, ti.rows(), ti.cols(), h_);
    double q = 0;
    for (double e : X) q += e * e;
    const double r = h_.rmsmult / std::sqrt(1e-9 + q / double(slice));
    for (int64_t j = 0; j < slice; j++) {
      u[size_t(b * slice + j)] = float(X[size_t(j)] * r);
      if (trace_) trace_->ns[size_t(ti.offset + b * slice + j)] = float(X[size_t(j)]);
    }
  }
  // 5.9: p -= lr (u + wd p), with p on the right the value before the step.
  for (int64_t i = 0; i < n; i++) {
    p[i] = p[i] - lr * (u[size_t(i)] + wd * p[i]);
    if (trace_) trace_->step[size_t(ti.offset + i)] = u[size_t(i)];
  }
}

std::vector<RefOptimizer::StateVec> RefCelo2::state_vectors() {
  std::vector<StateVec> out;
  for (const auto& ti : table_.tensors()) {
    const size_t i = size_t(ti.index);
    if (lo_[i])
      for (const auto& [name, v] : lo_[i]->state()) out.push_back({ti.name + "." + name, v});
    if (!adam_m_[i].empty()) {
      out.push_back({ti.name + ".adam_m", &adam_m_[i]});
      out.push_back({ti.name + ".adam_v", &adam_v_[i]});
    }
  }
  return out;
}

std::unique_ptr<RefOptimizer> make_ref_celo2(const ParamTable& t, const OptimOptions& o, const Celo2Weights& w,
                                             Celo2Trace* trace) {
  return std::make_unique<RefCelo2>(t, o, o.celo2, w, "celo2", true, trace);
}

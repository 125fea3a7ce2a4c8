// small_fc_lopt / μLO reference (small_fc_lopt.md 3): accumulators, Adafactor factors, the 39 features
// with per-tensor normalisation of the first 28, the 39-32-32-2 MLP and PyLO's output rule.
#include <cmath>

#include "optim/lopt/lo_record16.h"
#include "optim/ref/ref_lopt.h"

std::vector<int64_t> NdShape::coords(int64_t flat) const {
  std::vector<int64_t> c(shape.size());
  for (int k = int(shape.size()) - 1; k >= 0; k--) {
    c[size_t(k)] = flat % shape[size_t(k)];
    flat /= shape[size_t(k)];
  }
  return c;
}

int64_t NdShape::flat_without(const std::vector<int64_t>& c, int drop_a, int drop_b) const {
  int64_t f = 0;
  for (int k = 0; k < int(shape.size()); k++)
    if (k != drop_a && k != drop_b) f = f * shape[size_t(k)] + c[size_t(k)];
  return f;
}

int64_t NdShape::count_without(int drop_a, int drop_b) const {
  int64_t n = 1;
  for (int k = 0; k < int(shape.size()); k++)
    if (k != drop_a && k != drop_b) n *= shape[size_t(k)];
  return n;
}

float mup_scale(const TensorInfo& t, bool mup) {
  if (!mup || t.role != Role::Hidden || t.ndim() < 2) return 1.0f;
  return 1.0f / float(t.shape[1]);
}

namespace {
constexpr double kT[11] = {1, 3, 10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000};

// The 28 normalisable features of element i (small_fc_lopt.md 3.5), from the updated state: g, p, m_k, v,
// m_k rho, rho (rho = rsqrt(v + 1e-6)), g fg_k, R_k, C_k, rsqrt(R_k + 1e-8), rsqrt(C_k + 1e-8), m_k fm_k.
void features(const RefLoTensor& s, int64_t i, float g, float p, float* x) {
  const RefLoTensor::Elem e = s.elem(i, 1e-6f);
  const float rho = 1.0f / std::sqrt(s.v[size_t(i)] + 1e-6f);
  x[0] = g;
  x[1] = p;
  x[5] = s.v[size_t(i)];
  x[9] = rho;
  for (int k = 0; k < 3; k++) {
    const float m = s.m[k][size_t(i)];
    x[2 + k] = m;
    x[6 + k] = m * rho;
    x[10 + k] = g * e.fg[k];
    x[13 + k] = e.row[k];
    x[16 + k] = e.col[k];
    x[19 + k] = 1.0f / std::sqrt(e.row[k] + 1e-8f);
    x[22 + k] = 1.0f / std::sqrt(e.col[k] + 1e-8f);
    x[25 + k] = m * e.fm[k];
  }
}
}  // namespace

void small_fc_time_features(int64_t t, float* tau) {
  for (int j = 0; j < 11; j++) tau[j] = std::tanh(float(t) / float(kT[j]) - 1.0f);
}

void small_fc_outputs(const SmallFcWeights& w, const RefLoTensor& s, const float* g, const float* p, int64_t n,
                      const float* tau, float* dir, float* mag) {
  // Pass 1: per-channel second moments over the tensor (3.6).
  double sq[28] = {0};
  float x[28];
  for (int64_t i = 0; i < n; i++) {
    features(s, i, g[i], p[i], x);
    for (int ch = 0; ch < 28; ch++) sq[ch] += double(x[ch]) * x[ch];
  }
  float sc[28];
  for (int ch = 0; ch < 28; ch++) sc[ch] = 1.0f / std::sqrt(1e-5f + float(sq[ch] / double(n)));
  // Pass 2: the 39-32-32-2 ReLU MLP on the normalised features and the 11 time features (3.7).
  for (int64_t i = 0; i < n; i++) {
    features(s, i, g[i], p[i], x);
    float in[39], h1[32], h2[32];
    for (int ch = 0; ch < 28; ch++) in[ch] = x[ch] * sc[ch];
    for (int j = 0; j < 11; j++) in[28 + j] = tau[j];
    // The MLP accumulates in double: the reference should carry less rounding than what it checks.
    for (int o = 0; o < 32; o++) {
      double a = w.b0[size_t(o)];
      for (int k = 0; k < 39; k++) a += double(w.w0[size_t(o * 39 + k)]) * in[k];
      h1[o] = std::max(float(a), 0.0f);
    }
    for (int o = 0; o < 32; o++) {
      double a = w.b1[size_t(o)];
      for (int k = 0; k < 32; k++) a += double(w.w1[size_t(o * 32 + k)]) * h1[k];
      h2[o] = std::max(float(a), 0.0f);
    }
    double dd = w.b2[0], mm = w.b2[1];
    for (int k = 0; k < 32; k++) {
      dd += double(w.w2[size_t(k)]) * h2[k];
      mm += double(w.w2[size_t(32 + k)]) * h2[k];
    }
    dir[i] = float(dd);
    mag[i] = float(mm);
  }
}

namespace {
class RefSmallFc : public RefOptimizer {
 public:
  RefSmallFc(const ParamTable& t, const OptimOptions& o, const SmallFcWeights& w)
      : RefOptimizer(t, o), w_(w), dec_(small_fc_decays()) {
    for (const auto& ti : t.tensors()) st_.emplace_back(ti.shape, parse_tie_rule(o.small_fc.tie, kSmallFcPyloTie));
  }

  void step(std::vector<float>& params, const std::vector<float>& grads, float gs, float) override {
    float tau[11];
    small_fc_time_features(t_, tau);
    for (const auto& ti : table_.tensors())
      step_tensor(ti, st_[size_t(ti.index)], &params[size_t(ti.offset)], &grads[size_t(ti.offset)], gs, tau);
    t_++;
  }

 private:
  void step_tensor(const TensorInfo& ti, RefLoTensor& s, float* p, const float* graw, float gs,
                   const float* tau) const {
    const SmallFcOptions& h = opts_.small_fc;
    const int64_t n = ti.numel;
    std::vector<float> g(static_cast<size_t>(n)), dir(g.size()), mag(g.size());
    for (int64_t i = 0; i < n; i++) g[size_t(i)] = graw[i] * gs;
    const uint64_t key = lo_r16_tensor_key(uint64_t(t_), uint32_t(ti.index));
    s.update(g, dec_, h.bf16_record ? &key : nullptr);  // 3.3, 3.4
    small_fc_outputs(w_, s, g.data(), p, n, tau, dir.data(), mag.data());
    // PyLO's output rule (3.8): the step, then the decoupled weight decay on the updated p.
    const float scale = mup_scale(ti, h.mup), lr = float(h.lr * opts_.schedule.factor(t_)) * scale;
    const float wd = ti.decay ? float(h.weight_decay) : 0.0f;
    for (int64_t i = 0; i < n; i++) {
      const float u = dir[size_t(i)] * std::exp(mag[size_t(i)] * float(h.exp_mult)) * float(h.step_mult);
      float pn = p[i] - lr * u;
      if (wd > 0) pn -= wd * lr * pn;
      p[i] = pn;
    }
  }

  SmallFcWeights w_;
  LoDecays dec_;
  std::vector<RefLoTensor> st_;
};
}  // namespace

std::unique_ptr<RefOptimizer> make_ref_small_fc(const ParamTable& t, const OptimOptions& o, const SmallFcWeights& w) {
  return std::make_unique<RefSmallFc>(t, o, w);
}

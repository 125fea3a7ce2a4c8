// small_fc_lopt / μLO reference (small_fc_lopt.md 3): accumulators, Adafactor factors, the 39 features
// with per-tensor normalisation of the first 28, the 39-32-32-2 MLP and PyLO's output rule.
#include <cmath>

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

SmallFcDecays small_fc_decays() {
  SmallFcDecays d;
  const float tm[3] = {0.15216392f, 0.14245212f, 0.06812963f}, tf[3] = {0.18621896f, -0.10864615f, -0.06185547f};
  const float nom[3] = {0.9f, 0.99f, 0.999f};
  for (int k = 0; k < 3; k++) {
    d.m[k] = learned_decay(nom[k], tm[k]);
    d.f[k] = learned_decay(nom[k], tf[k]);
  }
  d.v = learned_decay(0.999f, 0.01079706f);
  return d;
}

float mup_scale(const TensorInfo& t, bool mup) {
  if (!mup || t.role != Role::Hidden || t.ndim() < 2) return 1.0f;
  return 1.0f / float(t.shape[1]);
}

namespace {
constexpr double kT[11] = {1, 3, 10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000};

class RefSmallFc : public RefOptimizer {
 public:
  RefSmallFc(const ParamTable& t, const OptimOptions& o, const SmallFcWeights& w)
      : RefOptimizer(t, o), w_(w), dec_(small_fc_decays()) {
    const TieRule tie = parse_tie_rule(o.small_fc.tie);
    for (const auto& ti : t.tensors()) {
      St s;
      s.fd = factored_dims(ti.shape, tie);
      s.nd.shape = ti.shape;
      const size_t n = size_t(ti.numel);
      for (int k = 0; k < 3; k++) s.m[k].assign(n, 0.0f);
      s.v.assign(n, 0.0f);
      for (int k = 0; k < 3; k++) {
        if (s.fd.factored) {
          s.R[k].assign(size_t(s.nd.count_without(s.fd.d0)), 0.0f);
          s.C[k].assign(size_t(s.nd.count_without(s.fd.d1)), 0.0f);
        } else {
          s.V[k].assign(n, 0.0f);
        }
      }
      st_.push_back(std::move(s));
    }
  }

  void step(std::vector<float>& params, const std::vector<float>& grads, float gs, float) override {
    const SmallFcOptions& h = opts_.small_fc;
    const float t = float(t_);
    float tau[11];
    for (int j = 0; j < 11; j++) tau[j] = std::tanh(t / float(kT[j]) - 1.0f);
    for (const auto& ti : table_.tensors()) step_tensor(ti, st_[size_t(ti.index)], &params[size_t(ti.offset)],
                                                        &grads[size_t(ti.offset)], gs, tau, h);
    t_++;
  }

 private:
  struct St {
    FactoredDims fd;
    NdShape nd;
    std::vector<float> m[3], v, R[3], C[3], V[3];
  };

  // The 28 normalisable features of element i (small_fc_lopt.md 3.5), from the updated state.
  void features(const St& s, int64_t i, const std::vector<int64_t>& c, float g, float p, const float* rf_at,
                const float* cf_at, float* x) const {
    const float rho = 1.0f / std::sqrt(s.v[size_t(i)] + 1e-6f);
    x[0] = g;
    x[1] = p;
    for (int k = 0; k < 3; k++) x[2 + k] = s.m[k][size_t(i)];
    x[5] = s.v[size_t(i)];
    for (int k = 0; k < 3; k++) x[6 + k] = s.m[k][size_t(i)] * rho;
    x[9] = rho;
    for (int k = 0; k < 3; k++) {
      float row, col, sg, sm;
      if (s.fd.factored) {
        int64_t ri = s.nd.flat_without(c, s.fd.d0), ci = s.nd.flat_without(c, s.fd.d1);
        row = s.R[k][size_t(ri)];
        col = s.C[k][size_t(ci)];
        sg = sm = rf_at[k] * cf_at[k];
      } else {
        row = col = s.V[k][size_t(i)];
        sg = 1.0f / std::sqrt(std::max(s.V[k][size_t(i)] + 1e-9f, 1e-9f));
        sm = std::pow(s.V[k][size_t(i)] + 1e-6f, -0.5f);
      }
      x[10 + k] = g * sg;
      x[13 + k] = row;
      x[16 + k] = col;
      x[19 + k] = 1.0f / std::sqrt(row + 1e-8f);
      x[22 + k] = 1.0f / std::sqrt(col + 1e-8f);
      x[25 + k] = s.m[k][size_t(i)] * sm;
    }
  }

  void step_tensor(const TensorInfo& ti, St& s, float* p, const float* graw, float gs, const float* tau,
                   const SmallFcOptions& h) const {
    const int64_t n = ti.numel;
    std::vector<float> g(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; i++) g[size_t(i)] = graw[i] * gs;
    // Accumulators (3.3).
    for (int64_t i = 0; i < n; i++) {
      const float gi = g[size_t(i)];
      for (int k = 0; k < 3; k++) s.m[k][size_t(i)] = dec_.m[k] * s.m[k][size_t(i)] + (1.0f - dec_.m[k]) * gi;
      s.v[size_t(i)] = dec_.v * s.v[size_t(i)] + (1.0f - dec_.v) * gi * gi;
      if (!s.fd.factored)
        for (int k = 0; k < 3; k++) s.V[k][size_t(i)] = dec_.f[k] * s.V[k][size_t(i)] + (1.0f - dec_.f[k]) * (gi * gi + 1e-30f);
    }
    std::vector<float> rf[3], cf[3];
    std::vector<int64_t> group;  // μR group of each R entry
    if (s.fd.factored) {
      const size_t nr = s.R[0].size(), nc = s.C[0].size();
      std::vector<double> rs(nr, 0.0), cs(nc, 0.0);
      for (int64_t i = 0; i < n; i++) {
        auto c = s.nd.coords(i);
        double q = double(g[size_t(i)]) * g[size_t(i)];
        rs[size_t(s.nd.flat_without(c, s.fd.d0))] += q;
        cs[size_t(s.nd.flat_without(c, s.fd.d1))] += q;
      }
      const double n0 = double(ti.shape[size_t(s.fd.d0)]), n1 = double(ti.shape[size_t(s.fd.d1)]);
      for (int k = 0; k < 3; k++) {
        for (size_t j = 0; j < nr; j++) s.R[k][j] = dec_.f[k] * s.R[k][j] + (1.0f - dec_.f[k]) * float(rs[j] / n0 + 1e-30);
        for (size_t j = 0; j < nc; j++) s.C[k][j] = dec_.f[k] * s.C[k][j] + (1.0f - dec_.f[k]) * float(cs[j] / n1 + 1e-30);
      }
      // μR: mean of R over its d1 axis, per combination of the other axes (3.4).
      NdShape rshape;
      for (int a = 0; a < ti.ndim(); a++)
        if (a != s.fd.d0) rshape.shape.push_back(ti.shape[size_t(a)]);
      const int d1r = s.fd.d1 > s.fd.d0 ? s.fd.d1 - 1 : s.fd.d1;
      const size_t ng = size_t(rshape.count_without(d1r));
      group.resize(nr);
      for (size_t j = 0; j < nr; j++) group[j] = rshape.flat_without(rshape.coords(int64_t(j)), d1r);
      for (int k = 0; k < 3; k++) {
        std::vector<double> mu(ng, 0.0);
        for (size_t j = 0; j < nr; j++) mu[size_t(group[j])] += s.R[k][j];
        for (auto& x : mu) x /= double(rshape.shape[size_t(d1r)]);
        rf[k].resize(nr);
        cf[k].resize(nc);
        for (size_t j = 0; j < nr; j++)
          rf[k][j] = 1.0f / std::sqrt(std::max(s.R[k][j] / (float(mu[size_t(group[j])]) + 1e-9f), 1e-9f));
        for (size_t j = 0; j < nc; j++) cf[k][j] = 1.0f / std::sqrt(std::max(s.C[k][j], 1e-9f));
      }
    }
    // Pass 1: per-channel second moments over the tensor (3.6).
    auto feat = [&](int64_t i, float* x) {
      auto c = s.nd.coords(i);
      float rfa[3] = {1, 1, 1}, cfa[3] = {1, 1, 1};
      if (s.fd.factored) {
        int64_t ri = s.nd.flat_without(c, s.fd.d0), ci = s.nd.flat_without(c, s.fd.d1);
        for (int k = 0; k < 3; k++) rfa[k] = rf[k][size_t(ri)], cfa[k] = cf[k][size_t(ci)];
      }
      features(s, i, c, g[size_t(i)], p[i], rfa, cfa, x);
    };
    double sq[28] = {0};
    float x[28];
    for (int64_t i = 0; i < n; i++) {
      feat(i, x);
      for (int ch = 0; ch < 28; ch++) sq[ch] += double(x[ch]) * x[ch];
    }
    float sc[28];
    for (int ch = 0; ch < 28; ch++) sc[ch] = 1.0f / std::sqrt(1e-5f + float(sq[ch] / double(n)));
    // Pass 2: MLP and update (3.7, 3.8).
    const float scale = mup_scale(ti, h.mup), lr = float(h.lr * opts_.schedule.factor(t_)) * scale;
    const float wd = ti.decay ? float(h.weight_decay) : 0.0f;
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; i++) {
      feat(i, x);
      float in[39], h1[32], h2[32];
      for (int ch = 0; ch < 28; ch++) in[ch] = x[ch] * sc[ch];
      for (int j = 0; j < 11; j++) in[28 + j] = tau[j];
      // The MLP accumulates in double: the reference should carry less rounding than what it checks.
      for (int o = 0; o < 32; o++) {
        double a = w_.b0[size_t(o)];
        for (int k = 0; k < 39; k++) a += double(w_.w0[size_t(o * 39 + k)]) * in[k];
        h1[o] = std::max(float(a), 0.0f);
      }
      for (int o = 0; o < 32; o++) {
        double a = w_.b1[size_t(o)];
        for (int k = 0; k < 32; k++) a += double(w_.w1[size_t(o * 32 + k)]) * h1[k];
        h2[o] = std::max(float(a), 0.0f);
      }
      double dd = w_.b2[0], mm = w_.b2[1];
      for (int k = 0; k < 32; k++) dd += double(w_.w2[size_t(k)]) * h2[k], mm += double(w_.w2[size_t(32 + k)]) * h2[k];
      const float d = float(dd), mag = float(mm);
      float u = d * std::exp(mag * float(h.exp_mult)) * float(h.step_mult);
      float pn = p[i] - lr * u;
      if (wd > 0) pn -= wd * lr * pn;
      out[size_t(i)] = pn;
    }
    std::copy(out.begin(), out.end(), p);
  }

  SmallFcWeights w_;
  SmallFcDecays dec_;
  std::vector<St> st_;
};
}  // namespace

std::unique_ptr<RefOptimizer> make_ref_small_fc(const ParamTable& t, const OptimOptions& o, const SmallFcWeights& w) {
  return std::make_unique<RefSmallFc>(t, o, w);
}

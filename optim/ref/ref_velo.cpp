// VeLO reference (velo.md 4): loss buffer and features, per-tensor LSTM inputs from the old
// accumulators, mixing layers + LSTM, candidate interpolation, 30 per-element features, 30-4-4-3 MLP,
// and the step lr_mult * dir * exp(0.001 mag) * 0.001 * rms(p), with PyLO's lr and weight decay.
#include <algorithm>
#include <cmath>

#include "optim/ref/ref_lopt.h"
#include "optim/ref/ref_velo.h"

VeloLossBuffer::VeloLossBuffer(int64_t num_steps) {
  const float stop = std::log10(float(num_steps));
  for (int j = 0; j < 10; j++) {
    float e = 1.0f + float(j) * (stop - 1.0f) / 9.0f;
    decay[j] = std::exp(-1.0f / std::pow(10.0f, e));
    means[j] = 0.0f;
    running_min[j] = 999999999999.0f;
  }
}

float VeloLossBuffer::update(float loss) {
  float cm_prev[10], approx_max = loss;
  for (int j = 0; j < 10; j++) cm_prev[j] = means[j] / (1.0f - std::pow(decay[j], float(it + 1)));
  if (it > 0) approx_max = *std::max_element(cm_prev, cm_prev + 10);
  const float lc = std::min(2.0f * std::fabs(approx_max), loss);
  for (int j = 0; j < 10; j++) {
    means[j] = decay[j] * means[j] + (1.0f - decay[j]) * lc;
    float cm = means[j] / (1.0f - std::pow(decay[j], float(it + 1)));
    running_min[j] = std::min(running_min[j], cm);
  }
  it++;
  return lc;
}

void VeloLossBuffer::features(float* f) const {
  float cm[10];
  for (int j = 0; j < 10; j++) cm[j] = means[j] / (1.0f - std::pow(decay[j], float(it)));
  for (int j = 0; j < 9; j++) {
    float num = cm[j] - running_min[j], den = std::max(1e-8f, cm[j + 1] - running_min[j]);
    f[j] = it <= 2 ? 0.0f : std::min(1.0f, std::max(-1.0f, num / den - 1.0f));
  }
}

void velo_fraction_features(double fraction, float* e) {
  static const float tau[9] = {0.03f, 0.1f, 0.2f, 0.4f, 0.6f, 0.8f, 0.9f, 1.0f, 1.1f};
  for (int j = 0; j < 9; j++) e[j] = std::tanh(10.0f * (float(fraction) - tau[j]));
}

float velo_log_abs(double x) { return 0.5f * std::min(5.0f, std::max(-5.0f, float(std::log(1e-8 + std::fabs(10.0 * x))))); }

int velo_rank_class(const std::vector<int64_t>& shape) {
  int r = 0;
  for (int64_t d : shape) r += d > 1;
  return r;
}

void velo_lstm_input(const float* shared18, const std::vector<int64_t>& shape, const float* p, const float* const* m,
                     const float* v, int64_t numel, float* row) {
  const double n = double(numel);
  double pp = 0;
  for (int64_t i = 0; i < numel; i++) pp += double(p[i]) * p[i];
  const double nm = 1.0 / std::sqrt(std::max(1e-9, pp / n));
  double mu[3], mean_v = 0;
  std::copy(shared18, shared18 + 18, row);
  for (int64_t i = 0; i < numel; i++) mean_v += v[i] * nm;
  mean_v /= n;
  row[18] = velo_log_abs(mean_v);
  const int rc = velo_rank_class(shape);
  for (int r = 0; r < 5; r++) row[19 + r] = rc == r ? 1.0f : 0.0f;
  for (int k = 0; k < 3; k++) {  // two-pass variances; var_rms is centred on the momentum mean (a quirk)
    double a = 0, vm = 0, vv = 0;
    for (int64_t i = 0; i < numel; i++) a += m[k][i] * nm;
    mu[k] = a / n;
    for (int64_t i = 0; i < numel; i++) {
      vm += (m[k][i] * nm - mu[k]) * (m[k][i] * nm - mu[k]);
      vv += (v[i] * nm - mu[k]) * (v[i] * nm - mu[k]);
    }
    row[24 + k] = velo_log_abs(vm / n);
    row[27 + k] = velo_log_abs(vv / n);
  }
}

void velo_lstm(const VeloWeights& w, int n, const float* X, float* h, float* c, float* controls, float* lr_mult) {
  const int H = 512;
  std::vector<float> A(size_t(n * H)), U(size_t(n * H)), pool(H, -1e30f);
  for (int i = 0; i < n; i++)
    for (int o = 0; o < H; o++) {
      double a = w.mix2_b[size_t(o)], u = w.final_b[size_t(o)];
      for (int k = 0; k < 30; k++) {
        a += double(w.mix2_w[size_t(o * 30 + k)]) * X[i * 30 + k];
        u += double(w.final_w[size_t(o * 30 + k)]) * X[i * 30 + k];
      }
      A[size_t(i * H + o)] = std::max(float(a), 0.0f);
      U[size_t(i * H + o)] = float(u);
      pool[size_t(o)] = std::max(pool[size_t(o)], A[size_t(i * H + o)]);
    }
  auto sig = [](float x) { return 1.0f / (1.0f + std::exp(-x)); };
  for (int i = 0; i < n; i++) {
    float in[1024];
    for (int o = 0; o < H; o++) in[o] = U[size_t(i * H + o)] + pool[size_t(o)], in[H + o] = h[i * H + o];
    float z[2048];
    for (int r = 0; r < 2048; r++) {
      double a = w.lstm_b[size_t(r)];
      for (int k = 0; k < 1024; k++) a += double(w.lstm_w[size_t(r) * 1024 + size_t(k)]) * in[k];
      z[r] = float(a);
    }
    for (int o = 0; o < H; o++) {  // gate blocks i, g, f, o; forget bias +1
      float ig = z[o], gg = z[H + o], fg = z[2 * H + o], og = z[3 * H + o];
      float cn = sig(fg + 1.0f) * c[i * H + o] + sig(ig) * std::tanh(gg);
      c[i * H + o] = cn;
      h[i * H + o] = sig(og) * std::tanh(cn);
    }
    for (int r = 0; r < 256; r++) {
      double a = w.ctrl_b[size_t(r)];
      for (int k = 0; k < H; k++) a += double(w.ctrl_w[size_t(r * H + k)]) * h[i * H + k];
      controls[i * 256 + r] = float(a);
    }
    double a = w.ss_b[0];
    for (int k = 0; k < H; k++) a += double(w.ss_w[size_t(k)]) * h[i * H + k];
    lr_mult[i] = float(a);
  }
}

namespace {
class RefVelo : public RefOptimizer {
 public:
  RefVelo(const ParamTable& t, const OptimOptions& o, const VeloWeights& w)
      : RefOptimizer(t, o), w_(w), loss_(o.velo.num_steps) {
    const TieRule tie = parse_tie_rule(o.velo.tie);
    for (const auto& ti : t.tensors()) {
      St s;
      s.fd = factored_dims(ti.shape, tie);
      s.nd.shape = ti.shape;
      const size_t n = size_t(ti.numel);
      for (int k = 0; k < 3; k++) {
        s.m[k].assign(n, 0.0f);
        if (s.fd.factored) {
          s.R[k].assign(size_t(s.nd.count_without(s.fd.d0)), 0.0f);
          s.C[k].assign(size_t(s.nd.count_without(s.fd.d1)), 0.0f);
        } else {
          s.V[k].assign(n, 0.0f);
        }
      }
      s.v.assign(n, 0.0f);
      st_.push_back(std::move(s));
    }
    h_.resize(size_t(t.size()) * 512);
    c_.resize(h_.size());
    for (int i = 0; i < t.size(); i++) {
      std::copy(w.init_h.begin(), w.init_h.end(), h_.begin() + i * 512);
      std::copy(w.init_c.begin(), w.init_c.end(), c_.begin() + i * 512);
    }
  }

  void step(std::vector<float>& params, const std::vector<float>& grads, float gs, float loss) override {
    const VeloOptions& h = opts_.velo;
    const int n_t = table_.size();
    loss_.update(loss);
    float shared[18];
    velo_fraction_features(double(t_) / double(h.num_steps), shared);
    loss_.features(shared + 9);
    // LSTM inputs from the old accumulators (4.3).
    std::vector<float> X(static_cast<size_t>(n_t * 30));
    for (const auto& ti : table_.tensors()) {
      const St& s = st_[size_t(ti.index)];
      const float* m[3] = {s.m[0].data(), s.m[1].data(), s.m[2].data()};
      velo_lstm_input(shared, ti.shape, &params[size_t(ti.offset)], m, s.v.data(), ti.numel, &X[size_t(ti.index * 30)]);
    }
    std::vector<float> controls(static_cast<size_t>(n_t * 256)), lr_mult(static_cast<size_t>(n_t));
    velo_lstm(w_, n_t, X.data(), h_.data(), c_.data(), controls.data(), lr_mult.data());
    for (const auto& ti : table_.tensors()) {
      float theta[159];
      for (int q = 0; q < 159; q++) {
        double a = 0;
        for (int j = 0; j < 256; j++) a += double(controls[size_t(ti.index * 256 + j)]) * w_.cand[size_t(j * 159 + q)];
        theta[q] = float(100.0 * a / 256.0);
      }
      step_tensor(ti, st_[size_t(ti.index)], &params[size_t(ti.offset)], &grads[size_t(ti.offset)], gs, theta,
                  lr_mult[size_t(ti.index)], h);
    }
    t_++;
  }

  const std::vector<float>& lstm_h() const { return h_; }

 private:
  struct St {
    FactoredDims fd;
    NdShape nd;
    std::vector<float> m[3], v, R[3], C[3], V[3];
  };

  void step_tensor(const TensorInfo& ti, St& s, float* p, const float* graw, float gs, const float* th, float lr_mult,
                   const VeloOptions& h) {
    static const float bm[3] = {0.9f, 0.99f, 0.999f};
    const int64_t n = ti.numel;
    std::vector<float> g(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; i++) g[size_t(i)] = std::min(1000.0f, std::max(-1000.0f, graw[i] * gs));
    for (int64_t i = 0; i < n; i++) {
      const float gi = g[size_t(i)];
      for (int k = 0; k < 3; k++) s.m[k][size_t(i)] = bm[k] * s.m[k][size_t(i)] + (1.0f - bm[k]) * gi;
      s.v[size_t(i)] = 0.999f * s.v[size_t(i)] + (1.0f - 0.999f) * gi * gi;
      if (!s.fd.factored)
        for (int k = 0; k < 3; k++) s.V[k][size_t(i)] = bm[k] * s.V[k][size_t(i)] + (1.0f - bm[k]) * (gi * gi + 1e-30f);
    }
    std::vector<float> rf[3], cf[3];
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
      NdShape rshape;
      for (int a = 0; a < ti.ndim(); a++)
        if (a != s.fd.d0) rshape.shape.push_back(ti.shape[size_t(a)]);
      const int d1r = s.fd.d1 > s.fd.d0 ? s.fd.d1 - 1 : s.fd.d1;
      std::vector<int64_t> group(nr);
      for (size_t j = 0; j < nr; j++) group[j] = rshape.flat_without(rshape.coords(int64_t(j)), d1r);
      for (int k = 0; k < 3; k++) {
        for (size_t j = 0; j < nr; j++) s.R[k][j] = bm[k] * s.R[k][j] + (1.0f - bm[k]) * float(rs[j] / n0 + 1e-30);
        for (size_t j = 0; j < nc; j++) s.C[k][j] = bm[k] * s.C[k][j] + (1.0f - bm[k]) * float(cs[j] / n1 + 1e-30);
        std::vector<double> mu(size_t(rshape.count_without(d1r)), 0.0);
        for (size_t j = 0; j < nr; j++) mu[size_t(group[j])] += s.R[k][j];
        for (auto& x : mu) x /= double(rshape.shape[size_t(d1r)]);
        rf[k].resize(nr);
        cf[k].resize(nc);
        for (size_t j = 0; j < nr; j++)
          rf[k][j] = 1.0f / std::sqrt(std::max(s.R[k][j] / (float(mu[size_t(group[j])]) + 1e-9f), 1e-9f));
        for (size_t j = 0; j < nc; j++) cf[k][j] = 1.0f / std::sqrt(std::max(s.C[k][j], 1e-9f));
      }
    }
    auto feat = [&](int64_t i, float* x) {
      const float gi = g[size_t(i)], sv = 1.0f / std::sqrt(s.v[size_t(i)] + 1e-6f);
      x[0] = gi;
      x[1] = std::min(0.1f, std::max(-0.1f, gi));
      x[2] = p[i];
      for (int k = 0; k < 3; k++) x[3 + k] = s.m[k][size_t(i)];
      x[6] = s.v[size_t(i)];
      for (int k = 0; k < 3; k++) x[7 + k] = s.m[k][size_t(i)] * sv;
      x[10] = sv;
      x[14] = gi * sv;
      int64_t ri = 0, ci = 0;
      if (s.fd.factored) {
        auto c = s.nd.coords(i);
        ri = s.nd.flat_without(c, s.fd.d0);
        ci = s.nd.flat_without(c, s.fd.d1);
      }
      for (int k = 0; k < 3; k++) {
        float row, col, fg, fm;
        if (s.fd.factored) {
          row = s.R[k][size_t(ri)];
          col = s.C[k][size_t(ci)];
          float f = rf[k][size_t(ri)] * cf[k][size_t(ci)];
          fg = gi * f;
          fm = s.m[k][size_t(i)] * f;
        } else {
          row = col = s.V[k][size_t(i)];
          fg = gi / std::sqrt(std::max(row + 1e-9f, 1e-9f));
          fm = s.m[k][size_t(i)] / std::sqrt(row);
        }
        x[11 + k] = fg;
        x[15 + k] = row;
        x[18 + k] = col;
        x[21 + k] = 1.0f / std::sqrt(row + 1e-8f);
        x[24 + k] = 1.0f / std::sqrt(col + 1e-8f);
        x[27 + k] = fm;
      }
    };
    double sq[30] = {0};
    float x[30];
    for (int64_t i = 0; i < n; i++) {
      feat(i, x);
      for (int ch = 0; ch < 30; ch++) sq[ch] += double(x[ch]) * x[ch];
    }
    float sc[30];
    for (int ch = 0; ch < 30; ch++) sc[ch] = 1.0f / std::sqrt(1e-5f + float(sq[ch] / double(n)));
    const float param_scale = std::sqrt(float(sq[2] / double(n)) + 1e-9f);
    const float lr = float(h.lr * opts_.schedule.factor(t_)), wd = ti.decay ? float(h.weight_decay) : 0.0f;
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; i++) {
      feat(i, x);
      float h1[4], h2[4];
      for (int o = 0; o < 4; o++) {  // double accumulation, as in the μLO reference
        double a = th[120 + o];
        for (int k = 0; k < 30; k++) a += double(th[o * 30 + k]) * (x[k] * sc[k]);
        h1[o] = std::max(float(a), 0.0f);
      }
      for (int o = 0; o < 4; o++) {
        double a = th[140 + o];
        for (int k = 0; k < 4; k++) a += double(th[124 + o * 4 + k]) * h1[k];
        h2[o] = std::max(float(a), 0.0f);
      }
      double dd = th[156], mm = th[157];
      for (int k = 0; k < 4; k++) dd += double(th[144 + k]) * h2[k], mm += double(th[148 + k]) * h2[k];
      const float d = float(dd), mag = float(mm);
      float stp = lr_mult * d * std::exp(0.001f * mag) * 0.001f * param_scale;
      float pn = p[i] - lr * stp;
      if (wd > 0) pn -= lr * wd * pn;
      out[size_t(i)] = pn;
    }
    std::copy(out.begin(), out.end(), p);
  }

  VeloWeights w_;
  VeloLossBuffer loss_;
  std::vector<St> st_;
  std::vector<float> h_, c_;
};
}  // namespace

std::unique_ptr<RefOptimizer> make_ref_velo(const ParamTable& t, const OptimOptions& o, const VeloWeights& w) {
  return std::make_unique<RefVelo>(t, o, w);
}

// VeLO reference (velo.md 4): loss buffer and features, per-tensor LSTM inputs from the old
// accumulators, mixing layers + LSTM, candidate interpolation, 30 per-element features, 30-4-4-3 MLP,
// and the step lr_mult * dir * exp(0.001 mag) * 0.001 * rms(p), with PyLO's lr and weight decay.
#include "optim/ref/ref_velo.h"

#include <algorithm>
#include <cmath>

#include "optim/lopt/lo_record16.h"
#include "optim/ref/ref_lopt.h"

VeloLossBuffer::VeloLossBuffer(int64_t num_steps) {
  velo_loss_decays(num_steps, decay);
  for (int j = 0; j < 10; j++) {
    means[j] = 0.0f;
    running_min[j] = kVeloLossMinStart;
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

float velo_log_abs(double x) {
  return 0.5f * std::min(5.0f, std::max(-5.0f, float(std::log(1e-8 + std::fabs(10.0 * x)))));
}

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
    for (int o = 0; o < H; o++) {
      in[o] = U[size_t(i * H + o)] + pool[size_t(o)];
      in[H + o] = h[i * H + o];
    }
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
  RefVelo(const ParamTable& t, const OptimOptions& o, const VeloWeights& w, VeloTrace* trace)
      : RefOptimizer(t, o), w_(w), loss_(o.velo.num_steps), trace_(trace) {
    dec_ = nominal_decays();
    for (const auto& ti : t.tensors()) st_.emplace_back(ti.shape, parse_tie_rule(o.velo.tie, kVeloPyloTie));
    h_.resize(size_t(t.size()) * 512);
    c_.resize(h_.size());
    for (int i = 0; i < t.size(); i++) {
      std::copy(w.init_h.begin(), w.init_h.end(), h_.begin() + i * 512);
      std::copy(w.init_c.begin(), w.init_c.end(), c_.begin() + i * 512);
    }
  }

  void step(std::vector<float>& params, const std::vector<float>& grads, float gs, float loss) override {
    const int n_t = table_.size();
    loss_.update(loss);
    float shared[18];
    velo_fraction_features(double(t_) / double(opts_.velo.num_steps), shared);
    loss_.features(shared + 9);
    // LSTM inputs from the accumulators before this step's update: the LSTM sees them one step late (4.3).
    std::vector<float> X(static_cast<size_t>(n_t * 30));
    for (const auto& ti : table_.tensors()) {
      const RefLoTensor& s = st_[size_t(ti.index)];
      const float* m[3] = {s.m[0].data(), s.m[1].data(), s.m[2].data()};
      velo_lstm_input(shared, ti.shape, &params[size_t(ti.offset)], m, s.v.data(), ti.numel, &X[size_t(ti.index * 30)]);
    }
    std::vector<float> controls(static_cast<size_t>(n_t * 256)), lr_mult(static_cast<size_t>(n_t));
    velo_lstm(w_, n_t, X.data(), h_.data(), c_.data(), controls.data(), lr_mult.data());
    if (trace_) {
      std::copy(loss_.decay, loss_.decay + 10, trace_->loss_decays);
      std::copy(shared, shared + 9, trace_->fraction);
      std::copy(shared + 9, shared + 18, trace_->loss_features);
      trace_->lstm_in = X;
      trace_->lr_mult = lr_mult;
      for (auto* v : {&trace_->direction, &trace_->magnitude, &trace_->step})
        v->assign(size_t(table_.total_elems()), 0.0f);
    }
    for (const auto& ti : table_.tensors()) {
      float theta[VeloWeights::kMlp];
      for (int q = 0; q < VeloWeights::kMlp; q++) {
        double a = 0;
        for (int j = 0; j < 256; j++)
          a += double(controls[size_t(ti.index * 256 + j)]) * w_.cand[size_t(j * VeloWeights::kMlp + q)];
        theta[q] = float(100.0 * a / 256.0);
      }
      step_tensor(ti, st_[size_t(ti.index)], &params[size_t(ti.offset)], &grads[size_t(ti.offset)], gs, theta,
                  lr_mult[size_t(ti.index)]);
    }
    t_++;
  }

 private:
  // The 30 per-element features (4.7) from the updated state: g, clip(g, 0.1), p, m_k, v, m_k s, s
  // (s = rsqrt(v + 1e-6)), g fg_k, g s, R_k, C_k, rsqrt(R_k + 1e-8), rsqrt(C_k + 1e-8), m_k fm_k.
  static void features(const RefLoTensor& s, int64_t i, float g, float p, float* x) {
    const RefLoTensor::Elem e = s.elem(i, 0.0f);
    const float sv = 1.0f / std::sqrt(s.v[size_t(i)] + 1e-6f);
    x[0] = g;
    x[1] = std::min(0.1f, std::max(-0.1f, g));
    x[2] = p;
    x[6] = s.v[size_t(i)];
    x[10] = sv;
    x[14] = g * sv;
    for (int k = 0; k < 3; k++) {
      const float m = s.m[k][size_t(i)];
      x[3 + k] = m;
      x[7 + k] = m * sv;
      x[11 + k] = g * e.fg[k];
      x[15 + k] = e.row[k];
      x[18 + k] = e.col[k];
      x[21 + k] = 1.0f / std::sqrt(e.row[k] + 1e-8f);
      x[24 + k] = 1.0f / std::sqrt(e.col[k] + 1e-8f);
      x[27 + k] = m * e.fm[k];
    }
  }

  void step_tensor(const TensorInfo& ti, RefLoTensor& s, float* p, const float* graw, float gs, const float* th,
                   float lr_mult) {
    const VeloOptions& h = opts_.velo;
    const int64_t n = ti.numel;
    std::vector<float> g(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; i++) g[size_t(i)] = std::min(1000.0f, std::max(-1000.0f, graw[i] * gs));
    const uint64_t key = lo_r16_tensor_key(uint64_t(t_), uint32_t(ti.index));
    s.update(g, dec_, h.bf16_record ? &key : nullptr);  // 4.5, 4.6
    double sq[30] = {0};
    float x[30];
    for (int64_t i = 0; i < n; i++) {
      features(s, i, g[size_t(i)], p[i], x);
      for (int ch = 0; ch < 30; ch++) sq[ch] += double(x[ch]) * x[ch];
    }
    float sc[30];
    for (int ch = 0; ch < 30; ch++) sc[ch] = 1.0f / std::sqrt(1e-5f + float(sq[ch] / double(n)));
    const float param_scale = std::sqrt(float(sq[2] / double(n)) + 1e-9f);
    const float lr = float(h.lr * opts_.schedule.factor(t_)), wd = ti.decay ? float(h.weight_decay) : 0.0f;
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; i++) {
      features(s, i, g[size_t(i)], p[i], x);
      float h1[4], h2[4];
      for (int o = 0; o < 4; o++) {  // double accumulation, as in the μLO reference
        double a = th[VeloWeights::kB0 + o];
        for (int k = 0; k < 30; k++) a += double(th[o * 30 + k]) * (x[k] * sc[k]);
        h1[o] = std::max(float(a), 0.0f);
      }
      for (int o = 0; o < 4; o++) {
        double a = th[VeloWeights::kB1 + o];
        for (int k = 0; k < 4; k++) a += double(th[VeloWeights::kW1 + o * 4 + k]) * h1[k];
        h2[o] = std::max(float(a), 0.0f);
      }
      double dd = th[VeloWeights::kB2], mm = th[VeloWeights::kB2 + 1];  // direction, magnitude
      for (int k = 0; k < 4; k++) {
        dd += double(th[VeloWeights::kW2 + k]) * h2[k];
        mm += double(th[VeloWeights::kW2 + 4 + k]) * h2[k];
      }
      const float stp = lr_mult * float(dd) * std::exp(0.001f * float(mm)) * 0.001f * param_scale;
      if (trace_) {
        const size_t at = size_t(ti.offset + i);
        trace_->direction[at] = float(dd);
        trace_->magnitude[at] = float(mm);
        trace_->step[at] = stp;
      }
      float pn = p[i] - lr * stp;
      if (wd > 0) pn -= lr * wd * pn;
      out[size_t(i)] = pn;
    }
    std::copy(out.begin(), out.end(), p);
  }

  VeloWeights w_;
  VeloLossBuffer loss_;
  LoDecays dec_;
  std::vector<RefLoTensor> st_;
  std::vector<float> h_, c_;
  VeloTrace* trace_;
};
}  // namespace

std::unique_ptr<RefOptimizer> make_ref_velo(const ParamTable& t, const OptimOptions& o, const VeloWeights& w) {
  return std::make_unique<RefVelo>(t, o, w, nullptr);
}

std::unique_ptr<RefOptimizer> make_ref_velo_traced(const ParamTable& t, const OptimOptions& o, const VeloWeights& w,
                                                   VeloTrace* trace) {
  return std::make_unique<RefVelo>(t, o, w, trace);
}

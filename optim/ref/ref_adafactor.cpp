// torch.optim.Adafactor (optimizers.md C1), tensor by tensor.
#include <algorithm>
#include <cmath>

#include "optim/ref/ref_parts.h"

namespace {
class RefAdafactor : public RefOptimizer {
 public:
  RefAdafactor(const ParamTable& t, const OptimOptions& o) : RefOptimizer(t, o) {
    for (const auto& ti : t.tensors()) {
      if (ti.ndim() > 1) {
        rv_.emplace_back(size_t(ti.batch() * ti.rows()), 0.0f);
        cv_.emplace_back(size_t(ti.batch() * ti.cols()), 0.0f);
        var_.emplace_back();
      } else {
        rv_.emplace_back();
        cv_.emplace_back();
        var_.emplace_back(size_t(ti.numel), 0.0f);
      }
    }
  }

  void step(std::vector<float>& params, const std::vector<float>& grads, float gs, float) override {
    const AdafactorOptions& h = opts_.adafactor;
    t_++;
    const double tf = double(t_), lr = h.lr * opts_.schedule.factor(t_ - 1), eps1 = h.eps1_value();
    const float w = float(std::pow(tf, h.beta2_decay));
    const double rho = std::min(lr, 1.0 / std::sqrt(tf));
    const float eps1f = float(eps1), eps1sq = float(eps1 * eps1);
    for (const auto& ti : table_.tensors()) {
      float* p = &params[size_t(ti.offset)];
      const float* graw = &grads[size_t(ti.offset)];
      const int64_t n = ti.numel;
      std::vector<float> g(graw, graw + n), u(static_cast<size_t>(n));
      for (auto& x : g) x *= gs;
      double psq = 0;
      for (int64_t i = 0; i < n; i++) psq += double(p[i]) * p[i];
      const double alpha = std::max(h.eps2, std::sqrt(psq) / std::sqrt(double(n))) * rho;
      const float wdf = ti.decay ? float(1.0 - lr * h.weight_decay) : 1.0f;
      if (ti.ndim() > 1) {
        const int64_t R = ti.rows(), C = ti.cols();
        for (int64_t b = 0; b < ti.batch(); b++) {
          const float* G = &g[size_t(b * R * C)];
          float* rv = &rv_[size_t(ti.index)][size_t(b * R)];
          float* cv = &cv_[size_t(ti.index)][size_t(b * C)];
          double rsum = 0;
          for (int64_t r = 0; r < R; r++) {
            double s = 0;
            for (int64_t c = 0; c < C; c++) s += double(G[r * C + c]) * G[r * C + c];
            float nrm = std::sqrt(float(s));
            rv[r] = ref_lerp(rv[r], nrm * nrm / float(C), w);
            rsum += rv[r];
          }
          for (int64_t c = 0; c < C; c++) {
            double s = 0;
            for (int64_t r = 0; r < R; r++) s += double(G[r * C + c]) * G[r * C + c];
            float nrm = std::sqrt(float(s));
            cv[c] = ref_lerp(cv[c], nrm * nrm / float(R), w);
          }
          const float den = std::max(float(rsum / double(R)), eps1f);
          for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++)
              u[size_t(b * R * C + r * C + c)] = G[r * C + c] / std::sqrt(std::max(rv[r] * cv[c] / den, eps1sq));
        }
      } else {
        float* var = var_[size_t(ti.index)].data();
        for (int64_t i = 0; i < n; i++) {
          var[i] = ref_lerp(var[i], g[size_t(i)] * g[size_t(i)], w);
          u[size_t(i)] = g[size_t(i)] / std::sqrt(std::max(var[i], eps1sq));
        }
      }
      double usq = 0;
      for (float x : u) usq += double(x) * x;
      const double denom = std::max(1.0, std::sqrt(usq) / (std::sqrt(double(n)) * h.d));
      const float coef = float(-alpha / denom);
      for (int64_t i = 0; i < n; i++) p[i] = p[i] * wdf + coef * u[size_t(i)];
    }
  }

 private:
  std::vector<std::vector<float>> rv_, cv_, var_;  // per tensor
};
}  // namespace

std::unique_ptr<RefOptimizer> make_ref_adafactor(const ParamTable& t, const OptimOptions& o) {
  return std::make_unique<RefAdafactor>(t, o);
}

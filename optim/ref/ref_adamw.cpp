#include <cmath>

#include "optim/ref/ref_optim.h"
#include "optim/ref/ref_parts.h"

void ref_adamw_tensor(const AdamWOptions& h, int64_t t, double lr_factor, float grad_scale, bool decay, float* p,
                      const float* g, float* m, float* v, int64_t n) {
  double lr = h.lr * lr_factor;
  double bc1 = 1.0 - std::pow(h.beta1, double(t)), bc2 = 1.0 - std::pow(h.beta2, double(t));
  // lr m_hat = step_size m and sqrt(v_hat) = sqrt(v) / sqrt_bc2, as torch folds the bias corrections
  const float step_size = float(lr / bc1), sqrt_bc2 = float(std::sqrt(bc2));
  const float lr_wd = decay ? float(lr * h.weight_decay) : 0.0f;
  const float b1 = float(h.beta1), one_minus_b1 = float(1.0 - h.beta1);
  const float b2 = float(h.beta2), one_minus_b2 = float(1.0 - h.beta2);
  const float eps = float(h.eps);
  for (int64_t i = 0; i < n; i++) {
    float gi = g[i] * grad_scale;
    p[i] -= lr_wd * p[i];  // decoupled weight decay first, on the parameter before the step
    m[i] = b1 * m[i] + one_minus_b1 * gi;
    v[i] = b2 * v[i] + one_minus_b2 * gi * gi;
    float denom = std::sqrt(v[i]) / sqrt_bc2 + eps;
    p[i] -= step_size * m[i] / denom;
  }
}

namespace {
class RefAdamW : public RefOptimizer {
 public:
  RefAdamW(const ParamTable& t, const OptimOptions& o)
      : RefOptimizer(t, o), m_(size_t(t.total_elems()), 0.0f), v_(size_t(t.total_elems()), 0.0f) {}
  void step(std::vector<float>& p, const std::vector<float>& g, float gs, float) override {
    t_++;
    double f = opts_.schedule.factor(t_ - 1);
    for (const auto& ti : table_.tensors()) {
      size_t o = size_t(ti.offset);
      ref_adamw_tensor(opts_.adamw, t_, f, gs, ti.decay, &p[o], &g[o], &m_[o], &v_[o], ti.numel);
    }
  }

 private:
  std::vector<float> m_, v_;
};
}  // namespace

std::unique_ptr<RefOptimizer> make_ref_adamw(const ParamTable& t, const OptimOptions& o) {
  return std::make_unique<RefAdamW>(t, o);
}

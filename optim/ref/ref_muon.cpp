// torch.optim.Muon (optimizers.md C2) on Muon-owned matrices, AdamW on the rest; Newton-Schulz with the
// GPU's bf16 rounding points and exact accumulation.
#include <algorithm>
#include <cmath>

#include "common/bf16_host.h"
#include "optim/ref/ref_parts.h"

namespace {
// C (m x k) = A (m x n) * B (n x k), all row-major, accumulated in double.
std::vector<double> matmul(const std::vector<float>& A, const std::vector<float>& B, int64_t m, int64_t n, int64_t k) {
  std::vector<double> C(size_t(m * k), 0.0);
  for (int64_t i = 0; i < m; i++)
    for (int64_t l = 0; l < n; l++) {
      double a = A[size_t(i * n + l)];
      for (int64_t j = 0; j < k; j++) C[size_t(i * k + j)] += a * B[size_t(l * k + j)];
    }
  return C;
}
}  // namespace

std::vector<float> ref_newton_schulz(const std::vector<float>& x, int64_t rows, int64_t cols, const MuonOptions& o) {
  const bool tall = rows > cols;
  const int64_t m = std::min(rows, cols), n = std::max(rows, cols);
  std::vector<float> X(size_t(m * n)), Xt(size_t(m * n));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) (tall ? X[size_t(c * n + r)] : X[size_t(r * n + c)]) = x[size_t(r * cols + c)];
  const float a = float(o.ns_a), b = float(o.ns_b), c = float(o.ns_c);
  for (int it = 0; it < o.ns_steps; it++) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) Xt[size_t(j * m + i)] = X[size_t(i * n + j)];
    std::vector<double> A64 = matmul(X, Xt, m, n, m);
    std::vector<float> A(A64.size()), B(A64.size());
    for (size_t i = 0; i < A.size(); i++) A[i] = bf16_round(float(A64[i]));
    std::vector<double> AA = matmul(A, A, m, m, m);
    for (size_t i = 0; i < B.size(); i++) B[i] = bf16_round(c * float(AA[i]) + b * A[i]);
    std::vector<double> BX = matmul(B, X, m, m, n);
    for (size_t i = 0; i < X.size(); i++) X[i] = bf16_round(float(BX[i]) + a * X[i]);
  }
  std::vector<float> out(size_t(rows * cols));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t cc = 0; cc < cols; cc++)
      out[size_t(r * cols + cc)] = tall ? X[size_t(cc * n + r)] : X[size_t(r * n + cc)];
  return out;
}

namespace {
class RefMuon : public RefOptimizer {
 public:
  RefMuon(const ParamTable& t, const OptimOptions& o)
      : RefOptimizer(t, o), buf_(size_t(t.total_elems()), 0.0f), m_(buf_.size(), 0.0f), v_(buf_.size(), 0.0f) {}

  void step(std::vector<float>& params, const std::vector<float>& grads, float gs, float) override {
    const MuonOptions& h = opts_.muon;
    t_++;
    const double f = opts_.schedule.factor(t_ - 1), lr = h.lr * f;
    const float mu = float(h.momentum), w = float(1.0 - h.momentum);
    for (const auto& ti : table_.tensors()) {
      const size_t o = size_t(ti.offset);
      if (ti.resolved_owner() != Owner::Muon) {
        ref_adamw_tensor(h.aux, t_, f, gs, ti.decay, &params[o], &grads[o], &m_[o], &v_[o], ti.numel);
        continue;
      }
      const int64_t n = ti.numel, R = ti.mat_rows(), C = ti.mat_cols();
      std::vector<float> x(static_cast<size_t>(n));
      double sq = 0;
      for (int64_t i = 0; i < n; i++) {
        float g = grads[o + size_t(i)] * gs;
        float& b = buf_[o + size_t(i)];
        b = ref_lerp(b, g, w);
        x[size_t(i)] = bf16_round(h.nesterov ? ref_lerp(g, b, mu) : b);
        sq += double(x[size_t(i)]) * x[size_t(i)];
      }
      const float d = std::max(bf16_round(float(std::sqrt(sq))), float(h.eps));
      for (auto& e : x) e = bf16_round(e / d);
      std::vector<float> O = ref_newton_schulz(x, R, C, h);
      const double ratio = h.adjust_lr == "match_rms_adamw" ? 0.2 * std::sqrt(double(std::max(R, C)))
                                                            : std::sqrt(std::max(1.0, double(R) / double(C)));
      const float wdf = ti.decay ? float(1.0 - lr * h.weight_decay) : 1.0f;
      const float step = float(-(lr * double(float(ratio))));
      for (int64_t i = 0; i < n; i++) params[o + size_t(i)] = params[o + size_t(i)] * wdf + step * O[size_t(i)];
    }
  }

 private:
  std::vector<float> buf_, m_, v_;
};
}  // namespace

std::unique_ptr<RefOptimizer> make_ref_muon(const ParamTable& t, const OptimOptions& o) {
  return std::make_unique<RefMuon>(t, o);
}

double ref_grad_norm(const ParamTable& t, const std::vector<float>& grads) {
  double s = 0;
  for (const auto& ti : t.tensors())
    for (int64_t i = 0; i < ti.numel; i++) s += double(grads[size_t(ti.offset + i)]) * grads[size_t(ti.offset + i)];
  return std::sqrt(s);
}

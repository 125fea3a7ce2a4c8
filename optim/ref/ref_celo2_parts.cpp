// The parts of the CELO2 reference that tests check on their own (celo2.md 5.1-5.9), and PyLO's global
// gradient clipping, which ELO shares.
#include <cfloat>
#include <cmath>

#include "optim/ref/ref_celo2.h"

float ref_global_clip_scale(const ParamTable& t, const std::vector<float>& grads, float gs, double clip_norm) {
  double sum = 0;
  for (const auto& ti : t.tensors())
    for (int64_t i = 0; i < ti.numel; i++) {
      const float g = grads[size_t(ti.offset + i)] * gs;
      sum += double(g * g);  // squares in float32, as PyLO's g.float().pow(2): they overflow where it does
    }
  const double norm = std::sqrt(double(float(sum)));  // PyLO's float32 total: inf beyond FLT_MAX
  if (std::isnan(norm)) return 1.0f;
  return float(clip_norm / std::max(norm, clip_norm));
}

int celo2_features(const RefLoTensor& s, int64_t i, float g, float p, float* x) {
  const RefLoTensor::Elem e = s.elem(i, 0.0f);  // fm is not used: CELO2's fac_mom uses the factors of fac_g
  const float v = s.v[size_t(i)], rho = 1.0f / std::sqrt(v + 1e-8f);
  x[0] = g;
  x[1] = clamp_keep_nan(g, -0.1f, 0.1f);
  x[2] = p;
  x[6] = v;
  x[10] = rho;
  x[14] = g * rho;
  for (int k = 0; k < 3; k++) {
    const float m = s.m[k][size_t(i)];
    x[3 + k] = m;
    x[7 + k] = m * rho;
    x[11 + k] = g * e.fg[k];
  }
  if (!s.fd.factored) return 15;
  for (int k = 0; k < 3; k++) {
    x[15 + k] = e.row[k];
    x[18 + k] = e.col[k];
    x[21 + k] = 1.0f / std::sqrt(e.row[k] + 1e-8f);
    x[24 + k] = 1.0f / std::sqrt(e.col[k] + 1e-8f);
    x[27 + k] = s.m[k][size_t(i)] * e.fg[k];  // fg = rf cf for a factored tensor
  }
  return 30;
}

void celo2_mlp(const Celo2Weights& w, const float* x, int nf, float* out) {
  constexpr int H = Celo2Weights::kHidden;
  float h1[H], h2[H];
  // Sums in double, as the other references: the reference should carry less rounding than what it checks.
  for (int j = 0; j < H; j++) {
    double a = w.b0[size_t(j)];
    for (int c = 0; c < nf; c++) a += double(x[c]) * w.w0[size_t(c * H + j)];
    h1[j] = std::max(float(a), 0.0f);  // keeps NaN, as torch.relu
  }
  for (int j = 0; j < H; j++) {
    double a = w.b1[size_t(j)];
    for (int k = 0; k < H; k++) a += double(h1[k]) * w.w1[size_t(k * H + j)];
    h2[j] = std::max(float(a), 0.0f);
  }
  for (int q = 0; q < w.out; q++) {
    double a = w.b2[size_t(q)];
    for (int k = 0; k < H; k++) a += double(h2[k]) * w.w2[size_t(k * w.out + q)];
    out[q] = float(a);
  }
}

namespace {
// C (m x k) = A (m x n) B (n x k), row-major.
std::vector<double> matmul(const std::vector<double>& A, const std::vector<double>& B, int64_t m, int64_t n,
                           int64_t k) {
  std::vector<double> C(size_t(m * k), 0.0);
  for (int64_t i = 0; i < m; i++)
    for (int64_t l = 0; l < n; l++) {
      const double a = A[size_t(i * n + l)];
      for (int64_t j = 0; j < k; j++) C[size_t(i * k + j)] += a * B[size_t(l * k + j)];
    }
  return C;
}

std::vector<double> transpose(const std::vector<double>& a, int64_t rows, int64_t cols) {
  std::vector<double> t(a.size());
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) t[size_t(c * rows + r)] = a[size_t(r * cols + c)];
  return t;
}
}  // namespace

std::vector<double> celo2_newton_schulz(const std::vector<double>& x, int64_t rows, int64_t cols,
                                        const Celo2Options& o) {
  const bool tall = rows > cols;  // work on the wide orientation: A = X X^T is the smaller Gram matrix
  const int64_t m = std::min(rows, cols), n = std::max(rows, cols);
  std::vector<double> X = tall ? transpose(x, rows, cols) : x;
  double sq = 0;
  for (double e : X) sq += e * e;
  const double d = std::sqrt(sq) + o.ns_eps;
  for (double& e : X) e /= d;
  for (int it = 0; it < o.ns_steps; it++) {
    const std::vector<double> A = matmul(X, transpose(X, m, n), m, n, m);
    const std::vector<double> AA = matmul(A, A, m, m, m);
    std::vector<double> B(A.size());
    for (size_t i = 0; i < B.size(); i++) B[i] = o.ns_b * A[i] + o.ns_c * AA[i];
    const std::vector<double> BX = matmul(B, X, m, m, n);
    for (size_t i = 0; i < X.size(); i++) X[i] = o.ns_a * X[i] + BX[i];
  }
  return tall ? transpose(X, m, n) : X;
}

void celo2_adam_apply(const Celo2Adam& a, int64_t t, float lr, float wd, float* p, const float* m, const float* v,
                      int64_t n) {
  // PyLO divides by the bias corrections (python floats, so float32 in the tensor ops), then adds eps
  // after the square root.
  const float bc1 = float(1.0 - std::pow(a.beta1, double(t))), bc2 = float(1.0 - std::pow(a.beta2, double(t)));
  const float eps = float(a.eps);
  for (int64_t i = 0; i < n; i++) {
    const float step = (m[i] / bc1) / (std::sqrt(v[i] / bc2) + eps);
    p[i] = p[i] - lr * (step + wd * p[i]);
  }
}

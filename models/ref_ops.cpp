// CPU reference ops in double precision (see ref_ops.h).
#include "models/ref_ops.h"

#include <algorithm>
#include <cmath>

#include "kernels/dropout.h"

void ref_linear(const double* x, const double* W, const double* b, double* y, int N, int I, int O) {
  for (int n = 0; n < N; n++)
    for (int o = 0; o < O; o++) {
      double a = b ? b[o] : 0.0;
      for (int i = 0; i < I; i++) a += x[n * I + i] * W[o * I + i];
      y[n * O + o] = a;
    }
}
void ref_linear_back(const double* x, const double* W, const double* dy, double* dx, double* dW, double* db, int N,
                     int I, int O) {
  for (int n = 0; n < N; n++)
    for (int o = 0; o < O; o++) {
      const double g = dy[n * O + o];
      if (db) db[o] += g;
      for (int i = 0; i < I; i++) {
        dx[n * I + i] += g * W[o * I + i];
        dW[o * I + i] += g * x[n * I + i];
      }
    }
}
void ref_layernorm(const double* x, const double* w, const double* b, double* y, double* mean, double* rstd, int N,
                   int C, double eps) {
  for (int n = 0; n < N; n++) {
    double m = 0, v = 0;
    for (int c = 0; c < C; c++) m += x[n * C + c];
    m /= C;
    for (int c = 0; c < C; c++) v += (x[n * C + c] - m) * (x[n * C + c] - m);
    const double r = 1.0 / std::sqrt(v / C + eps);
    mean[n] = m;
    rstd[n] = r;
    for (int c = 0; c < C; c++) y[n * C + c] = (x[n * C + c] - m) * r * w[c] + b[c];
  }
}
void ref_layernorm_back(const double* x, const double* w, const double* mean, const double* rstd, const double* dy,
                        double* dx, double* dw, double* db, int N, int C) {
  for (int n = 0; n < N; n++) {
    double s1 = 0, s2 = 0;
    for (int c = 0; c < C; c++) {
      const double xh = (x[n * C + c] - mean[n]) * rstd[n], g = dy[n * C + c] * w[c];
      s1 += g;
      s2 += g * xh;
      dw[c] += dy[n * C + c] * xh;
      db[c] += dy[n * C + c];
    }
    // mean and variance depend on every x of the row: dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy w
    for (int c = 0; c < C; c++) {
      const double xh = (x[n * C + c] - mean[n]) * rstd[n], g = dy[n * C + c] * w[c];
      dx[n * C + c] += rstd[n] * (g - s1 / C - xh * s2 / C);
    }
  }
}

// kRefGeluC = sqrt(2 / pi): GELU(u) ~ u/2 (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))).
double ref_gelu_tanh(double u) { return 0.5 * u * (1 + std::tanh(kRefGeluC * (u + 0.044715 * u * u * u))); }
double ref_gelu_tanh_grad(double u) {
  const double th = std::tanh(kRefGeluC * (u + 0.044715 * u * u * u));
  return 0.5 * (1 + th) + 0.5 * u * (1 - th * th) * kRefGeluC * (1 + 3 * 0.044715 * u * u);
}

// Phi(u) = erfc(-u / sqrt 2) / 2: no cancellation in the negative tail (1 + erf would cancel below u = -8).
double ref_gelu_erf(double u) { return 0.5 * u * std::erfc(-u / std::sqrt(2.0)); }
double ref_gelu_erf_grad(double u) {
  return 0.5 * std::erfc(-u / std::sqrt(2.0)) + u * std::exp(-0.5 * u * u) / std::sqrt(2 * M_PI);
}

double ref_crossentropy_soft(const double* z, const double* t, double* grad, int V) {
  double m = -INFINITY, s = 0, mass = 0, loss = 0;
  for (int v = 0; v < V; v++) m = std::max(m, z[v]);
  for (int v = 0; v < V; v++) s += std::exp(z[v] - m);
  const double lse = m + std::log(s);
  for (int v = 0; v < V; v++) {
    mass += t[v];
    loss += t[v] * (lse - z[v]);
  }
  for (int v = 0; v < V; v++) grad[v] = mass * std::exp(z[v] - lse) - t[v];
  return loss;
}

double RefDropout::keep(uint32_t site, uint32_t row, uint32_t col) const {
  const uint32_t threshold = dropout_threshold(p);
  if (threshold == 0) return 1.0;
  return dropout_keep(dropout_row(dropout_site_key(seed, counter, site), row), col, threshold)
             ? double(dropout_scale(threshold))
             : 0.0;
}

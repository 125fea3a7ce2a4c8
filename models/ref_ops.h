// The building blocks of the CPU reference models, in double precision: plain loops over row-major
// arrays, written to be read and trusted rather than fast (the reference runs at tiny sizes). Shared
// by every reference model (GPT-2 now; the ViT reference builds on them too).
#pragma once
#include <cmath>
#include <cstdint>

const double kRefGeluC = std::sqrt(2.0 / M_PI);

// y (N x O) = x (N x I) W^T + b, W (O x I) row-major (torch Linear); b may be null.
void ref_linear(const double* x, const double* W, const double* b, double* y, int N, int I, int O);
// Accumulates dx += dy W, dW += dy^T x, db += sum dy (db may be null).
void ref_linear_back(const double* x, const double* W, const double* dy, double* dx, double* dW, double* db, int N,
                     int I, int O);
// Per row of C: y = (x - mean) rstd w + b with rstd = 1 / sqrt(var + eps); saves mean and rstd.
void ref_layernorm(const double* x, const double* w, const double* b, double* y, double* mean, double* rstd, int N,
                   int C, double eps);
// Accumulates dx, dw, db of the LayerNorm above from dy.
void ref_layernorm_back(const double* x, const double* w, const double* mean, const double* rstd, const double* dy,
                        double* dx, double* dw, double* db, int N, int C);
// GELU, tanh form, and its derivative.
double ref_gelu_tanh(double u);
double ref_gelu_tanh_grad(double u);
// GELU, exact erf form u Phi(u), and its derivative Phi(u) + u phi(u).
double ref_gelu_erf(double u);
double ref_gelu_erf_grad(double u);
// Softmax cross-entropy of one row of V logits against a target distribution t (soft targets):
// returns sum_v t[v] (logsumexp(z) - z[v]) and sets grad = sum_v t[v] * softmax(z) - t.
double ref_crossentropy_soft(const double* z, const double* t, double* grad, int V);

// Dropout as the GPU models draw it (kernels/dropout.h): probability p, the masks of micro-batch
// `counter`. p = 0 (the default) keeps everything.
struct RefDropout {
  float p = 0.0f;
  uint64_t seed = 0, counter = 0;
  // The factor of element (row, col) of a site: 0 or 1 / (1 - p) with dropout, 1 without.
  double keep(uint32_t site, uint32_t row, uint32_t col) const;
};

// CELO2's pieces against independent computations: Newton-Schulz on 2x3 and 3x2 matrices against its
// closed form through the eigen-decomposition of X X^T, and all 30 (or 15) normalised features against a
// float64 evaluation of celo2.md 5.3-5.7 written here, over 3 steps on matrices, ndim 3 and 4 tensors,
// (1,n), (n,1) and a vector sent to the MLP.
#include <cmath>

#include "tests/cpu/celo2_test_util.h"
#include "tests/cpu/lopt_probes.h"

namespace {
// NS's polynomial on one singular value: x / (|X| + eps), then 5 x (a s + b s^3 + c s^5).
double ns_poly(double s, const Celo2Options& o) {
  for (int it = 0; it < o.ns_steps; it++) s = o.ns_a * s + o.ns_b * s * s * s + o.ns_c * s * s * s * s * s;
  return s;
}

// NS(X) for a 2 x 3 X = U S V^T: U diag(f(s) / s) U^T X, from the 2x2 Gram matrix's eigenvectors.
std::vector<double> ns_closed_form(const std::vector<double>& x, const Celo2Options& o) {
  double fro = 0;
  for (double e : x) fro += e * e;
  const double d = std::sqrt(fro) + o.ns_eps;
  std::vector<double> X(6);
  for (int i = 0; i < 6; i++) X[size_t(i)] = x[size_t(i)] / d;
  const double a = X[0] * X[0] + X[1] * X[1] + X[2] * X[2], b = X[0] * X[3] + X[1] * X[4] + X[2] * X[5],
               c = X[3] * X[3] + X[4] * X[4] + X[5] * X[5];
  const double mid = (a + c) / 2, rad = std::sqrt((a - c) * (a - c) / 4 + b * b);
  double M[2][2] = {{0, 0}, {0, 0}};  // U diag(f(s)/s) U^T
  for (double lam : {mid + rad, mid - rad}) {
    double u0 = b, u1 = lam - a;
    const double nu = std::sqrt(u0 * u0 + u1 * u1);
    u0 /= nu;
    u1 /= nu;
    const double s = std::sqrt(lam), k = ns_poly(s, o) / s;
    M[0][0] += k * u0 * u0;
    M[0][1] += k * u0 * u1;
    M[1][0] += k * u1 * u0;
    M[1][1] += k * u1 * u1;
  }
  std::vector<double> out(6);
  for (int r = 0; r < 2; r++)
    for (int j = 0; j < 3; j++) out[size_t(r * 3 + j)] = M[r][0] * X[size_t(j)] + M[r][1] * X[size_t(3 + j)];
  return out;
}
}  // namespace

TEST(Celo2Parts, NewtonSchulzAgainstItsClosedForm) {
  const Celo2Options o;
  const std::vector<double> x = {1.0, 2.0, 3.0, -1.0, 0.5, 2.0};
  const std::vector<double> want = ns_closed_form(x, o), wide = celo2_newton_schulz(x, 2, 3, o);
  for (size_t i = 0; i < 6; i++) EXPECT_NEAR(wide[i], want[i], 1e-12) << i;
  // The 3x2 transpose is transposed, orthogonalised as 2x3 and transposed back.
  const std::vector<double> xt = {x[0], x[3], x[1], x[4], x[2], x[5]};
  const std::vector<double> tall = celo2_newton_schulz(xt, 3, 2, o);
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 2; c++) EXPECT_NEAR(tall[size_t(r * 2 + c)], want[size_t(c * 3 + r)], 1e-12) << r << c;
  // Singular values land near 1 (the quintic's band, ~0.7..1.2), not exactly: a controlled reference.
  double fro = 0;
  for (double e : wide) fro += e * e;
  EXPECT_GT(fro, 2 * 0.6 * 0.6);
  EXPECT_LT(fro, 2 * 1.25 * 1.25);
  Celo2Options three = o;
  three.ns_steps = 3;
  EXPECT_GT(std::fabs(celo2_newton_schulz(x, 2, 3, three)[0] - wide[0]), 1e-3);  // the step count matters
}

namespace {
std::vector<int64_t> coords_of(const std::vector<int64_t>& shape, int64_t i) {
  std::vector<int64_t> c(shape.size());
  for (int k = int(shape.size()) - 1; k >= 0; k--) {
    c[size_t(k)] = i % shape[size_t(k)];
    i /= shape[size_t(k)];
  }
  return c;
}
int64_t index_without(const std::vector<int64_t>& shape, const std::vector<int64_t>& c, int a, int b = -1) {
  int64_t f = 0;
  for (int k = 0; k < int(shape.size()); k++)
    if (k != a && k != b) f = f * shape[size_t(k)] + c[size_t(k)];
  return f;
}

// celo2.md 5.3-5.7 in float64, from the text: accumulators, factors, features, per-slice normalisation.
struct Oracle {
  std::vector<int64_t> shape;
  int64_t n = 1;
  int dr = -1, dc = -1;
  std::vector<double> m[3], v, R[3], C[3], V[3];

  explicit Oracle(std::vector<int64_t> s) : shape(std::move(s)) {
    for (auto d : shape) n *= d;
    if (shape.size() >= 2) {  // sort axes by (size, index): dr the last, dc the one before
      std::vector<int> ax(shape.size());
      for (size_t k = 0; k < ax.size(); k++) ax[k] = int(k);
      std::sort(ax.begin(), ax.end(), [&](int a, int b) {
        return shape[size_t(a)] != shape[size_t(b)] ? shape[size_t(a)] < shape[size_t(b)] : a < b;
      });
      dr = ax.back();
      dc = ax[ax.size() - 2];
    }
    for (int k = 0; k < 3; k++) {
      m[k].assign(size_t(n), 0.0);
      V[k].assign(size_t(n), 0.0);
      if (dr >= 0) {
        R[k].assign(size_t(n / shape[size_t(dr)]), 0.0);
        C[k].assign(size_t(n / shape[size_t(dc)]), 0.0);
      }
    }
    v.assign(size_t(n), 0.0);
  }

  std::vector<std::vector<double>> step(const std::vector<double>& g, const std::vector<double>& p) {
    const double bm[3] = {0.9, 0.99, 0.999};
    std::vector<double> rs(R[0].size(), 0.0), cs(C[0].size(), 0.0);
    for (int64_t i = 0; i < n; i++) {
      const double q = g[size_t(i)] * g[size_t(i)] + 1e-30;
      for (int k = 0; k < 3; k++) {
        m[k][size_t(i)] = bm[k] * m[k][size_t(i)] + (1 - bm[k]) * g[size_t(i)];
        V[k][size_t(i)] = bm[k] * V[k][size_t(i)] + (1 - bm[k]) * q;
      }
      v[size_t(i)] = 0.95 * v[size_t(i)] + 0.05 * g[size_t(i)] * g[size_t(i)];
      if (dr < 0) continue;
      const auto c = coords_of(shape, i);
      rs[size_t(index_without(shape, c, dr))] += q / double(shape[size_t(dr)]);
      cs[size_t(index_without(shape, c, dc))] += q / double(shape[size_t(dc)]);
    }
    for (int k = 0; k < 3 && dr >= 0; k++) {
      for (size_t j = 0; j < rs.size(); j++) R[k][j] = bm[k] * R[k][j] + (1 - bm[k]) * rs[j];
      for (size_t j = 0; j < cs.size(); j++) C[k][j] = bm[k] * C[k][j] + (1 - bm[k]) * cs[j];
    }
    const int nf = dr >= 0 ? 30 : 15;
    std::vector<std::vector<double>> x(static_cast<size_t>(n), std::vector<double>(static_cast<size_t>(nf)));
    for (int64_t i = 0; i < n; i++) {
      const double gi = g[size_t(i)], rho = 1 / std::sqrt(v[size_t(i)] + 1e-8);
      auto& f = x[size_t(i)];
      f[0] = gi;
      f[1] = std::min(0.1, std::max(-0.1, gi));
      f[2] = p[size_t(i)];
      f[6] = v[size_t(i)];
      f[10] = rho;
      f[14] = gi * rho;
      const auto c = coords_of(shape, i);
      for (int k = 0; k < 3; k++) {
        f[3 + size_t(k)] = m[k][size_t(i)];
        f[7 + size_t(k)] = m[k][size_t(i)] * rho;
        if (dr < 0) {
          f[11 + size_t(k)] = gi / std::sqrt(std::max(V[k][size_t(i)] + 1e-9, 1e-9));
          continue;
        }
        const double r = R[k][size_t(index_without(shape, c, dr))], cc = C[k][size_t(index_without(shape, c, dc))];
        double mu = 0;  // mean of R over the dc axis, the other coordinates fixed
        auto cr = c;
        for (int64_t j = 0; j < shape[size_t(dc)]; j++) {
          cr[size_t(dc)] = j;
          mu += R[k][size_t(index_without(shape, cr, dr))];
        }
        mu /= double(shape[size_t(dc)]);
        const double fac = 1 / std::sqrt(std::max(r / (mu + 1e-9), 1e-9)) / std::sqrt(std::max(cc, 1e-9));
        f[11 + size_t(k)] = gi * fac;
        f[15 + size_t(k)] = r;
        f[18 + size_t(k)] = cc;
        f[21 + size_t(k)] = 1 / std::sqrt(r + 1e-8);
        f[24 + size_t(k)] = 1 / std::sqrt(cc + 1e-8);
        f[27 + size_t(k)] = m[k][size_t(i)] * fac;
      }
    }
    const int64_t slice = shape.size() >= 2 ? shape[shape.size() - 2] * shape.back() : n;
    for (int64_t b = 0; b < n / slice; b++)
      for (int ch = 0; ch < nf; ch++) {
        double s = 0;
        for (int64_t i = b * slice; i < (b + 1) * slice; i++) s += x[size_t(i)][size_t(ch)] * x[size_t(i)][size_t(ch)];
        const double sc = 1 / std::sqrt(1e-9 + s / double(slice));
        for (int64_t i = b * slice; i < (b + 1) * slice; i++) x[size_t(i)][size_t(ch)] *= sc;
      }
    return x;
  }
};
}  // namespace

TEST(Celo2Parts, EveryNormalisedFeatureAgainstAFloat64Oracle) {
  const std::vector<std::vector<int64_t>> shapes = {{5, 9}, {9, 5},    {8, 8},       {1, 7},
                                                    {7, 1}, {2, 3, 4}, {3, 4, 2, 5}, {7}};
  std::mt19937 rng(11);
  for (const auto& shape : shapes) {
    const ParamTable t = table_of({{shape, shape.size() == 1 ? Role::Bias : Role::Hidden}});
    const int64_t n = t[0].numel;
    OptimOptions o;
    o.celo2.adamw_1d = false;  // the vector goes through the MLP (15 features)
    o.celo2.lr = 1e-2;
    Celo2Trace tr;
    auto ref = make_ref_celo2(t, o, load_celo2_weights(""), &tr);
    Oracle oracle(shape);
    std::vector<float> p = to_flat(t, {std::vector<float>(size_t(n))});
    std::normal_distribution<float> z(0.0f, 0.05f);
    for (int64_t i = 0; i < n; i++) p[size_t(i)] = z(rng);
    for (int s = 0; s < 3; s++) {
      const std::vector<float> g0 = hetero_grad(n / shape.back(), shape.back(), rng, 0.01f);
      std::vector<double> g(g0.begin(), g0.end()), pd(p.begin(), p.begin() + n);
      const auto want = oracle.step(g, pd);
      ref->step(p, to_flat(t, {g0}));
      const size_t nf = want[0].size();
      double worst = 0;
      for (int64_t i = 0; i < n; i++)
        for (size_t c = 0; c < nf; c++) {
          const double w = want[size_t(i)][c], got = tr.inputs[size_t(i) * 30 + c];
          worst = std::max(worst, std::fabs(got - w) / std::max(1.0, std::fabs(w)));
          ASSERT_NEAR(got, w, 2e-5 * std::max(1.0, std::fabs(w)))
              << shape_str(shape) << " step " << s + 1 << " element " << i << " channel " << c;
        }
      EXPECT_LT(worst, 2e-5);
    }
  }
}

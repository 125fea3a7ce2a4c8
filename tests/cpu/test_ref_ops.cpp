// The shared CPU reference ops that the GPU kernels are judged against: both GELU forms at known values
// and their derivatives against central differences; the soft-target cross-entropy's gradient against
// central differences, and its one-hot case against the hard-target loss.
#include <cmath>
#include <random>
#include <vector>

#include "models/ref_ops.h"
#include "tests/test_util.h"

TEST(RefOps, GeluFormsAtKnownValues) {
  // The erf form is u Phi(u): Phi(1) = 0.841344746..., Phi(-2) = 0.022750131...
  EXPECT_NEAR(ref_gelu_erf(1.0), 0.8413447460685429, 1e-15);
  EXPECT_NEAR(ref_gelu_erf(-2.0), -2.0 * 0.0227501319481792, 1e-15);
  EXPECT_EQ(ref_gelu_erf(0.0), 0.0);
  // The tanh form approximates it to ~1e-3 absolute, and is not equal to it.
  for (double u = -4; u <= 4; u += 0.25) {
    EXPECT_NEAR(ref_gelu_tanh(u), ref_gelu_erf(u), 2e-3) << "u = " << u;
  }
  EXPECT_GT(std::abs(ref_gelu_tanh(1.5) - ref_gelu_erf(1.5)), 1e-5);
}

TEST(RefOps, GeluDerivativesMatchCentralDifferences) {
  const double h = 1e-5;
  for (double u = -5; u <= 5; u += 0.37) {
    EXPECT_NEAR(ref_gelu_erf_grad(u), (ref_gelu_erf(u + h) - ref_gelu_erf(u - h)) / (2 * h), 1e-8) << "u = " << u;
    EXPECT_NEAR(ref_gelu_tanh_grad(u), (ref_gelu_tanh(u + h) - ref_gelu_tanh(u - h)) / (2 * h), 1e-8) << "u = " << u;
  }
}

TEST(RefOps, SoftCrossEntropyGradientAndOneHotCase) {
  const int V = 11;
  std::mt19937 rng(5);
  std::normal_distribution<double> nz(0.0, 2.0);
  std::uniform_real_distribution<double> ut(0.0, 1.0);
  std::vector<double> z(V), t(V), g(V), gp(V);
  for (int v = 0; v < V; v++) {
    z[size_t(v)] = nz(rng);
    t[size_t(v)] = ut(rng) * 0.2;  // mass about 1.1: the gradient's mass * softmax term is exercised
  }
  ref_crossentropy_soft(z.data(), t.data(), g.data(), V);
  const double h = 1e-6;
  for (int v = 0; v < V; v++) {
    std::vector<double> zp = z, zm = z;
    zp[size_t(v)] += h;
    zm[size_t(v)] -= h;
    const double fd = (ref_crossentropy_soft(zp.data(), t.data(), gp.data(), V) -
                       ref_crossentropy_soft(zm.data(), t.data(), gp.data(), V)) /
                      (2 * h);
    EXPECT_NEAR(g[size_t(v)], fd, 1e-8) << "column " << v;
  }
  // One-hot target k: the loss is logsumexp(z) - z[k].
  std::vector<double> onehot(V, 0.0);
  onehot[3] = 1.0;
  double m = -INFINITY, s = 0;
  for (double x : z) m = std::max(m, x);
  for (double x : z) s += std::exp(x - m);
  EXPECT_NEAR(ref_crossentropy_soft(z.data(), onehot.data(), g.data(), V), m + std::log(s) - z[3], 1e-12);
}

// The tie rule of the factored second moments, pinned by hand on a square matrix, for both learned
// optimizers and every value of `tie` (PyLO: AdafacLO/MuLO use numpy's argsort order, VeLO swaps ties).
//
// g = [[1, 2], [3, 4]] at the first step from zero state. R (the mean of g^2 over d0) and C (over d1):
//   argsort: d1 = 0, d0 = 1 -> R = row means    (1+4)/2 = 2.5, (9+16)/2 = 12.5;  C = column means 5, 10
//   swapped: d1 = 1, d0 = 0 -> R = column means 5, 10;                           C = row means 2.5, 12.5
// The feature R_0 (k = 0) of element (i, j) is (1 - beta_f0) R, normalised over the tensor by
// rsqrt(mean(x^2) + 1e-5). A probe MLP routes that one feature to the step, so p moves by exactly x_hat.
#include <cmath>

#include "optim/lopt/lopt_common.h"
#include "optim/ref/ref_lopt.h"
#include "tests/cpu/lopt_probes.h"
#include "tests/test_util.h"

namespace {
const std::vector<float> kGrad = {1, 2, 3, 4};  // row-major (out = 2, in = 2)
const std::vector<double> kRowMeans = {2.5, 2.5, 12.5, 12.5}, kColMeans = {5, 10, 5, 10};  // per element

std::vector<double> normalised(const std::vector<double>& means, double one_minus_beta) {
  std::vector<double> x(means.size());
  double sq = 0;
  for (size_t i = 0; i < x.size(); i++) {
    x[i] = one_minus_beta * means[i];
    sq += x[i] * x[i];
  }
  const double sc = 1 / std::sqrt(sq / double(x.size()) + 1e-5);
  for (auto& v : x) v *= sc;
  return x;
}

ParamTable square() {
  ParamTable t;
  t.add(tensor_spec("w", {2, 2}, Role::Hidden, false));
  return t;
}

// The step of small_fc_lopt with a probe MLP on feature c: p moves by 100 * 0.01 * x_hat_c.
std::vector<double> small_fc_probe(const std::string& tie, int c) {
  const SmallFcWeights w = small_fc_probe_weights(c);
  ParamTable t = square();
  OptimOptions o;
  o.small_fc.lr = 100.0;
  o.small_fc.mup = false;
  o.small_fc.tie = tie;
  auto ref = make_ref_small_fc(t, o, w);
  std::vector<float> p(size_t(t.total_elems()), 0.5f), g(p.size(), 0.0f);
  std::copy(kGrad.begin(), kGrad.end(), g.begin());
  ref->step(p, g);
  std::vector<double> moved(4);
  for (size_t i = 0; i < 4; i++) moved[i] = 0.5 - double(p[i]);
  return moved;
}

// The step of VeLO with a probe on feature c: lr 1000 * lr_mult 1 * 0.001 * rms(p) (= 1) * x_hat_c.
std::vector<double> velo_probe(const std::string& tie, int c) {
  VeloWeights w = velo_probe_base();
  set_velo_candidates(&w, velo_probe_mlp(c));
  ParamTable t = square();
  OptimOptions o;
  o.velo.lr = 1000.0;
  o.velo.tie = tie;
  auto ref = make_ref_velo(t, o, w);
  std::vector<float> p(size_t(t.total_elems()), 1.0f), g(p.size(), 0.0f);
  std::copy(kGrad.begin(), kGrad.end(), g.begin());
  ref->step(p, g, 1.0f, 2.0f);
  const double rms = std::sqrt(1.0 + 1e-9);
  std::vector<double> moved(4);
  for (size_t i = 0; i < 4; i++) moved[i] = (1.0 - double(p[i])) / rms;
  return moved;
}

void expect_pattern(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  for (size_t i = 0; i < 4; i++) EXPECT_NEAR(got[i], want[i], 2e-6 * std::fabs(want[i])) << what << " element " << i;
}
}  // namespace

TEST(TieRules, SmallFcSquareMatrixByHand) {
  const double c = 1.0 - double(small_fc_decays().f[0]);  // 1 - 0.35621816
  for (const std::string tie : {"pylo", "argsort", "swapped"}) {
    const bool rows = tie != "swapped";  // PyLO's AdafacLO/MuLO: argsort
    expect_pattern(small_fc_probe(tie, 13), normalised(rows ? kRowMeans : kColMeans, c), "small_fc R, tie=" + tie);
    expect_pattern(small_fc_probe(tie, 16), normalised(rows ? kColMeans : kRowMeans, c), "small_fc C, tie=" + tie);
  }
}

TEST(TieRules, VeloSquareMatrixByHand) {
  const double c = 1.0 - double(0.9f);
  for (const std::string tie : {"pylo", "argsort", "swapped"}) {
    const bool rows = tie == "argsort";  // PyLO's VeLO: swapped
    expect_pattern(velo_probe(tie, 15), normalised(rows ? kRowMeans : kColMeans, c), "VeLO R, tie=" + tie);
    expect_pattern(velo_probe(tie, 18), normalised(rows ? kColMeans : kRowMeans, c), "VeLO C, tie=" + tie);
  }
}

TEST(TieRules, OldNameJaxIsRefusedWithTheNewNames) {
  expect_user_error([] { parse_tie_rule("jax", kVeloPyloTie); }, "argsort");
  expect_user_error([] { parse_tie_rule("PyLO", kVeloPyloTie); }, "pylo, argsort or swapped");
  EXPECT_EQ(parse_tie_rule("pylo", kSmallFcPyloTie), TieRule::Argsort);
  EXPECT_EQ(parse_tie_rule("pylo", kVeloPyloTie), TieRule::Swapped);
}

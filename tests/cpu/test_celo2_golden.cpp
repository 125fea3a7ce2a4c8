// CELO2 with the real weights against the golden values of celo2.md 10.6 (PyLO naive on the CPU, fp32,
// and the spec's float64 reference): the normalised inputs, MLP outputs, direction and step of one
// element at step 1, and three steps of parameters on (4,6), (6,4) and (5,5); ELO_CELO2 with the same
// weights gives the same matrix updates.
#include <cmath>

#include "tests/cpu/celo2_test_util.h"

namespace {
// p0_ij = 0.05 sin(1 + 0.7 i + 1.3 j); g_ij(t) = 0.01 (1 + 0.5 i) cos(0.4 t + 0.9 i - 0.6 j) + 0.002 (j - 2),
// evaluated in double and rounded to float32.
std::vector<float> p0(int rows, int cols) {
  std::vector<float> p(size_t(rows * cols));
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++) p[size_t(i * cols + j)] = float(0.05 * std::sin(1 + 0.7 * i + 1.3 * j));
  return p;
}
std::vector<float> grad(int rows, int cols, int t) {
  std::vector<float> g(size_t(rows * cols));
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++)
      g[size_t(i * cols + j)] = float(0.01 * (1 + 0.5 * i) * std::cos(0.4 * t + 0.9 * i - 0.6 * j) + 0.002 * (j - 2));
  return g;
}
OptimOptions golden_opts() {
  OptimOptions o;
  o.celo2.lr = 1e-2;
  o.celo2.weight_decay = 0.1;
  o.elo_celo2 = o.celo2;
  o.elo_celo2.clip_grad = false;
  return o;
}
double abs_sum(const std::vector<float>& p) {
  double s = 0;
  for (float x : p) s += std::fabs(double(x));
  return s;
}
}  // namespace

TEST(Celo2Golden, FirstStepIntermediatesOf4x6) {
  const ParamTable t = table_of({{{4, 6}}});
  Celo2Trace tr;
  auto o = make_ref_celo2(t, golden_opts(), load_celo2_weights(""), &tr);
  run_one(
      *o, t, p0(4, 6), [](int s) { return grad(4, 6, s); }, 1);
  const std::vector<double> x = {0.4151645,  0.4151645,  1.184904,    0.4150661,  0.4055700,   0.1725672,
                                 0.05038565, 1.017673,   1.017673,    1.017647,   0.3727414,   1.256613,
                                 1.256613,   1.256613,   1.017673,    0.04573792, 0.006033168, 0.0006055542,
                                 0.5474172,  0.06664050, 0.006680088, 1.732861,   1.724501,    1.652304,
                                 0.9229433,  0.9236664,  0.9303390,   1.256613,   1.256613,    1.256612};
  for (size_t c = 0; c < 30; c++) EXPECT_NEAR(tr.inputs[c], x[c], 2e-6 * std::max(1.0, x[c])) << "channel " << c;
  EXPECT_NEAR(tr.direction[0], 0.7131129, 1e-6);
  EXPECT_NEAR(tr.magnitude[0], 0.4499893, 1e-6);
  expect_near_all(tr.d, {0.7131129, 0.9225845, 0.6800698, -0.3656443, -0.5376667, -0.5175405}, 1e-6, "D row 0");
  expect_near_all(tr.step, {0.6475631, 0.6762469, 1.4675925, -0.8667166, -0.9187316, -0.381726}, 1e-6, "O row 0");
  double ms = 0;  // the step's RMS is rmsmult = 1 (celo2.md 5.9)
  for (int i = 0; i < 24; i++) ms += double(tr.step[size_t(i)]) * tr.step[size_t(i)];
  EXPECT_NEAR(std::sqrt(ms / 24), 1.0, 1e-6);
}

TEST(Celo2Golden, ThreeStepsOnThreeShapes) {
  struct Case {
    int rows, cols;
    std::vector<std::vector<double>> row0;
    std::vector<double> abs_sum;
  };
  const std::vector<Case> cases = {
      {4,
       6,
       {{0.0355558, 0.0304855, -0.0367798, -0.0404064, 0.005037, 0.0506704},
        {0.0294211, 0.0243145, -0.0475708, -0.050489, 0.0197633, 0.0553584},
        {0.0158786, 0.0198121, -0.0527765, -0.0711624, 0.0238572, 0.0617782}},
       {0.7791442, 0.7909691, 0.8132005}},
      {6,
       4,
       {{0.0370513, 0.0374394, -0.0411696, -0.0368505},
        {0.0272923, 0.0355857, -0.0508432, -0.0390274},
        {0.0152839, 0.0323135, -0.0569478, -0.0495884}},
       {0.8144660, 0.8323458, 0.9009394}},
      {5,
       5,
       {{0.0384391, 0.0321052, -0.0364684, -0.0381219, 0.0016899},
        {0.049266, 0.0172827, -0.0443933, -0.0418075, 0.0174952},
        {0.0478186, 0.0145928, -0.0513804, -0.0587801, 0.0332605}},
       {0.7604294, 0.7708844, 0.8421132}},
  };
  for (const auto& k : cases)
    for (bool elo : {false, true}) {
      const ParamTable t = table_of({{{k.rows, k.cols}}});
      const Celo2Weights w = load_celo2_weights("");
      auto o = elo ? make_ref_elo_celo2(t, golden_opts(), w) : make_ref_celo2(t, golden_opts(), w);
      auto p = run_one(
          *o, t, p0(k.rows, k.cols), [&](int s) { return grad(k.rows, k.cols, s); }, 3);
      const std::string what = str_cat(k.rows, "x", k.cols, elo ? " elo_celo2" : " celo2");
      for (size_t s = 0; s < 3; s++) {
        expect_near_all(p[s], k.row0[s], 1e-6, what + " step " + std::to_string(s + 1));
        EXPECT_NEAR(abs_sum(p[s]), k.abs_sum[s], 2e-6) << what;
      }
    }
}

// The learned optimizers' CPU references against the test vectors of velo.md 11 and
// small_fc_lopt.md 9: constants, the loss-buffer trace, the factored-dims table, the LSTM input and
// its symmetry, and per-feature probe MLPs checked against an independent float64 evaluation.
#include <cmath>

#include "optim/lopt/lopt_common.h"
#include "optim/ref/ref_lopt.h"
#include "optim/ref/ref_velo.h"
#include "tests/test_util.h"

namespace {
void expect_vec(const float* got, std::vector<float> want, double rtol, const char* what) {
  for (size_t i = 0; i < want.size(); i++)
    EXPECT_NEAR(got[i], want[i], rtol * std::max(1.0, std::fabs(double(want[i])))) << what << " [" << i << "]";
}
}  // namespace

TEST(VeloConstants, FractionEmbeddingAndLogAbs) {
  float e[9];
  velo_fraction_features(0.0, e);
  expect_vec(e, {-0.2913126f, -0.7615942f, -0.9640276f, -0.9993293f, -0.9999877f, -0.9999998f, -1.0f, -1.0f, -1.0f},
             1e-6, "x=0");
  velo_fraction_features(0.5, e);
  expect_vec(
      e,
      {0.9998346f, 0.9993293f, 0.9950548f, 0.7615942f, -0.7615942f, -0.9950548f, -0.9993293f, -0.9999092f, -0.9999877f},
      1e-6, "x=0.5");
  velo_fraction_features(1.0, e);
  expect_vec(e, {1.0f, 1.0f, 0.9999998f, 0.9999877f, 0.9993293f, 0.9640276f, 0.7615942f, 0.0f, -0.7615942f}, 1e-6,
             "x=1");
  EXPECT_FLOAT_EQ(velo_log_abs(0.0), -2.5f);
  EXPECT_FLOAT_EQ(velo_log_abs(1e9), 2.5f);
}

TEST(VeloConstants, LossDecays) {
  expect_vec(VeloLossBuffer(100).decay,
             {0.9048374f, 0.92549515f, 0.9418131f, 0.95464486f, 0.9647f, 0.972558f, 0.97868615f, 0.9834573f, 0.9871675f,
              0.9900499f},
             1e-6, "N=100");
  expect_vec(VeloLossBuffer(10000).decay,
             {0.9048374f, 0.95464486f, 0.978686f, 0.9900499f, 0.99536914f, 0.99784786f, 0.9990005f, 0.9995359f,
              0.9997845f, 0.9999f},
             1e-6, "N=10000");
  expect_vec(VeloLossBuffer(150000).decay,
             {0.9048374f, 0.9662284f, 0.9882667f, 0.99595344f, 0.99860793f, 0.99952155f, 0.9998356f, 0.9999435f,
              0.99998057f, 0.9999934f},
             1e-6, "N=150000");
}

TEST(VeloConstants, LossBufferTrace) {  // velo.md 11, T1
  VeloLossBuffer b(100);
  const float losses[6] = {2.0f, 1.8f, 1.7f, 1.5f, 10.0f, 1.4f},
              clipped[6] = {2.0f, 1.8f, 1.7f, 1.5f, 2.8991535f, 1.4f};
  float f[9];
  for (int s = 0; s < 6; s++) {
    EXPECT_NEAR(b.update(losses[s]), clipped[s], 1e-6 * clipped[s]) << "update " << s + 1;
    b.features(f);
    if (s < 2) {
      expect_vec(f, std::vector<float>(9, 0.0f), 0, "zero features");
    }
    if (s == 1)
      expect_vec(
          b.running_min,
          {1.895004f, 1.896131f, 1.897004f, 1.897679f, 1.898203f, 1.898608f, 1.898924f, 1.899165f, 1.899355f, 1.8995f},
          1e-6, "running_min after 2");
    if (s == 2 || s == 3) {
      expect_vec(f, std::vector<float>(9, -1.0f), 1e-6, "features after 3/4");
    }
    if (s == 3) {
      EXPECT_NEAR(b.running_min[0], 1.730054f, 1e-6);
    }
    if (s == 4)
      expect_vec(f, {0.028951f, 0.022544f, 0.017521f, 0.013596f, 0.010545f, 0.008172f, 0.006332f, 0.004898f, 0.003799f},
                 2e-5,
                 "after 5");  // ratios of near-equal float32 differences: ~1e-5 absolute is all they carry
    if (s == 5)
      expect_vec(f,
                 {-0.000126f, 0.000218f, 0.000347f, 0.000363f, 0.000334f, 0.000293f, 0.000241f, 0.000205f, 0.000158f},
                 2e-5, "after 6");
  }
  EXPECT_NEAR(b.running_min[0], 1.730054f, 1e-6);  // unchanged by updates 5 and 6
  EXPECT_NEAR(b.running_min[9], 1.748f, 1e-5);
}

TEST(FactoredDims, ArgsortAndSwappedTables) {  // velo.md 11, T2: (d1, d0); "JAX" = argsort, "PyLO" = swapped
  struct Row {
    std::vector<int64_t> s;
    int jd1, jd0, pd1, pd0;
  };
  const std::vector<Row> rows = {
      {{10, 20}, 0, 1, 0, 1},        {{20, 10}, 1, 0, 1, 0},       {{7, 7}, 0, 1, 1, 0},
      {{1, 7}, 0, 1, 0, 1},          {{7, 1}, 1, 0, 1, 0},         {{4, 4, 4}, 1, 2, 2, 1},
      {{3, 3, 64, 128}, 2, 3, 2, 3}, {{3, 3, 64, 64}, 2, 3, 3, 2}, {{64, 64, 3, 3}, 0, 1, 0, 1}};
  for (const auto& r : rows) {
    auto j = factored_dims(r.s, TieRule::Argsort), p = factored_dims(r.s, TieRule::Swapped);
    EXPECT_TRUE(j.factored && p.factored);
    EXPECT_EQ(j.d1, r.jd1) << shape_str(r.s);
    EXPECT_EQ(j.d0, r.jd0) << shape_str(r.s);
    EXPECT_EQ(p.d1, r.pd1) << shape_str(r.s);
    EXPECT_EQ(p.d0, r.pd0) << shape_str(r.s);
  }
  EXPECT_FALSE(factored_dims({}, TieRule::Argsort).factored);
  EXPECT_FALSE(factored_dims({5}, TieRule::Swapped).factored);
}

TEST(SmallFcConstants, EffectiveDecays) {  // small_fc_lopt.md 1
  LoDecays d = small_fc_decays();
  expect_vec(d.m, {0.54202735f, 0.9584414f, 0.99802357f}, 2e-7, "momentum");
  expect_vec(&d.v, {0.998886f}, 2e-7, "rms");
  expect_vec(d.f, {0.35621816f, 0.9966259f, 0.9994613f}, 2e-7, "adafactor");
}

TEST(VeloLstm, InputVectorT6) {
  // p = 2 everywhere, so nm = rsqrt(mean p^2) = 0.5; m_k and v are known vectors.
  const float shared[18] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  for (auto shape : {std::vector<int64_t>{5}, {1, 5}, {5, 5}, {3, 3, 4, 6}}) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    const size_t un = static_cast<size_t>(n);
    std::vector<float> p(un, 2.0f), m0(un), m1(un), m2(un), v(un);
    for (int64_t i = 0; i < n; i++) {
      m0[size_t(i)] = float(i) / float(n);
      m1[size_t(i)] = -0.5f + float(i) / float(n);
      m2[size_t(i)] = 0.001f * float(i % 3);
      v[size_t(i)] = 0.01f * float(1 + i % 4);
    }
    const float* m[3] = {m0.data(), m1.data(), m2.data()};
    float row[30];
    velo_lstm_input(shared, shape, p.data(), m, v.data(), n, row);
    for (int j = 0; j < 18; j++) EXPECT_EQ(row[j], shared[j]);
    double mean_v = 0;
    for (float x : v) mean_v += 0.5 * x;
    mean_v /= double(n);
    EXPECT_NEAR(row[18], 0.5 * std::min(5.0, std::max(-5.0, std::log(1e-8 + 10 * mean_v))), 1e-6);
    int rank = 0;
    for (auto d : shape) rank += d > 1;
    for (int r = 0; r < 5; r++) EXPECT_EQ(row[19 + r], r == rank ? 1.0f : 0.0f);
    const std::vector<float>* ms[3] = {&m0, &m1, &m2};
    for (int k = 0; k < 3; k++) {
      double mu = 0, vm = 0, vv = 0;
      for (float x : *ms[k]) mu += 0.5 * x;
      mu /= double(n);
      for (int64_t i = 0; i < n; i++) {
        vm += std::pow(0.5 * (*ms[k])[size_t(i)] - mu, 2);
        vv += std::pow(0.5 * v[size_t(i)] - mu, 2);  // centred on the momentum mean
      }
      auto la = [](double x) { return 0.5 * std::min(5.0, std::max(-5.0, std::log(1e-8 + std::fabs(10 * x)))); };
      EXPECT_NEAR(row[24 + k], la(vm / double(n)), 1e-5) << shape_str(shape) << " k=" << k;
      EXPECT_NEAR(row[27 + k], la(vv / double(n)), 1e-5) << shape_str(shape) << " k=" << k;
    }
  }
}

TEST(VeloLstm, MaxPoolSymmetryT5) {
  VeloWeights w = random_velo_weights(21, 0.05f);
  const int n = 5;
  std::mt19937 rng(2);
  std::normal_distribution<float> z;
  std::vector<float> X(n * 30), h(n * 512), c(n * 512);
  for (auto& x : X) x = z(rng);
  for (auto& x : h) x = 0.3f * z(rng);
  for (auto& x : c) x = 0.3f * z(rng);
  std::vector<float> h1 = h, c1 = c, ctl1(n * 256), lr1(n);
  velo_lstm(w, n, X.data(), h1.data(), c1.data(), ctl1.data(), lr1.data());
  const int perm[n] = {3, 0, 4, 1, 2};  // row i of the permuted batch is row perm[i] of the original
  std::vector<float> Xp(n * 30), hp(n * 512), cp(n * 512), ctl2(n * 256), lr2(n);
  for (int i = 0; i < n; i++) {
    std::copy_n(&X[perm[i] * 30], 30, &Xp[i * 30]);
    std::copy_n(&h[perm[i] * 512], 512, &hp[i * 512]);
    std::copy_n(&c[perm[i] * 512], 512, &cp[i * 512]);
  }
  velo_lstm(w, n, Xp.data(), hp.data(), cp.data(), ctl2.data(), lr2.data());
  for (int i = 0; i < n; i++) {
    EXPECT_EQ(lr2[i], lr1[perm[i]]);
    for (int k = 0; k < 256; k++) ASSERT_EQ(ctl2[i * 256 + k], ctl1[perm[i] * 256 + k]);
    for (int k = 0; k < 512; k++) ASSERT_EQ(hp[i * 512 + k], h1[perm[i] * 512 + k]);
  }
  // The max couples the rows: changing one tensor's input changes another's output.
  Xp = X;
  Xp[0] += 50.0f;
  std::vector<float> h3 = h, c3 = c, ctl3(n * 256), lr3(n);
  velo_lstm(w, n, Xp.data(), h3.data(), c3.data(), ctl3.data(), lr3.data());
  EXPECT_NE(lr3[1], lr1[1]);
}

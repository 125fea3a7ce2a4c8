// The CPU references against closed forms and properties that follow from the specifications.
#include <cmath>

#include "common/bf16_host.h"
#include "optim/ref/ref_optim.h"
#include "tests/test_util.h"

namespace {
ParamTable one_tensor(std::vector<int64_t> shape, Role role = Role::Hidden, bool decay = true) {
  ParamTable t;
  t.add(tensor_spec("w", std::move(shape), role, decay));
  return t;
}
std::vector<float> random_vec(size_t n, std::mt19937& rng, float sd) {
  std::normal_distribution<float> z(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = z(rng);
  return v;
}
}  // namespace

TEST(RefAdamW, ConstantGradientGivesSignSteps) {
  // With a constant gradient the bias-corrected moments are exactly g and g^2, so every step is
  // p <- p(1 - lr wd) - lr g / (|g| + eps).
  ParamTable t = one_tensor({3, 5});
  OptimOptions o;
  o.adamw.lr = 0.01;
  o.adamw.weight_decay = 0.1;
  auto opt = make_ref_optimizer("adamw", o, t);
  std::mt19937 rng(1);
  std::vector<float> p = random_vec(size_t(t.total_elems()), rng, 1.0f), g = random_vec(p.size(), rng, 0.3f);
  std::vector<double> expect(p.begin(), p.end());
  for (int s = 0; s < 10; s++) {
    opt->step(p, g);
    for (int i = 0; i < 15; i++) {
      expect[size_t(i)] = expect[size_t(i)] * (1 - 0.01 * 0.1) - 0.01 * g[size_t(i)] / (std::fabs(g[size_t(i)]) + 1e-8);
      ASSERT_NEAR(p[size_t(i)], expect[size_t(i)], 2e-6) << "step " << s << " elem " << i;
    }
  }
  EXPECT_EQ(opt->steps_done(), 10);
}

TEST(RefAdamW, GradScaleAndNoDecayFlag) {
  ParamTable t = one_tensor({4}, Role::Bias, /*decay=*/false);
  OptimOptions o;
  o.adamw.weight_decay = 0.5;
  auto a = make_ref_optimizer("adamw", o, t), b = make_ref_optimizer("adamw", o, t);
  std::vector<float> p1 = {1, 2, 3, 4}, p2 = p1, g = {0.4f, -0.2f, 0.1f, 3.0f}, g2 = g;
  for (auto& x : g2) x *= 0.25f;
  for (int s = 0; s < 3; s++) {
    a->step(p1, g, 0.25f);
    b->step(p2, g2, 1.0f);
  }
  EXPECT_EQ(p1, p2);
  // No weight decay on this tensor: the first step is exactly -lr*sign(g) away (up to eps).
  auto c = make_ref_optimizer("adamw", o, t);
  std::vector<float> p3 = {1, 2, 3, 4};
  c->step(p3, g);
  EXPECT_NEAR(p3[0], 1 - 1e-3, 1e-7);
  EXPECT_NEAR(p3[1], 2 + 1e-3, 1e-7);
}

TEST(RefAdafactor, RankOneGradientFirstStepIsSignTimesAlpha) {
  // Step 1 has weight 1, so row_var/col_var are the exact means of g^2. For a rank-one g^2 the factored
  // estimate is exact, U = sign(g), RMS(U) = 1 and p1 = p0 - alpha sign(g) with
  // alpha = max(eps2, RMS(p0)) * min(lr, 1). Checked on a batched 3-D tensor.
  ParamTable t = one_tensor({2, 6, 9});
  OptimOptions o;
  auto opt = make_ref_optimizer("adafactor", o, t);
  std::mt19937 rng(3);
  std::vector<float> p = random_vec(size_t(t.total_elems()), rng, 0.5f), g(p.size());
  for (int b = 0; b < 2; b++)
    for (int r = 0; r < 6; r++)
      for (int c = 0; c < 9; c++) g[size_t(b * 54 + r * 9 + c)] = float((r + 1) * (c % 2 ? -1 : 1) * (c + 2) * (b + 1));
  const std::vector<float> p0 = p;
  double ss = 0;
  for (int i = 0; i < 108; i++) ss += double(p0[size_t(i)]) * p0[size_t(i)];
  const double alpha = std::max(1e-3, std::sqrt(ss / 108)) * 1e-2;
  opt->step(p, g);
  for (int i = 0; i < 108; i++)
    EXPECT_NEAR(p[size_t(i)], p0[size_t(i)] - alpha * (g[size_t(i)] > 0 ? 1 : -1), 1e-6) << i;
}

TEST(RefAdafactor, VectorFirstStepAndUpdateClipping) {
  // 1-D: variance = g^2 after step 1, U = sign(g). With d = 1 the applied update has RMS alpha*min(RMS(U), d).
  ParamTable t = one_tensor({64}, Role::Bias);
  OptimOptions o;
  auto opt = make_ref_optimizer("adafactor", o, t);
  std::mt19937 rng(4);
  std::vector<float> p = random_vec(64, rng, 1.0f), g = random_vec(64, rng, 1.0f);
  std::vector<float> p0 = p;
  double ss = 0;
  for (float x : p0) ss += double(x) * x;
  double alpha = std::sqrt(ss / 64) * 1e-2;
  opt->step(p, g);
  for (int i = 0; i < 64; i++) EXPECT_NEAR(p[size_t(i)], p0[size_t(i)] - alpha * (g[size_t(i)] > 0 ? 1 : -1), 1e-6);
  // Step 2 with a very different gradient: RMS(U) > 1, so the step is clipped to RMS alpha_2 * d.
  std::vector<float> g2 = random_vec(64, rng, 30.0f), p1 = p;
  ss = 0;
  for (float x : p1) ss += double(x) * x;
  double alpha2 = std::sqrt(ss / 64) * 1e-2;
  opt->step(p, g2);
  double us = 0;
  for (int i = 0; i < 64; i++) us += double(p[size_t(i)] - p1[size_t(i)]) * (p[size_t(i)] - p1[size_t(i)]);
  EXPECT_NEAR(std::sqrt(us / 64), alpha2, alpha2 * 1e-4);
}

TEST(RefAdafactor, RelativeStepFollowsOneOverSqrtT) {
  // rho_t = min(lr, 1/sqrt(t)): with lr = 1 the first steps use 1/sqrt(t); and eps2 floors RMS(p).
  ParamTable t = one_tensor({5}, Role::Bias);
  OptimOptions o;
  o.adafactor.lr = 1.0;
  auto opt = make_ref_optimizer("adafactor", o, t);
  std::vector<float> p(t.total_elems(), 0.0f), g = {1, 1, 1, 1, 1};
  g.resize(p.size(), 0.0f);
  for (int s = 1; s <= 4; s++) {
    std::vector<float> before = p;
    opt->step(p, g);
    double rms = 0;
    for (int i = 0; i < 5; i++) rms += double(before[size_t(i)]) * before[size_t(i)];
    rms = std::sqrt(rms / 5);
    double alpha = std::max(1e-3, rms) / std::sqrt(double(s));
    EXPECT_NEAR(before[0] - p[0], alpha, alpha * 1e-5) << "step " << s;
  }
}

TEST(RefMuon, NewtonSchulzOnDiagonalIsTheScalarPolynomial) {
  // For a diagonal matrix every GEMM stays diagonal, so each singular value follows
  // x <- a x + b x^3 + c x^5 on its own. Checks orientation handling for wide, tall and square.
  MuonOptions mo;
  for (auto [R, C] : {std::pair<int, int>{4, 7}, {7, 4}, {5, 5}}) {
    int m = std::min(R, C);
    std::vector<float> x(size_t(R * C), 0.0f);
    std::vector<double> d = {0.9, 0.5, 0.3, 0.1, 0.05};
    double nrm = 0;
    for (int i = 0; i < m; i++) nrm += d[size_t(i)] * d[size_t(i)];
    for (int i = 0; i < m; i++) x[size_t(i * C + i)] = bf16_round(float(d[size_t(i)] / std::sqrt(nrm)));
    auto out = ref_newton_schulz(x, R, C, mo);
    for (int i = 0; i < R; i++)
      for (int j = 0; j < C; j++) {
        if (i != j || i >= m) {
          EXPECT_EQ(out[size_t(i * C + j)], 0.0f);
          continue;
        }
        // The same recurrence with the reference's bf16 rounding points: must agree exactly.
        float v = x[size_t(i * C + i)];
        double exact = v;
        for (int s = 0; s < 5; s++) {
          float a = bf16_round(float(double(v) * v));
          float b = bf16_round(float(mo.ns_c) * float(double(a) * a) + float(mo.ns_b) * a);
          v = bf16_round(float(double(b) * v) + float(mo.ns_a) * v);
          exact = mo.ns_a * exact + mo.ns_b * std::pow(exact, 3) + mo.ns_c * std::pow(exact, 5);
        }
        EXPECT_EQ(out[size_t(i * C + i)], v) << R << "x" << C << " i=" << i;
        EXPECT_NEAR(v, exact, 0.06 * std::fabs(exact));  // bf16 drift stays small
        EXPECT_GT(v, 0.5);                               // small singular values are pushed up towards 1
        EXPECT_LT(v, 1.3);
      }
  }
}

TEST(RefMuon, StepOnDiagonalGradientAndAuxAdamW) {
  // Step 1: buf = (1-mu) g, nesterov u = lerp(g, buf, mu); normalisation removes the scale, so the
  // update is -lr * sqrt(max(1, R/C)) * NS(diag / ||diag||). The embedding goes through aux AdamW.
  ParamTable t;
  t.add(tensor_spec("w", {6, 3}, Role::Hidden));
  t.add(tensor_spec("wte", {10, 3}, Role::Embedding));
  OptimOptions o;
  o.muon.lr = 0.02;
  auto opt = make_ref_optimizer("muon", o, t);
  std::mt19937 rng(5);
  std::vector<float> p = random_vec(size_t(t.total_elems()), rng, 0.1f), g(p.size(), 0.0f);
  std::vector<float> diag = {3.0f, 1.0f, 0.5f};
  for (int i = 0; i < 3; i++) g[size_t(i * 3 + i)] = diag[size_t(i)];
  for (int i = 0; i < 30; i++) g[size_t(t[1].offset + i)] = 0.01f * float(i - 15);
  std::vector<float> p0 = p;
  opt->step(p, g);
  double nrm = std::sqrt(9.0 + 1.0 + 0.25);
  for (int i = 0; i < 3; i++) {
    double v = bf16_round(float(diag[size_t(i)] / nrm));
    for (int s = 0; s < 5; s++) v = o.muon.ns_a * v + o.muon.ns_b * v * v * v + o.muon.ns_c * std::pow(v, 5);
    double expect = p0[size_t(i * 3 + i)] * (1 - 0.02 * 0.1) - 0.02 * std::sqrt(2.0) * v;
    EXPECT_NEAR(p[size_t(i * 3 + i)], expect, 0.02 * std::sqrt(2.0) * 0.03 * std::fabs(v));
  }
  EXPECT_NEAR(p[1], p0[1] * (1 - 0.002), 1e-7);  // off-diagonal: only weight decay
  // Aux AdamW (lr 3e-4, no weight decay): first step is -lr*sign(g).
  for (int i = 0; i < 30; i++) {
    float gi = g[size_t(t[1].offset + i)];
    float expect = p0[size_t(t[1].offset + i)] - (gi == 0 ? 0.0f : (gi > 0 ? 3e-4f : -3e-4f));
    EXPECT_NEAR(p[size_t(t[1].offset + i)], expect, 1e-7) << i;
  }
}

TEST(RefGradNorm, MatchesDirectSum) {
  ParamTable t = one_tensor({3, 4});
  std::vector<float> g(size_t(t.total_elems()), 0.0f);
  for (int i = 0; i < 12; i++) g[size_t(i)] = float(i);
  g[20] = 1000.0f;  // padding is not part of any tensor
  EXPECT_DOUBLE_EQ(ref_grad_norm(t, g), std::sqrt(506.0));
}

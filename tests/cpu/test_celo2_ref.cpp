// The CELO2 / ELO_CELO2 references against the test vectors of celo2.md 10 (verified there against PyLO
// naive): probe weights that pass one normalised feature to the direction, the real weights' MLP outputs
// and trajectories, Newton-Schulz against a closed form, the AdamW side path and its routing.
#include <cmath>

#include "tests/cpu/celo2_test_util.h"
#include "tests/cpu/lopt_probes.h"

namespace {
OptimOptions opts(double lr = 1e-2, double wd = 0.1) {
  OptimOptions o;
  o.celo2.lr = lr;
  o.celo2.weight_decay = wd;
  return o;
}
std::vector<float> filled(int64_t n, float x) { return std::vector<float>(static_cast<size_t>(n), x); }
const Celo2Weights& real() {
  static const Celo2Weights w = load_celo2_weights("");
  return w;
}
}  // namespace

TEST(Celo2Ref, MlpOnTheRealWeights) {  // celo2.md 10.1, 10.2: the MLP on the normalised features it describes
  auto run = [](std::vector<int> plus, std::vector<int> minus) {
    float x[30] = {0}, out[3];
    for (int c : plus) x[c] = 1.0f;
    for (int c : minus) x[c] = -1.0f;
    celo2_mlp(real(), x, 30, out);
    return std::vector<float>(out, out + 3);
  };
  const std::vector<int> ones = {10, 21, 22, 23, 24, 25, 26};  // rho and the rsqrt(R), rsqrt(C) channels
  auto with = [&](std::vector<int> a, std::vector<int> b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  expect_near_all(run(with({2}, ones), {}), {-0.0144385, 0.2768289, -0.0150899}, 2e-7, "g = 0, p > 0");
  expect_near_all(run(ones, {2}), {-0.1446718, 0.4066263, -0.1330044}, 2e-7, "g = 0, p < 0");
  const std::vector<int> sg = {0, 1, 3, 4, 5, 7, 8, 9, 11, 12, 13, 14, 27, 28, 29};
  const std::vector<int> rest = {6, 10, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26};
  expect_near_all(run(with(with(sg, {2}), rest), {}), {0.9357261, 0.4832680, -0.6010675}, 2e-7, "g > 0, p > 0");
  expect_near_all(run(with(sg, rest), {2}), {0.9930375, 0.4519925, -0.5645994}, 2e-7, "g > 0, p < 0");
  expect_near_all(run(with({2}, rest), sg), {-0.7368277, 1.0510316, -0.9340856}, 2e-7, "g < 0, p > 0");
  expect_near_all(run(rest, with(sg, {2})), {-0.8920930, 1.2217245, -1.2131041}, 2e-7, "g < 0, p < 0");
}

TEST(Celo2Ref, ZeroAndConstantGradients) {  // celo2.md 10.1, 10.2: u = sign(D) everywhere
  const ParamTable t = table_of({{{3, 4}}});
  for (float c : {0.5f, -0.5f}) {  // both give D < 0: p moves up by lr, less the decay (a frozen tensor moves)
    auto o = make_ref_celo2(t, opts(), real());
    auto p = run_one(
        *o, t, filled(12, c), [](int) { return filled(12, 0.0f); }, 2);
    expect_near_all(p[0], std::vector<double>(12, c > 0 ? 0.5095 : -0.4895), 1e-7, "zero g, step 1");
    expect_near_all(p[1], std::vector<double>(12, c > 0 ? 0.5189905 : -0.4790105), 1e-7, "zero g, step 2");
  }
  struct Case {
    float g, c;
    double p[3];
  };
  for (const Case& k :
       {Case{0.3f, 0.5f, {0.4895, 0.4790105, 0.4685315}}, Case{0.3f, -0.5f, {-0.5095, -0.5189905, -0.5284715}},
        Case{-0.3f, 0.5f, {0.5095, 0.5189905, 0.5284715}}, Case{-0.3f, -0.5f, {-0.4895, -0.4790105, -0.4685315}}}) {
    auto o = make_ref_celo2(t, opts(), real());
    auto p = run_one(
        *o, t, filled(12, k.c), [&](int) { return filled(12, k.g); }, 3);
    for (int s = 0; s < 3; s++) expect_near_all(p[size_t(s)], std::vector<double>(12, k.p[s]), 1e-7, "constant g");
  }
}

TEST(Celo2Ref, RankOneGradientBothOrientations) {  // celo2.md 10.3: probe channel 0
  const float u[4] = {1, 2, 3, 4}, v[6] = {1, -1, 2, -2, 3, -3};
  const std::vector<double> row0 = {-0.0016903, 0.0016903, -0.0033806, 0.0033806, -0.0050709, 0.0050709};
  for (bool tall : {false, true}) {
    const ParamTable t = table_of({{tall ? std::vector<int64_t>{6, 4} : std::vector<int64_t>{4, 6}}});
    std::vector<float> g(24);
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 6; j++) g[size_t(tall ? j * 4 + i : i * 6 + j)] = 0.01f * u[i] * v[j];
    auto o = make_ref_celo2(t, opts(), celo2_probe_weights(0));
    auto p = run_one(
        *o, t, filled(24, 0.0f), [&](int) { return g; }, 1)[0];
    for (int j = 0; j < 6; j++) EXPECT_NEAR(p[size_t(tall ? j * 4 : j)], row0[size_t(j)], 2e-7) << tall << " " << j;
  }
}

TEST(Celo2Ref, RowMatrixAndTheClamps) {  // celo2.md 10.4
  {
    const ParamTable t = table_of({{{1, 5}}});
    auto o = make_ref_celo2(t, opts(), celo2_probe_weights(0));
    auto p = run_one(
        *o, t, filled(5, 0.0f),
        [](int) {
          return std::vector<float>{0.3f, -0.1f, 0.2f, 0.05f, -0.4f};
        },
        1);
    expect_near_all(p[0], {-0.0121967, 0.0040656, -0.0081312, -0.0020328, 0.0162623}, 2e-7, "(1,5)");
  }
  {
    const ParamTable t = table_of({{{1, 3}}});
    auto o = make_ref_celo2(t, opts(), celo2_probe_weights(0));
    auto p = run_one(
        *o, t, filled(3, 0.0f),
        [](int) {
          return std::vector<float>{5000, 10, -20};
        },
        1);
    expect_near_all(p[0], {-0.0173162, -0.0001732, 0.0003463}, 2e-7, "+-1000 clamp");
  }
  const ParamTable t = table_of({{{1, 4}}, {{2}, Role::Bias}});
  const std::vector<float> g = to_flat(t, {{2.0f, 0.5f, -0.05f, 1.0f}, {3.0f, 0.0f}});
  for (bool clip : {true, false}) {
    OptimOptions o = opts(1e-2, 0.0);
    o.celo2.clip_grad = clip;
    auto r = make_ref_celo2(t, o, celo2_probe_weights(1));
    std::vector<float> p(size_t(t.total_elems()), 0.0f);
    r->step(p, g);
    const std::vector<double> want = clip ? std::vector<double>{-0.0115134, -0.0115134, 0.0015249, -0.0115134}
                                          : std::vector<double>{-0.011094, -0.011094, 0.005547, -0.011094};
    expect_near_all(tensor_of(t, p, 0), want, 2e-7, clip ? "global clip" : "no clip");
  }
  EXPECT_NEAR(ref_global_clip_scale(t, g, 1.0f, 1.0), 0.264883, 1e-6);
}

TEST(Celo2Ref, SquareTieRuleAndPerSliceSemantics) {  // celo2.md 10.5
  const ParamTable t = table_of({{{5, 5}}});
  std::vector<float> g(25);
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 5; j++) g[size_t(i * 5 + j)] = float((i + 1) * (j == 0 ? 5 : 1) * std::cos(float(i + 2 * j)));
  const std::vector<double> rows = {-0.0011125, -0.0016358, -0.0024156, -0.0174227, -0.0136638};
  const std::vector<double> cols = {-0.0222954, -0.0009566, -0.0005534, -0.0010157, -0.0008145};
  for (int c : {15, 18}) {  // R_0 is indexed by storage axis 0 (rows), C_0 by axis 1
    auto o = make_ref_celo2(t, opts(), celo2_probe_weights(c));
    auto p = run_one(
        *o, t, filled(25, 0.0f), [&](int) { return g; }, 1)[0];
    for (int i = 0; i < 5; i++)
      for (int j = 0; j < 5; j++)
        EXPECT_NEAR(p[size_t(i * 5 + j)], c == 15 ? rows[size_t(i)] : cols[size_t(j)], 2e-7) << c << " " << i << j;
  }
  // ndim 3: each (3, 4) slice is normalised on its own, so both slices reach the bias threshold.
  const ParamTable t3 = table_of({{{2, 3, 4}}});
  Celo2Weights w = celo2_probe_weights(0);
  w.b0[0] = w.b0[1] = -0.5f;
  std::vector<float> g3(24, 1.0f);
  std::fill(g3.begin() + 12, g3.end(), 10.0f);
  auto o = make_ref_celo2(t3, opts(), w);
  expect_near_all(run_one(
                      *o, t3, filled(24, 0.0f), [&](int) { return g3; }, 1)[0],
                  std::vector<double>(24, -0.01), 1e-7, "per-slice");
}

TEST(Celo2Ref, AdamWSidePathBothVariants) {  // celo2.md 10.5: p - lr (g / (|g| + 1e-8) + wd p), also later
  const ParamTable t = table_of({{{4}, Role::Bias}});
  const std::vector<float> p0 = {0.5f, -0.25f, 1.5f, 0.0f}, g = {0.2f, -0.02f, 3e-9f, -7.0f};
  for (bool elo : {false, true}) {
    OptimOptions o = opts();
    o.elo_celo2 = o.celo2;
    auto r = elo ? make_ref_elo_celo2(t, o, celo2_probe_weights(0)) : make_ref_celo2(t, o, celo2_probe_weights(0));
    auto p = run_one(
        *r, t, p0, [&](int) { return g; }, 3);
    expect_near_all(p[0], {0.4895, -0.23975, 1.4961923, 0.01}, 1e-7, elo ? "elo_celo2" : "celo2");
    for (int s = 1; s < 3; s++)
      for (size_t i = 0; i < 4; i++) {
        const double before = p[size_t(s - 1)][i];
        EXPECT_NEAR(p[size_t(s)][i], before - 1e-2 * (g[i] / (std::fabs(g[i]) + 1e-8) + 0.1 * before), 2e-7);
      }
  }
}

TEST(Celo2Ref, AdamWLearningRateMultiplierAndDecay) {
  const ParamTable t = table_of({{{3}, Role::Bias}, {{2, 2}}});
  OptimOptions o = opts(1e-2, 0.1);
  o.celo2.adam_lr_mult = 20;
  o.celo2.adam_weight_decay = 0.0;  // its own decay, not celo2.wd
  auto r = make_ref_celo2(t, o, real());
  std::vector<float> p = to_flat(t, {{1.0f, 1.0f, 1.0f}, {0.1f, 0.2f, 0.3f, 0.4f}});
  r->step(p, to_flat(t, {{1.0f, -1.0f, 0.0f}, {0.1f, 0.2f, 0.3f, 0.4f}}));
  expect_near_all(tensor_of(t, p, 0), {1.0 - 0.2, 1.0 + 0.2, 1.0}, 1e-6, "lr x 20, no decay");
}

TEST(Celo2Ref, RoutingByTensorKind) {  // celo2.md 3: which tensors take AdamW
  ParamTable t;
  const int wte = t.add(tensor_spec("wte", {50, 16}, Role::Embedding));
  const int wpe = t.add(tensor_spec("wpe", {8, 16}, Role::PosEmbedding));
  const int cls = t.add(tensor_spec("cls", {1, 1, 16}, Role::PosEmbedding));
  const int patch = t.add(tensor_spec("patch", {16, 3, 4, 4}, Role::InputProj));
  const int hid = t.add(tensor_spec("fc", {64, 16}, Role::Hidden));
  const int conv = t.add(tensor_spec("conv", {8, 4, 3, 3}, Role::Hidden));
  const int head = t.add(tensor_spec("head", {10, 16}, Role::Head));
  const int bias = t.add(tensor_spec("b", {64}, Role::Bias, false));
  const int gain = t.add(tensor_spec("ln", {16}, Role::NormGain, false));
  TensorSpec forced = tensor_spec("forced", {16, 16}, Role::Hidden);
  forced.owner = Owner::AdamW;
  const int own = t.add(forced);
  TensorSpec taken = tensor_spec("head2", {10, 16}, Role::Head);
  taken.owner = Owner::Muon;
  const int head2 = t.add(taken);
  Celo2Options c;
  for (int i : {wte, wpe, cls, patch, head, bias, gain, own}) EXPECT_TRUE(celo2_uses_adamw(t[i], c)) << t[i].name;
  for (int i : {hid, conv, head2}) EXPECT_FALSE(celo2_uses_adamw(t[i], c)) << t[i].name;
  c.adamw_head = false;
  EXPECT_FALSE(celo2_uses_adamw(t[head], c));
  c.adamw_1d = false;  // PyLO use_adamw_for_1d=False: everything through the MLP, embeddings included
  for (const auto& ti : t.tensors()) EXPECT_FALSE(celo2_uses_adamw(ti, c)) << ti.name;
}

TEST(Celo2Ref, VectorsThroughTheMlpWithoutAdamW) {  // celo2.md 5.6.2: 15 features, no NS, one slice
  const ParamTable t = table_of({{{5}, Role::Bias}});
  OptimOptions o = opts(1e-2, 0.0);
  o.celo2.adamw_1d = false;
  const std::vector<float> g = {0.3f, -0.1f, 0.2f, 0.05f, -0.4f};
  double n2 = 0;
  for (float x : g) n2 += double(x) * x;
  for (int c : {0, 11}) {  // g itself, and g rsqrt(V_0 + 1e-9) = sign(g) nearly (V_0 = 0.1 g^2 + 1e-31)
    auto r = make_ref_celo2(t, o, celo2_probe_weights(c));
    auto p = run_one(
        *r, t, filled(5, 0.0f), [&](int) { return g; }, 1)[0];
    for (size_t i = 0; i < 5; i++) {
      const double want = c == 0 ? -1e-2 * g[i] * std::sqrt(5.0 / n2) : -1e-2 * (g[i] > 0 ? 1 : -1);
      EXPECT_NEAR(p[i], want, 2e-6) << c << " " << i;
    }
  }
}

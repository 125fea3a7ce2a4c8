// ELO reference (celo2.md 8, 10.5): small_fc_lopt's features through probe weights, ELO's fixed decays,
// the time features, weight decay on the parameter before the step, nan_to_num, and PyLO's global clip.
#include <cfloat>
#include <cmath>

#include "tests/cpu/celo2_test_util.h"
#include "tests/cpu/lopt_probes.h"

namespace {
OptimOptions elo_opts(double lr, double wd) {
  OptimOptions o;
  o.elo.lr = lr;
  o.elo.weight_decay = wd;
  return o;
}
}  // namespace

TEST(EloRef, ProbeChannelsOfTheSpec) {
  {  // channel 0: p1 = -lr g rsqrt(1e-5 + mean g^2), normalised over all axes
    const ParamTable t = table_of({{{2, 3}}});
    auto o = make_ref_elo(t, elo_opts(1e-2, 0.1), small_fc_probe_weights(0));
    auto p = run_one(
        *o, t, std::vector<float>(6, 0.0f),
        [](int) { return std::vector<float>{0.3f, -0.1f, 0.2f, 0.05f, -0.4f, 0.0f}; }, 1);
    expect_near_all(p[0], {-0.0133595, 0.0044532, -0.0089064, -0.0022266, 0.0178127, 0}, 2e-7, "channel 0");
  }
  const ParamTable t = table_of({{{3}, Role::Bias}});  // channel 28 = tau_0 = tanh(t - 1), t = 0, 1, 2
  auto o = make_ref_elo(t, elo_opts(1e-2, 0.0), small_fc_probe_weights(28));
  auto p = run_one(
      *o, t, std::vector<float>(3, 0.0f),
      [](int) {
        return std::vector<float>{1, 2, 3};
      },
      3);
  expect_near_all(p[0], std::vector<double>(3, 0.007615942), 1e-8, "tau step 1");
  expect_near_all(p[1], std::vector<double>(3, 0.007615942), 1e-8, "tau step 2");
  expect_near_all(p[2], std::vector<double>(3, 0.0), 1e-8, "tau step 3");
}

TEST(EloRef, WeightDecayActsOnTheParameterBeforeTheStep) {  // E3: unlike small_fc_lopt
  const ParamTable t = table_of({{{2}, Role::Bias}});
  auto o = make_ref_elo(t, elo_opts(0.1, 0.5), small_fc_probe_weights(28));
  auto p = run_one(
      *o, t, {1.0f, -2.0f},
      [](int) {
        return std::vector<float>{0.1f, 0.2f};
      },
      1)[0];
  EXPECT_NEAR(p[0], 1.0 - 0.1 * (-0.7615942 + 0.5 * 1.0), 1e-6);  // 1.0261594; after the step it would be 1.0223514
  EXPECT_NEAR(p[1], -2.0 - 0.1 * (-0.7615942 - 0.5 * 2.0), 1e-6);
}

TEST(EloRef, FixedDecays) {  // E1: rms 0.999 and momentum 0.9 as they are (μLO's would be 0.998886, 0.542)
  const ParamTable t = table_of({{{2}, Role::Bias}});
  struct Probe {
    int channel;
    double decay;
  };
  for (const Probe& k : {Probe{5, 0.999}, Probe{2, 0.9}}) {  // v and m_0: after g = (10, 0) then (0, 10)
    auto o = make_ref_elo(t, elo_opts(1.0, 0.0), small_fc_probe_weights(k.channel));
    auto p = run_one(
        *o, t, {0.0f, 0.0f},
        [](int s) {
          return s == 0 ? std::vector<float>{10, 0} : std::vector<float>{0, 10};
        },
        2);
    const double u0 = -(p[1][0] - p[0][0]), u1 = -(p[1][1] - p[0][1]);  // the second step's features
    EXPECT_NEAR(u0 / u1, k.decay, 1e-6) << "channel " << k.channel;
  }
}

TEST(EloRef, NanToNumAndTheGlobalClip) {
  const ParamTable t = table_of({{{3}, Role::Bias}, {{2, 2}}});
  const std::vector<float> p0 = to_flat(t, {{0.1f, 0.2f, 0.3f}, {0.4f, -0.5f, 0.6f, -0.7f}});
  auto run = [&](const OptimOptions& o, const std::vector<float>& g) {
    auto r = make_ref_elo(t, o, random_small_fc_weights(12));
    std::vector<float> p = p0;
    r->step(p, g);
    r->step(p, g);
    return p;
  };
  const OptimOptions o = elo_opts(1e-2, 0.1);
  std::vector<float> g = to_flat(t, {{0.5f, -0.2f, 0.1f}, {0.3f, 0.0f, -0.4f, 0.2f}});
  std::vector<float> with_nan = g;
  with_nan[1] = NAN;
  g[1] = 0.0f;
  EXPECT_EQ(run(o, with_nan), run(o, g));  // NaN -> 0
  // Global clipping: the same as the gradients scaled beforehand by clip_norm / |g|.
  std::vector<float> big = g;
  for (auto& x : big) x *= 30.0f;
  OptimOptions clip = o;
  clip.elo.clip_grad = true;
  const float s = ref_global_clip_scale(t, big, 1.0f, 1.0);
  std::vector<float> scaled = big;
  for (auto& x : scaled) x *= s;
  EXPECT_EQ(run(clip, big), run(o, scaled));
  EXPECT_NE(run(clip, big), run(o, big));
  // PyLO's `denom > 0` test: a NaN norm leaves the gradients unclipped; an infinite one zeroes them.
  EXPECT_EQ(ref_global_clip_scale(t, with_nan, 1.0f, 1.0), 1.0f);
  std::vector<float> inf = g;
  inf[0] = INFINITY;
  EXPECT_EQ(ref_global_clip_scale(t, inf, 1.0f, 1.0), 0.0f);
  std::vector<float> huge = g;  // 1e20^2 overflows float32 as PyLO's g.float().pow(2) does
  huge[0] = 1e20f;
  EXPECT_EQ(ref_global_clip_scale(t, huge, 1.0f, 1.0), 0.0f);
  EXPECT_NEAR(ref_global_clip_scale(t, g, 1.0f, 0.1), 0.1 / std::sqrt(0.25 + 0.01 + 0.09 + 0.16 + 0.04), 1e-7);
  EXPECT_EQ(ref_global_clip_scale(t, g, 1.0f, 10.0), 1.0f);  // below the threshold: unchanged
}

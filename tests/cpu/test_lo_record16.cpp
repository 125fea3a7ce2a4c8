// The bf16 record's stochastic rounding (optim/lopt/lo_record16.h).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/bf16_host.h"
#include "optim/lopt/celo2_weights.h"
#include "optim/lopt/lo_record16.h"
#include "optim/options.h"
#include "optim/ref/ref_celo2.h"
#include "optim/ref/ref_lopt.h"
#include "tests/test_util.h"

namespace {
float bits_float(uint32_t u) { return lo_r16_cast<float>(u); }

// Values with every kind of low half: normal of both signs, tiny, subnormal, near the largest finite.
std::vector<float> probes() {
  return {1.0f,
          -1.0f,
          0.3f,
          -0.3f,
          1e-3f,
          -7.25e-5f,
          3.3e-20f,
          1e-39f,
          -2e-40f,
          1.2e38f,
          5.5f,
          65504.7f,
          bits_float(0x3f80ffffu),
          bits_float(0x3f7fffffu),
          bits_float(0x00000001u)};
}
}  // namespace

TEST(LoRecord16, RepresentableValuesStayWhateverTheDraw) {
  for (const uint32_t hi : {0x3f80u, 0xbf80u, 0x0001u, 0x7f7fu, 0x4049u, 0x0000u, 0x8000u})
    for (const uint32_t r : {0u, 1u, 0x7fffu, 0x8000u, 0xffffu})
      EXPECT_EQ(lo_bf16_sr(bits_float(hi << 16), r), hi) << std::hex << hi << " r " << r;
}

// Over the 65536 draws the rounded values average to x exactly: lo of them round up by one bf16 step,
// where lo is x's dropped 16 bits, and a step up adds one gap also where it crosses into the next binade.
TEST(LoRecord16, EveryValueIsUnbiasedOverTheDraws) {
  for (const float x : probes()) {
    double sum = 0;
    for (uint32_t r = 0; r < 65536; r++) sum += double(lo_bf16_value(lo_bf16_sr(x, r)));
    EXPECT_EQ(sum, 65536.0 * double(x)) << x;
  }
}

TEST(LoRecord16, InfinitiesAndNaNsStay) {
  const float inf = std::numeric_limits<float>::infinity();
  for (const uint32_t r : {0u, 0xffffu}) {
    EXPECT_EQ(lo_bf16_value(lo_bf16_sr(inf, r)), inf);
    EXPECT_EQ(lo_bf16_value(lo_bf16_sr(-inf, r)), -inf);
    EXPECT_TRUE(std::isnan(lo_bf16_value(lo_bf16_sr(std::nanf(""), r))));
    EXPECT_TRUE(std::isnan(lo_bf16_value(lo_bf16_sr(bits_float(0x7fffffffu), r))));  // no carry into the sign
    EXPECT_TRUE(std::isnan(lo_bf16_value(lo_bf16_sr(bits_float(0x7f800001u), r))));  // a NaN with low bits only
  }
}

// The draws are a function of (step, tensor, element): equal for equal arguments, and about half of the
// 64 bits differ for a neighbouring element or the next step.
TEST(LoRecord16, DrawsRepeatAndDiffer) {
  const uint64_t k = lo_r16_tensor_key(7, 42);
  EXPECT_EQ(lo_r16_draws(k, 123), lo_r16_draws(lo_r16_tensor_key(7, 42), 123));
  double flips = 0;
  const int n = 4096;
  for (int i = 0; i < n; i++) {
    flips += __builtin_popcountll(lo_r16_draws(k, uint64_t(i)) ^ lo_r16_draws(k, uint64_t(i) + 1));
    flips += __builtin_popcountll(lo_r16_draws(k, uint64_t(i)) ^ lo_r16_draws(lo_r16_tensor_key(8, 42), uint64_t(i)));
  }
  EXPECT_NEAR(flips / (2.0 * n), 32.0, 0.5);
}

// Why the rounding is stochastic: an EMA with decay 0.999 towards 1, kept in bf16. Round to nearest stops
// where an update is below half a bf16 step (near 0.2); the stochastic rounding stays with the fp32 EMA.
TEST(LoRecord16, AnEmaOfDecay0999KeepsItsCourse) {
  const float beta = 0.999f, g = 1.0f;
  float exact = 0, nearest = 0, stochastic = 0;
  for (int t = 0; t < 5000; t++) {
    exact = beta * exact + (1 - beta) * g;
    nearest = bf16_round(beta * nearest + (1 - beta) * g);
    const uint32_t r = uint32_t(lo_r16_draws(lo_r16_tensor_key(uint64_t(t), 1), 0) & 0xffffu);
    stochastic = lo_bf16_value(lo_bf16_sr(beta * stochastic + (1 - beta) * g, r));
  }
  EXPECT_NEAR(exact, 1.0f - std::pow(0.999f, 5000.0f), 1e-4f);
  EXPECT_LT(nearest, 0.5f * exact) << "round to nearest was expected to stall";
  EXPECT_NEAR(stochastic, exact, 0.03f * exact);
}

namespace {
std::vector<float> normal(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> z;
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = scale * z(rng);
  return v;
}
bool all_bf16(const std::vector<float>& v) {
  for (const float x : v)
    if (bf16_round(x) != x) return false;
  return true;
}
}  // namespace

// With a key every value of the record is a bf16 after each update; without one they are fp32 values.
TEST(LoRecord16, TheReferenceKeepsTheRecordInBf16WithAKey) {
  const LoDecays d = nominal_decays();
  RefLoTensor a({24, 10}, TieRule::Argsort), b({24, 10}, TieRule::Argsort);
  for (int t = 0; t < 5; t++) {
    const std::vector<float> g = normal(240, uint32_t(t), 0.1f);
    const uint64_t key = lo_r16_tensor_key(uint64_t(t), 3);
    a.update(g, d, &key);
    b.update(g, d);
  }
  for (int k = 0; k < 3; k++) EXPECT_TRUE(all_bf16(a.m[k])) << k;
  EXPECT_TRUE(all_bf16(a.v));
  EXPECT_FALSE(all_bf16(b.m[2]));
  EXPECT_FALSE(all_bf16(b.v));
}

// The VeLO, small_fc_lopt and CELO2 references with bf16 records: a run repeats itself bit for bit, and its
// updates stay within 2% (relative L2) of the fp32 records' over 12 steps while differing from them.
TEST(LoRecord16, LearnedReferencesWithBf16RecordsTrackFp32) {
  ParamTable t;
  t.add(tensor_spec("w", {32, 16}, Role::Hidden));
  t.add(tensor_spec("b", {16}, Role::Bias, false));
  for (const std::string name : {"velo", "small_fc_lopt", "celo2", "elo_celo2"}) {
    SCOPED_TRACE(name);
    auto make = [&](bool bf16) {
      OptimOptions o;
      o.velo.num_steps = 100;
      o.velo.bf16_record = o.small_fc.bf16_record = o.celo2.bf16_record = o.elo_celo2.bf16_record = bf16;
      if (name == "celo2") return make_ref_celo2(t, o, random_celo2_weights(5));
      if (name == "elo_celo2") return make_ref_elo_celo2(t, o, random_celo2_weights(5));
      return name == "velo" ? make_ref_velo(t, o, random_velo_weights(5))
                            : make_ref_small_fc(t, o, random_small_fc_weights(5));
    };
    auto fp32 = make(false), bf16a = make(true), bf16b = make(true);
    std::vector<float> p32 = normal(t.total_elems(), 9, 0.5f), pa = p32, pb = p32;
    double diff = 0, norm = 0;
    for (int s = 0; s < 12; s++) {
      const std::vector<float> g = normal(t.total_elems(), uint32_t(100 + s), 0.05f), before = p32, before_a = pa;
      fp32->step(p32, g, 1.0f, 3.0f - 0.1f * float(s));
      bf16a->step(pa, g, 1.0f, 3.0f - 0.1f * float(s));
      bf16b->step(pb, g, 1.0f, 3.0f - 0.1f * float(s));
      for (size_t i = 0; i < p32.size(); i++) {
        const double u32 = double(p32[i]) - before[i], u16 = double(pa[i]) - before_a[i];
        diff += (u16 - u32) * (u16 - u32);
        norm += u32 * u32;
      }
    }
    EXPECT_EQ(pa, pb);
    EXPECT_NE(pa, p32);
    // measured: VeLO 5.9e-3, small_fc_lopt 3.0e-3, CELO2 4.6e-3, ELO_CELO2 4.9e-3
    EXPECT_LT(std::sqrt(diff / norm), 0.02);
  }
}

// CELO2 / ELO_CELO2 / ELO options: keys, defaults, range checks, the weights each optimizer reads, and
// the reference factory's names.
#include <filesystem>

#include "optim/ref/ref_optim.h"
#include "tests/cpu/celo2_test_util.h"

TEST(Celo2Options, KeysDefaultsAndRanges) {
  OptimOptions o;
  set_option(o, "celo2.lr=3e-4");
  set_option(o, "celo2.adam_lr_mult=20");
  set_option(o, "celo2.adam_wd=0");
  set_option(o, "celo2.orthogonalize=false");
  set_option(o, "celo2.ns_steps=4");
  set_option(o, "elo_celo2.clip_grad=false");
  set_option(o, "elo.exp_mult=0.01");
  set_option(o, "elo_celo2.fast=1");
  EXPECT_EQ(o.celo2.lr, 3e-4);
  EXPECT_EQ(o.celo2.adam_lr_mult, 20);
  EXPECT_EQ(o.celo2.adam_wd(), 0.0);
  EXPECT_FALSE(o.celo2.orthogonalize);
  EXPECT_EQ(o.celo2.ns_steps, 4);
  EXPECT_FALSE(o.elo_celo2.clip_grad);
  EXPECT_EQ(o.elo.exp_mult, 0.01);
  EXPECT_TRUE(o.elo_celo2.fast);
  const OptimOptions d;
  EXPECT_FALSE(d.celo2.fast);                          // -o celo2 keeps PyLO's fp32 arithmetic unless asked
  EXPECT_EQ(d.celo2.adam_wd(), d.celo2.weight_decay);  // PyLO's adam_weight_decay=None
  EXPECT_EQ(d.elo_celo2.adam_wd(), 0.1);
  EXPECT_EQ(d.elo.lr, 1e-3);
  EXPECT_EQ(d.celo2.ns_a, 3.4445);
  // ELO_CELO2's AdamW reads the learned accumulators: it has no betas of its own.
  expect_user_error([&] { set_option(o, "elo_celo2.adam_beta2=0.99"); }, "unknown optimizer option");
  OptimOptions bad;
  bad.celo2.adam_beta2 = 1.0;
  expect_user_error([&] { validate_options("celo2", bad); }, "celo2.adam_beta2 must be in [0, 1)");
  bad = d;
  bad.elo_celo2.ns_steps = 0;
  expect_user_error([&] { validate_options("elo_celo2", bad); }, "elo_celo2.ns_steps must be in [1, 99]");
  bad = d;
  bad.elo.tie = "sideways";
  expect_user_error([&] { validate_options("elo", bad); }, "tie rule must be");
  check_options_apply({"celo2.lr=1e-3"}, {"celo2"});
  expect_user_error([&] { check_options_apply({"elo.lr=1e-3"}, {"celo2"}); }, "is for elo");
}

TEST(Celo2Options, WeightsAndTheReferenceFactory) {
  OptimOptions o;
  check_lopt_weights("celo2", o);  // the shipped default
  expect_user_error([&] { check_lopt_weights("elo", o); }, "ELO weights not found");
  std::string dir;
  {
    const auto tmp = write_random_lopt_weights({"celo2", "elo", "elo_celo2"}, o, 5);
    ASSERT_TRUE(tmp);
    dir = tmp->path();
    EXPECT_TRUE(o.celo2.weights.empty());  // CELO2's real weights need no stand-in
    EXPECT_EQ(o.elo.weights, dir + "/elo");
    EXPECT_EQ(o.elo_celo2.weights, dir + "/elo-celo2");
    const ParamTable t = table_of({{{4, 6}}, {{6}, Role::Bias}});
    for (const std::string name : {"celo2", "elo", "elo_celo2"}) {
      check_lopt_weights(name, o);
      auto r = make_ref_optimizer(name, o, t);
      std::vector<float> p(size_t(t.total_elems()), 0.1f), g(p.size(), 0.01f);
      r->step(p, g);
      EXPECT_EQ(r->steps_done(), 1);
      EXPECT_NE(p[0], 0.1f) << name;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir));
}

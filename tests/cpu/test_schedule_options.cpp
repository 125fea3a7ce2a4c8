#include <cmath>

#include "optim/options.h"
#include "optim/schedule.h"
#include "tests/test_util.h"

TEST(Schedule, Constant) {
  auto s = make_schedule("constant", 0, 0, 0, 0.2);
  for (int64_t i : {0, 1, 1000}) EXPECT_EQ(s.factor(i), 1.0);
}

TEST(Schedule, WarmupThenFlat) {
  auto s = make_schedule("warmup", 4, 0, 0, 0.2);
  EXPECT_DOUBLE_EQ(s.factor(0), 0.25);
  EXPECT_DOUBLE_EQ(s.factor(3), 1.0);
  EXPECT_DOUBLE_EQ(s.factor(100), 1.0);
}

TEST(Schedule, CosineEndpointsAndMidpoint) {
  auto s = make_schedule("cosine", 10, 110, 0.1, 0.2);
  EXPECT_DOUBLE_EQ(s.factor(0), 0.1);
  EXPECT_DOUBLE_EQ(s.factor(9), 1.0);
  EXPECT_DOUBLE_EQ(s.factor(10), 1.0);                  // start of decay: cos(0)
  EXPECT_NEAR(s.factor(60), 0.1 + 0.9 * 0.5, 1e-12);    // halfway through the decay
  EXPECT_NEAR(s.factor(109), 0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 99 / 100)), 1e-12);
  EXPECT_DOUBLE_EQ(s.factor(110), 0.1);
  EXPECT_DOUBLE_EQ(s.factor(500), 0.1);
  for (int i = 11; i < 110; i++) EXPECT_LE(s.factor(i), s.factor(i - 1)) << i;
}

TEST(Schedule, WarmupStableDecay) {
  auto s = make_schedule("wsd", 5, 100, 0.0, 0.2);  // decay over the last 20 steps
  EXPECT_DOUBLE_EQ(s.factor(2), 0.6);
  EXPECT_DOUBLE_EQ(s.factor(50), 1.0);
  EXPECT_DOUBLE_EQ(s.factor(79), 1.0);
  EXPECT_DOUBLE_EQ(s.factor(80), 1.0 - 1.0 / 20);
  EXPECT_DOUBLE_EQ(s.factor(89), 0.5);
  EXPECT_DOUBLE_EQ(s.factor(99), 0.0);
}

TEST(Schedule, BadInput) {
  expect_user_error([] { make_schedule("linear-ish", 0, 0, 0, 0.2); }, "unknown LR schedule");
  expect_user_error([] { make_schedule("cosine", 0, 0, 0, 0.2); }, "total number of steps");
  expect_user_error([] { make_schedule("cosine", 50, 10, 0, 0.2); }, "longer than the whole run");
  expect_user_error([] { make_schedule("wsd", 0, 10, 0, 1.5); }, "decay fraction");
  expect_user_error([] { make_schedule("constant", 3, 0, 0, 0.2); }, "no warmup");
}

TEST(Options, DefaultsAreTorchs) {
  OptimOptions o;
  EXPECT_EQ(o.adamw.lr, 1e-3);
  EXPECT_EQ(o.adamw.beta2, 0.999);
  EXPECT_EQ(o.adamw.weight_decay, 1e-2);
  EXPECT_EQ(o.adafactor.lr, 1e-2);
  EXPECT_EQ(o.adafactor.beta2_decay, -0.8);
  EXPECT_EQ(o.adafactor.eps1_value(), std::ldexp(1.0, -23));
  EXPECT_EQ(o.adafactor.eps2, 1e-3);
  EXPECT_EQ(o.adafactor.weight_decay, 0.0);
  EXPECT_EQ(o.muon.lr, 1e-3);
  EXPECT_EQ(o.muon.weight_decay, 0.1);
  EXPECT_EQ(o.muon.momentum, 0.95);
  EXPECT_TRUE(o.muon.nesterov);
  EXPECT_EQ(o.muon.ns_steps, 5);
  EXPECT_EQ(o.muon.adjust_lr, "original");
}

TEST(Options, SetByKey) {
  OptimOptions o;
  set_option(o, "adamw.lr=3e-4");
  set_option(o, "muon.nesterov=false");
  set_option(o, "muon.aux.beta2=0.95");
  set_option(o, "muon.ns_steps=3");
  set_option(o, "muon.adjust_lr=match_rms_adamw");
  EXPECT_EQ(o.adamw.lr, 3e-4);
  EXPECT_FALSE(o.muon.nesterov);
  EXPECT_EQ(o.muon.aux.beta2, 0.95);
  EXPECT_EQ(o.muon.ns_steps, 3);
  EXPECT_EQ(o.muon.adjust_lr, "match_rms_adamw");
  bool listed = false;
  for (const auto& line : describe_options(o)) listed |= line.rfind("adamw.lr=0.0003", 0) == 0;
  EXPECT_TRUE(listed);
}

TEST(Options, BadInputIsOneClearSentence) {
  OptimOptions o;
  expect_user_error([&] { set_option(o, "adamw.lr"); }, "key=value");
  expect_user_error([&] { set_option(o, "adamw.learning_rate=1"); }, "unknown optimizer option 'adamw.learning_rate'");
  expect_user_error([&] { set_option(o, "adamw.lr=fast"); }, "needs a finite number");
  expect_user_error([&] { set_option(o, "muon.ns_steps=2.5"); }, "needs an integer");
  expect_user_error([&] { set_option(o, "muon.nesterov=maybe"); }, "true or false");
  expect_user_error([&] { validate_options("sgd", o); }, "unknown optimizer 'sgd'; choose one of adamw, adafactor, muon, velo, small_fc_lopt");
  OptimOptions bad = o;
  bad.adafactor.d = 0.5;
  expect_user_error([&] { validate_options("adafactor", bad); }, "adafactor.d must be >= 1 (got 0.5)");
  bad = o;
  bad.adamw.beta2 = 1.0;
  expect_user_error([&] { validate_options("adamw", bad); }, "adamw.beta2 must be in [0, 1)");
  bad = o;
  bad.adafactor.beta2_decay = 0.3;
  expect_user_error([&] { validate_options("adafactor", bad); }, "beta2_decay must be <= 0");
  bad = o;
  bad.muon.adjust_lr = "spectral";
  expect_user_error([&] { validate_options("muon", bad); }, "muon.adjust_lr must be original or match_rms_adamw");
  bad = o;
  bad.muon.aux.lr = -1;
  expect_user_error([&] { validate_options("muon", bad); }, "muon.aux.lr must be >= 0");
}

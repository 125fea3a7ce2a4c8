#include <algorithm>
#include <cmath>
#include <filesystem>

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
  EXPECT_DOUBLE_EQ(s.factor(10), 1.0);                // start of decay: cos(0)
  EXPECT_NEAR(s.factor(60), 0.1 + 0.9 * 0.5, 1e-12);  // halfway through the decay
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

// What a user sees in --help and gets without --set: torch's defaults, read through the option table
// (not the header's constants), and the effective eps1 of Adafactor's "None".
TEST(Options, HelpShowsTorchDefaults) {
  const OptimOptions o;
  const std::vector<std::string> lines = describe_options(o);
  auto value = [&](const std::string& key) {
    for (const auto& l : lines)
      if (l.rfind(key + "=", 0) == 0) return l.substr(key.size() + 1, l.find("  ") - key.size() - 1);
    return std::string("(missing)");
  };
  const std::vector<std::pair<std::string, std::string>> torch = {{"adamw.lr", "0.001"},
                                                                  {"adamw.beta1", "0.9"},
                                                                  {"adamw.beta2", "0.999"},
                                                                  {"adamw.eps", "1e-08"},
                                                                  {"adamw.wd", "0.01"},
                                                                  {"adafactor.lr", "0.01"},
                                                                  {"adafactor.beta2_decay", "-0.8"},
                                                                  {"adafactor.eps2", "0.001"},
                                                                  {"adafactor.d", "1"},
                                                                  {"adafactor.wd", "0"},
                                                                  {"muon.lr", "0.001"},
                                                                  {"muon.wd", "0.1"},
                                                                  {"muon.momentum", "0.95"},
                                                                  {"muon.nesterov", "true"},
                                                                  {"muon.ns_steps", "5"},
                                                                  {"muon.adjust_lr", "original"},
                                                                  {"muon.a", "3.4445"},
                                                                  {"muon.b", "-4.775"},
                                                                  {"muon.c", "2.0315"},
                                                                  {"muon.eps", "1e-07"}};
  for (const auto& kv : torch) EXPECT_EQ(value(kv.first), kv.second) << kv.first;
  EXPECT_EQ(o.adafactor.eps1_value(), std::ldexp(1.0, -23));
  const std::string help = options_help(o);
  for (const auto& l : lines) EXPECT_NE(help.find(l.substr(0, l.find("  "))), std::string::npos) << l;
}

// Every key is wired to a field of its own: setting it to a new value changes its own line in
// describe_options and no other, and printing then parsing a value gives it back.
TEST(Options, EveryKeyOwnsOneFieldAndRoundTrips) {
  const OptimOptions base;
  const std::vector<std::string> before = describe_options(base);
  for (size_t i = 0; i < before.size(); i++) {
    const std::string& line = before[i];
    const std::string key = line.substr(0, line.find('=')),
                      old = line.substr(key.size() + 1, line.find("  ") - key.size() - 1);
    std::string fresh = old == "true" ? "false" : old == "false" ? "true" : "7";
    if (old == "7") fresh = "8";
    const bool text = old.empty() || (old[0] >= 'a' && old[0] <= 'z');
    if (text && old != "true" && old != "false") fresh = "other";
    OptimOptions o = base;
    set_option(o, key + "=" + fresh);
    const std::vector<std::string> after = describe_options(o);
    for (size_t j = 0; j < after.size(); j++)
      if (j == i)
        EXPECT_EQ(after[j].rfind(key + "=" + fresh + "  ", 0), 0u) << after[j];
      else
        EXPECT_EQ(after[j], before[j]) << "setting " << key << " changed another option";
    OptimOptions back = base;  // the printed value parses back to the same value
    set_option(back, key + "=" + old);
    EXPECT_EQ(describe_options(back), before) << key;
  }
  OptimOptions o;  // printed with every digit it needs, so --help shows the value used
  set_option(o, "adamw.lr=0.00061234567891");
  set_option(o, "adamw.beta2=0.1");
  EXPECT_EQ(describe_options(o)[0].rfind("adamw.lr=0.00061234567891  ", 0), 0u) << describe_options(o)[0];
  EXPECT_EQ(describe_options(o)[2].rfind("adamw.beta2=0.1  ", 0), 0u) << describe_options(o)[2];
}

TEST(Options, EachBelongsToItsOptimizer) {
  EXPECT_EQ(option_optimizer("adamw.lr"), "adamw");
  EXPECT_EQ(option_optimizer("muon.aux.lr"), "muon");  // Muon's AdamW for the tensors it does not take
  EXPECT_EQ(option_optimizer("small_fc_lopt.weights"), "small_fc_lopt");
  for (const auto& line : describe_options(OptimOptions())) {
    const std::string owner = option_optimizer(line.substr(0, line.find('=')));
    EXPECT_NE(std::find(optimizer_names().begin(), optimizer_names().end(), owner), optimizer_names().end()) << line;
  }
  check_options_apply({"muon.lr=0.01", "muon.aux.beta2=0.9"}, {"muon"});
  check_options_apply({"muon.lr=0.01", "adamw.lr=1e-3"}, {"adamw", "muon"});
  expect_user_error(
      [] { check_options_apply({"muon.lr=-5"}, {"adamw"}); },
      "option muon.lr=-5 is for muon, which is not the optimizer selected (adamw); remove it or choose -o muon.");
  expect_user_error(
      [] {
        check_options_apply({"velo.lr=2"}, {"adamw", "muon"});
      },
      "not the optimizer selected (adamw, muon)");
}

TEST(Options, RandomLoptWeightsAreReadableAndRemoved) {
  std::string dir;
  {
    OptimOptions o;
    o.velo.weights = "given";  // set weights are kept
    const auto tmp = write_random_lopt_weights({"adamw", "small_fc_lopt", "velo"}, o, 3);
    ASSERT_TRUE(tmp);
    dir = tmp->path();
    EXPECT_EQ(o.velo.weights, "given");
    EXPECT_EQ(o.small_fc.weights, dir + "/mulo");
    check_lopt_weights("small_fc_lopt", o);
    EXPECT_TRUE(std::filesystem::exists(dir));
  }
  EXPECT_FALSE(std::filesystem::exists(dir));
  OptimOptions o;
  EXPECT_EQ(write_random_lopt_weights({"adamw", "muon"}, o, 3), nullptr);  // nothing to write, no folder
  expect_user_error([&] { check_lopt_weights("velo", o); }, "VeLO weights not found");
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
  expect_user_error([&] { set_option(o, "adamw.lr=fast"); }, "option adamw.lr needs a number, got 'fast'.");
  expect_user_error([&] { set_option(o, "adamw.lr=inf"); }, "option adamw.lr needs a finite number");
  expect_user_error([&] { set_option(o, "adamw.lr=1e999"); }, "option adamw.lr is too large: got '1e999'");
  expect_user_error([&] { set_option(o, "muon.ns_steps=2.5"); }, "needs an integer");
  expect_user_error(
      [&] { set_option(o, "muon.ns_steps=1e10"); },
      "option muon.ns_steps is too large: got '1e10' (it takes integers from -2147483648 to 2147483647).");
  expect_user_error([&] { set_option(o, "velo.num_steps=1e19"); }, "option velo.num_steps is too large");
  set_option(o, "velo.num_steps=9007199254740993");  // exact, not rounded through a double
  EXPECT_EQ(o.velo.num_steps, 9007199254740993);
  expect_user_error([&] { set_option(o, "muon.nesterov=maybe"); }, "true or false");
  expect_user_error([&] { validate_options("sgd", o); },
                    "unknown optimizer 'sgd'; choose one of adamw, adafactor, muon, velo, small_fc_lopt");
  OptimOptions bad = o;
  bad.adafactor.d = 0.5;
  expect_user_error([&] { validate_options("adafactor", bad); }, "adafactor.d must be >= 1 (got 0.5)");
  bad = o;
  set_option(bad, "muon.ns_workspace_mb=1e10");  // its bytes / a matrix's once overflowed an int
  expect_user_error([&] { validate_options("muon", bad); },
                    "muon.ns_workspace_mb must be in [16, 1048576] MiB (got 1e+10).");
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

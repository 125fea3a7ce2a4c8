// Learned-optimizer weight files whose structure is right but whose values are not numbers: refused with
// one sentence when read (check_lopt_weights reads them before any GPU work), in every format.
#include <cmath>
#include <limits>

#include "optim/lopt/celo2_weights.h"
#include "optim/lopt/lopt_weights.h"
#include "optim/options.h"
#include "tests/test_util.h"

namespace {
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();
}  // namespace

TEST(WeightValues, SmallFcAndEloRefuseNaN) {
  const std::string d = make_temp_dir() + "/mulo";
  SmallFcWeights w = random_small_fc_weights(5);
  w.w1[7] = kNaN;
  save_small_fc_weights(d, w);
  expect_user_error([&] { load_small_fc_weights(d); },
                    "has the value nan in tensor 'network.linear_0.weight' (element 7); meta-weights must be finite");
  expect_user_error([&] { load_elo_weights(d); }, "network.linear_0.weight");
  OptimOptions o;
  o.small_fc.weights = d;
  expect_user_error([&] { check_lopt_weights("small_fc_lopt", o); }, "meta-weights must be finite numbers");
}

TEST(WeightValues, VeloRefusesInfinityInBothFormats) {
  const std::string d = make_temp_dir();
  VeloWeights w = random_velo_weights(6);
  w.cand[VeloWeights::kB2] = -kInf;  // candidate 0's output bias
  save_velo_weights_pylo(d + "/pylo", w);
  expect_user_error([&] { load_velo_weights(d + "/pylo"); }, "has the value -inf in tensor 'output_bias_'");
  w = random_velo_weights(6);
  w.lstm_b[3] = kNaN;
  save_velo_weights_jax(d + "/params", w);
  expect_user_error([&] { load_velo_weights(d + "/params"); }, "rnn_params/rnn/linear/b' (element 3)");
}

TEST(WeightValues, Celo2RefusesNaN) {
  const std::string d = make_temp_dir() + "/celo2";
  Celo2Weights w = random_celo2_weights(7);
  w.b0[2] = kNaN;
  save_celo2_weights(d, w);
  expect_user_error([&] { load_celo2_weights(d); }, "has the value nan in tensor 'b0' (element 2)");
  expect_user_error([&] { load_elo_celo2_weights(d); }, "tensor 'b0'");
}

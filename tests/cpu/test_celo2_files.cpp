// CELO2 / ELO_CELO2 / ELO weight files: the real CELO2 file that ships with the repository (checksums of
// celo2.md 7.2), files generated in PyLO's Hub layout (ELO and ELO_CELO2 weights are not reachable from
// here), and every malformed file refused with one sentence.
#include <cmath>
#include <cstdio>
#include <functional>

#include "optim/lopt/celo2_weights.h"
#include "optim/lopt/lopt_weights.h"
#include "optim/lopt/safetensors.h"
#include "tests/test_util.h"

namespace {
double sum_all(const Celo2Weights& w, bool absolute) {
  double s = 0;
  for (const auto* v : {&w.w0, &w.b0, &w.w1, &w.b1, &w.w2, &w.b2})
    for (float x : *v) s += absolute ? std::fabs(double(x)) : double(x);
  return s;
}
}  // namespace

TEST(Celo2Files, RealWeightsShipAndMatchTheChecksums) {
  const Celo2Weights w = load_celo2_weights("");  // the default: optim/lopt/weights/celo2
  EXPECT_EQ(w.out, 3);
  ASSERT_EQ(w.w0.size(), 240u);
  EXPECT_EQ(w.b0.size() + w.w1.size() + w.b1.size() + w.w2.size() + w.b2.size() + w.w0.size(), 347u);
  EXPECT_NEAR(sum_all(w, false), 5.1863506, 1e-6);
  EXPECT_NEAR(sum_all(w, true), 57.1505889, 1e-6);
  // Rows of the (in, out) matrices: a transposed load shows here (celo2.md 7.2).
  const float b0[3] = {0.0164828f, -0.04551803f, -0.008652236f};
  const float w013[3] = {0.4512062f, -0.2824347f, -0.2704955f};  // w0.13 row 0 = stacked row 27
  const float dw0[3] = {0.3510825f, -0.6514087f, 0.2150715f}, dw1[3] = {0.08098154f, -0.0349711f, 0.4008064f};
  const float db1[3] = {0.09912589f, 0.00138003f, 0.03109379f};
  for (int k = 0; k < 3; k++) {
    EXPECT_FLOAT_EQ(w.b0[size_t(k)], b0[k]);
    EXPECT_FLOAT_EQ(w.w0[size_t(27 * 8 + k)], w013[k]);
    EXPECT_FLOAT_EQ(w.w1[size_t(k)], dw0[k]);
    EXPECT_FLOAT_EQ(w.w2[size_t(k)], dw1[k]);
    EXPECT_FLOAT_EQ(w.b2[size_t(k)], db1[k]);
  }
  EXPECT_EQ(load_celo2_weights("optim/lopt/weights/celo2/model.safetensors").w0, w.w0);  // the file itself
}

TEST(Celo2Files, WriterRoundTripsInPyloLayout) {
  const std::string d = make_temp_dir() + "/celo2";
  const Celo2Weights w = random_celo2_weights(7);
  save_celo2_weights(d, w);
  // config.json byte for byte as PyLO's save_pretrained wrote the shipped one.
  EXPECT_EQ(read_file(d + "/config.json"), read_file("optim/lopt/weights/celo2/config.json"));
  const TensorMap t = read_safetensors(d + "/model.safetensors");
  EXPECT_EQ(t.size(), 19u);
  EXPECT_EQ(t.at("w0.3").shape, (std::vector<int64_t>{3, 8}));
  EXPECT_EQ(t.at("dense_w.1").shape, (std::vector<int64_t>{8, 3}));
  for (const auto& r : {load_celo2_weights(d), load_elo_celo2_weights(d)}) {
    EXPECT_EQ(r.w0, w.w0);
    EXPECT_EQ(r.b0, w.b0);
    EXPECT_EQ(r.w1, w.w1);
    EXPECT_EQ(r.b1, w.b1);
    EXPECT_EQ(r.w2, w.w2);
    EXPECT_EQ(r.b2, w.b2);
  }
  // The shipped file read back through the writer gives the same tensors.
  const std::string e = make_temp_dir() + "/copy";
  save_celo2_weights(e, load_celo2_weights(""));
  EXPECT_EQ(read_safetensors(e + "/model.safetensors").at("w0.13").data,
            read_safetensors("optim/lopt/weights/celo2/model.safetensors").at("w0.13").data);
}

TEST(Celo2Files, WrongFilesAreOneSentence) {
  const std::string d = make_temp_dir() + "/celo2", f = d + "/model.safetensors";
  save_celo2_weights(d, random_celo2_weights(8));
  const TensorMap good = read_safetensors(f);
  auto with = [&](const std::function<void(TensorMap&)>& edit) {
    TensorMap t = good;
    edit(t);
    write_safetensors(f, t);
  };
  with([](TensorMap& t) { t.erase("w0.7"); });
  expect_user_error([&] { load_celo2_weights(d); }, "has no tensor 'w0.7'; it is not the expected weight file");
  with([](TensorMap& t) { t["w0.3"] = {{8, 3}, std::vector<float>(24)}; });  // torch (out, in): not transposed
  expect_user_error([&] { load_celo2_weights(d); }, "tensor 'w0.3' has shape (8, 3) but (3, 8) is expected");
  with([](TensorMap& t) { t["w0.14"] = {{3, 8}, std::vector<float>(24)}; });
  expect_user_error([&] { load_celo2_weights(d); }, "has a tensor 'w0.14' that CELO2's MLP");
  with([](TensorMap& t) { t["dense_w.2"] = {{8, 3}, std::vector<float>(24)}; });  // one layer more
  expect_user_error([&] { load_celo2_weights(d); }, "has a tensor 'dense_w.2'");
  with([](TensorMap& t) { t["dense_b.1"] = {{4}, std::vector<float>(4)}; });  // output 4 but dense_w.1 (8, 3)
  expect_user_error([&] { load_celo2_weights(d); }, "tensor 'dense_w.1' has shape (8, 3) but (8, 4) is expected");
  write_safetensors(f, good);
  std::string bad = read_file(f);
  bad.replace(bad.find("F32"), 3, "F16");
  write_file(f, bad);
  expect_user_error([&] { load_celo2_weights(d); }, "dtype F16 but float32 (F32) is required");
  write_safetensors(f, good);
  const std::string cfg = read_file(d + "/config.json");
  auto config = [&](const std::string& from, const std::string& to) {
    std::string c = cfg;
    c.replace(c.find(from), from.size(), to);
    write_file(d + "/config.json", c);
  };
  config("\"hidden_size\": 8", "\"hidden_size\": 16");
  expect_user_error([&] { load_celo2_weights(d); }, "config.json' has hidden_size = 16 but 8 is required");
  config("\"relu\"", "\"tanh\"");
  expect_user_error([&] { load_celo2_weights(d); }, "has activation 'tanh' but CELO2's MLP uses relu");
  config("    1,\n    1,\n    1,\n    3,", "    1,\n    1,\n    3,\n    1,");
  expect_user_error([&] { load_celo2_weights(d); }, "has feature_dims other than CELO2's 14 groups");
  config("\"output_size\": 3", "\"output_size\": 2");
  expect_user_error([&] { load_celo2_weights(d); }, "has output_size = 2 but 3 is required");
  config("\"hidden_layers\": 2", "\"hidden_layers\": 3");
  expect_user_error([&] { load_celo2_weights(d); }, "has hidden_layers = 3 but 2 is required");
  write_file(d + "/config.json", cfg);
  load_celo2_weights(d);  // the control: restored, it loads
  expect_user_error([&] { load_celo2_weights(d + "/missing"); }, "CELO2 weights not found at");
  expect_user_error([&] { load_elo_celo2_weights(d + "/missing"); }, "scripts/download_lopt_weights.sh");
}

TEST(Celo2Files, OutputWidthFollowsTheFile) {
  const std::string d = make_temp_dir() + "/two";
  Celo2Weights w = random_celo2_weights(9);
  w.out = 2;  // direction and magnitude only: celo2.md 7.1 allows output_size >= 2
  w.w2.resize(16);
  w.b2.resize(2);
  save_celo2_weights(d, w);
  const Celo2Weights r = load_celo2_weights(d);
  EXPECT_EQ(r.out, 2);
  EXPECT_EQ(r.w2, w.w2);
}

TEST(EloFiles, MetaMlpLayoutLoadsAndWrongFilesAreRefused) {
  const std::string d = make_temp_dir() + "/elo";
  const SmallFcWeights w = random_small_fc_weights(10);
  save_small_fc_weights(d, w);  // ELO's file has μLO's MetaMLP names, shapes and config
  EXPECT_EQ(load_elo_weights(d).w0, w.w0);
  EXPECT_EQ(load_elo_weights(d + "/model.safetensors").b2, w.b2);
  write_file(d + "/config.json", R"({"hidden_layers": 2, "hidden_size": 32, "input_size": 39})");
  expect_user_error([&] { load_elo_weights(d); }, "hidden_layers = 2 but 1 is required");
  std::remove((d + "/config.json").c_str());
  write_safetensors(d + "/model.safetensors", {{"network.input.weight", {{39, 32}, std::vector<float>(39 * 32)}}});
  expect_user_error([&] { load_elo_weights(d); }, "has shape (39, 32) but (32, 39) is expected");
  expect_user_error([&] { load_elo_weights(d + "/missing"); }, "ELO weights not found at");
}

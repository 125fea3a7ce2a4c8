// Learned-optimizer weight files: the published formats round trip, the JAX checkpoint converts to
// PyLO's layout, and every malformed file is refused with one sentence.
#include <cstdio>

#include "common/json.h"
#include "optim/lopt/lopt_weights.h"
#include "optim/lopt/msgpack.h"
#include "optim/lopt/safetensors.h"
#include "tests/test_util.h"

TEST(Json, ParsesWhatSafetensorsAndConfigsUse) {
  Json j = parse_json(R"({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, "b": true, "s": "x\"y\u00e9"})", "t");
  EXPECT_EQ(j.at("a").at("shape").arr[1].num, 3);
  EXPECT_TRUE(j.at("b").b);
  EXPECT_EQ(j.at("s").str, "x\"y\xc3\xa9");
  expect_user_error([] { parse_json("{\"a\": [1, 2}", "the header of 'f'"); }, "the header of 'f' is not valid JSON");
  expect_user_error([] { parse_json("{} x", "c"); }, "trailing characters");
}

TEST(Safetensors, SmallFcRoundTripAndPublishedSize) {
  const std::string d = make_temp_dir() + "/mulo";
  SmallFcWeights w = random_small_fc_weights(3);
  save_small_fc_weights(d, w);
  // The published btherien/mulo model.safetensors is 10,096 bytes: same names, shapes and dtype.
  EXPECT_EQ(read_file(d + "/model.safetensors").size(), 10096u);
  SmallFcWeights r = load_small_fc_weights(d);
  EXPECT_EQ(r.w0, w.w0);
  EXPECT_EQ(r.b2, w.b2);
  EXPECT_EQ(load_small_fc_weights(d + "/model.safetensors").w1, w.w1);
}

TEST(Safetensors, BadFilesAreRefused) {
  const std::string d = make_temp_dir() + "/mulo";
  save_small_fc_weights(d, random_small_fc_weights(4));
  const std::string f = d + "/model.safetensors", good = read_file(f);
  write_file(f, good.substr(0, good.size() - 100));
  expect_user_error([&] { load_small_fc_weights(d); }, "is truncated");
  write_file(f, good.substr(0, 5));
  expect_user_error([&] { load_small_fc_weights(d); }, "too short");
  std::string bad = good;
  bad.replace(bad.find("F32"), 3, "F16");
  write_file(f, bad);
  expect_user_error([&] { load_small_fc_weights(d); }, "dtype F16 but float32 (F32) is required");
  bad = good;
  bad.replace(bad.find("network.output.bias"), 19, "network.output.bias_");  // a renamed tensor
  write_file(f, bad);
  expect_user_error([&] { load_small_fc_weights(d); }, "has no tensor 'network.output.bias'");
  bad = good;
  bad.replace(bad.find("\"dtype\":"), 8, "\"dtype\";");
  write_file(f, bad);
  expect_user_error([&] { load_small_fc_weights(d); }, "is not valid JSON");
  write_safetensors(f, {{"network.input.weight", {{39, 32}, std::vector<float>(39 * 32)}}});
  expect_user_error([&] { load_small_fc_weights(d); }, "has shape (39, 32) but (32, 39) is expected");
  write_safetensors(f, {{"something.else", {{1}, {1.0f}}}});
  expect_user_error([&] { load_small_fc_weights(d); }, "has no tensor 'network.input.weight'");
  write_file(f, good);
  write_file(d + "/config.json", R"({"hidden_layers": 1, "hidden_size": 64, "input_size": 39})");
  expect_user_error([&] { load_small_fc_weights(d); }, "hidden_size = 64 but 32 is required");
  expect_user_error([&] { load_small_fc_weights(d + "/../missing"); }, "scripts/download_lopt_weights.sh");
}

TEST(VeloWeightsFiles, PyloAndJaxFormatsAgree) {
  const std::string d = make_temp_dir();
  VeloWeights w = random_velo_weights(5);
  save_velo_weights_pylo(d, w);
  // The published VeLO_RNN file is 9,119,908 bytes when written by PyLO: same tensors here.
  EXPECT_EQ(read_file(d + "/VeLO_RNN/model.safetensors").size(), 9119908u);
  VeloWeights a = load_velo_weights(d);
  save_velo_weights_jax(d + "/params", w);
  VeloWeights b = load_velo_weights(d + "/params");  // flax msgpack, JAX layout, converted on load
  for (auto [x, y, z] : {std::tuple{&a.lstm_w, &b.lstm_w, &w.lstm_w}, {&a.mix2_w, &b.mix2_w, &w.mix2_w},
                         {&a.ctrl_w, &b.ctrl_w, &w.ctrl_w}, {&a.ss_w, &b.ss_w, &w.ss_w}, {&a.cand, &b.cand, &w.cand},
                         {&a.init_c, &b.init_c, &w.init_c}, {&a.final_b, &b.final_b, &w.final_b}}) {
    EXPECT_EQ(*x, *z);
    EXPECT_EQ(*y, *z);
  }
  // The JAX tree: 33 arrays (14 w0 blocks), the LSTM under the key "rnn/linear".
  TensorMap t = read_flax_arrays(d + "/params");
  EXPECT_EQ(t.size(), 33u);
  EXPECT_EQ(t.at("params/rnn_params/rnn/linear/w").shape, (std::vector<int64_t>{1024, 2048}));
  EXPECT_EQ(t.at("params/ff_mod_stack/~/w0__13").shape, (std::vector<int64_t>{256, 3, 4}));
}

TEST(VeloWeightsFiles, BadFilesAreRefused) {
  const std::string d = make_temp_dir();
  VeloWeights w = random_velo_weights(6);
  save_velo_weights_jax(d + "/params", w);
  std::string good = read_file(d + "/params");
  write_file(d + "/params", good.substr(0, good.size() / 2));
  expect_user_error([&] { load_velo_weights(d + "/params"); }, "is truncated");
  write_file(d + "/params", "\x01\x02\x03 not msgpack");
  expect_user_error([&] { load_velo_weights(d + "/params"); }, "not a flax msgpack checkpoint");
  save_velo_weights_pylo(d, w);
  std::remove((d + "/VeLO_MLP/model.safetensors").c_str());
  expect_user_error([&] { load_velo_weights(d); }, "VeLO weights not found");
  save_velo_weights_pylo(d, w);
  TensorMap m = read_safetensors(d + "/VeLO_MLP/model.safetensors");
  m["input_weights_"].shape = {256, 30, 4};
  write_safetensors(d + "/VeLO_MLP/model.safetensors", m);
  expect_user_error([&] { load_velo_weights(d); }, "has shape (256, 30, 4) but (256, 4, 30) is expected");
}

// Learned-optimizer weight files: the published formats round trip, the JAX checkpoint converts to
// PyLO's layout, and every malformed file is refused with one sentence.
#include <cstdio>

#include "common/json.h"
#include "optim/lopt/lopt_weights.h"
#include "optim/lopt/msgpack.h"
#include "optim/lopt/safetensors.h"
#include "tests/test_util.h"

TEST(Json, ParsesWhatSafetensorsAndConfigsUse) {
  Json j = parse_json(
      R"({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, "b": true, "s": "x\"y\u00e9"})", "t");
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
  bad.replace(bad.find("network.output.bias"), 19, "network.output.bixs");  // a renamed tensor (same length)
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

namespace {
// A safetensors file from its JSON header and `data_bytes` bytes of data.
std::string file_of(const std::string& header, size_t data_bytes) {
  const uint64_t n = header.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + header + std::string(data_bytes, '\x01');
}
std::string tensor(const std::string& name, const std::string& shape, uint64_t begin, uint64_t end) {
  return str_cat("\"", name, "\":{\"dtype\":\"F32\",\"shape\":[", shape, "],\"data_offsets\":[", begin, ",", end, "]}");
}
}  // namespace

// The tensors must tile the data section (the format's rule): overlapping ranges let a 4 MB file name its
// data a thousand times (4 GB of copies); gaps and trailing bytes are refused as well, and sizes that do not
// match shape x 4 bytes.
TEST(Safetensors, RefusesOverlapsGapsAndWrongSizes) {
  const std::string f = make_temp_dir() + "/w.safetensors";
  write_file(f, file_of("{" + tensor("a", "4", 0, 16) + "," + tensor("b", "2", 16, 24) + "}", 24));
  const TensorMap ok = read_safetensors(f);
  EXPECT_EQ(ok.at("b").data.size(), 2u);
  write_file(f, file_of("{" + tensor("b", "4", 16, 32) + "," + tensor("a", "4", 0, 16) + "}", 32));
  EXPECT_EQ(read_safetensors(f).size(), 2u) << "the header's order is not the data's: fine";
  write_file(f, file_of("{" + tensor("a", "4", 0, 16) + "," + tensor("b", "4", 0, 16) + "}", 16));
  expect_user_error([&] { read_safetensors(f); },
                    "tensor 'b' starts at byte 0 of the data section, but an earlier tensor's data ends at 16");
  write_file(f, file_of("{" + tensor("a", "4", 0, 16) + "," + tensor("b", "2", 8, 16) + "}", 16));
  expect_user_error([&] { read_safetensors(f); }, "without overlap or gap");
  write_file(f, file_of("{" + tensor("a", "4", 0, 16) + "," + tensor("b", "4", 20, 36) + "}", 36));
  expect_user_error([&] { read_safetensors(f); },
                    "tensor 'b' starts at byte 20 of the data section, but the tensors before it end at 16");
  write_file(f, file_of("{" + tensor("a", "4", 4, 20) + "}", 20));
  expect_user_error([&] { read_safetensors(f); }, "starts at byte 4");
  write_file(f, file_of("{" + tensor("a", "4", 0, 16) + "}", 20));
  expect_user_error([&] { read_safetensors(f); }, "ends at byte 16 of a 20-byte data section (trailing bytes");
  write_file(f, file_of("{" + tensor("a", "5", 0, 16) + "}", 16));
  expect_user_error([&] { read_safetensors(f); }, "has 16 bytes of data but shape (5,) needs 20 bytes");
  write_file(f, file_of("{" + tensor("a", "4", 16, 0) + "}", 16));
  expect_user_error([&] { read_safetensors(f); }, "begin <= end");
  write_file(f, file_of("{" + tensor("a", "4", 0, 16) + "}", 12));
  expect_user_error([&] { read_safetensors(f); }, "is truncated: tensor 'a' ends at byte 16 of a 12-byte data section");
}

// The issue's file, smaller: a hundred tensors over one 1 MiB range. Refused before any tensor is copied.
TEST(Safetensors, AHundredTensorsOverOneRangeAreRefused) {
  const std::string f = make_temp_dir() + "/w.safetensors";
  std::string header = "{";
  for (int i = 0; i < 100; i++) header += (i ? "," : "") + tensor("t" + std::to_string(i), "262144", 0, 1048576);
  write_file(f, file_of(header + "}", 1048576));
  expect_user_error([&] { read_safetensors(f); }, "without overlap or gap");
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
  for (auto [x, y, z] : {std::tuple{&a.lstm_w, &b.lstm_w, &w.lstm_w},
                         {&a.mix2_w, &b.mix2_w, &w.mix2_w},
                         {&a.ctrl_w, &b.ctrl_w, &w.ctrl_w},
                         {&a.ss_w, &b.ss_w, &w.ss_w},
                         {&a.cand, &b.cand, &w.cand},
                         {&a.init_c, &b.init_c, &w.init_c},
                         {&a.final_b, &b.final_b, &w.final_b}}) {
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

namespace {
// A safetensors file with one tensor whose header entry is `entry` (JSON) and `data_bytes` zero bytes.
std::string safetensors_bytes(const std::string& entry, size_t data_bytes) {
  const std::string header = "{\"a\":" + entry + "}";
  uint64_t hlen = header.size();
  return std::string(reinterpret_cast<const char*>(&hlen), 8) + header + std::string(data_bytes, '\0');
}
}  // namespace

// Security review (issue 12): shapes and offsets that overflow, are not integers or do not fit the file
// were an uncaught std::length_error (abort) or an out-of-range float->integer conversion.
TEST(Safetensors, HostileShapesAndOffsetsAreRefused) {
  const std::string d = make_temp_dir(), f = d + "/h.safetensors";
  // The reviewer's reproducer, byte for byte: shape [2^62], data_offsets [0, 0].
  const std::string repro =
      "48000000000000007b2261223a7b226474797065223a22463332222c227368617065223a5b343631313638363031383432373338373930"
      "345d2c22646174615f6f666673657473223a5b302c305d7d7d";
  std::string bytes;
  for (size_t k = 0; k < repro.size(); k += 2) bytes += char(std::stoi(repro.substr(k, 2), nullptr, 16));
  write_file(f, bytes);
  expect_user_error([&] { read_safetensors(f); },
                    "tensor 'a' has 0 bytes of data but shape (4611686018427387904,) needs 2^64 or more bytes");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"dtype":"F32","shape":[2147483648,2147483648],"data_offsets":[0,16]})",
       "but shape (2147483648, 2147483648) needs"},
      {R"({"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,16]})",
       "needs 2^64 or more bytes"},
      {R"({"dtype":"F32","shape":[2,2],"data_offsets":[0,1e28]})", "bad data offsets"},
      {R"({"dtype":"F32","shape":[2,2],"data_offsets":[0,nan]})", "bad data offsets"},
      {R"({"dtype":"F32","shape":[2,2],"data_offsets":[0.5,16]})", "bad data offsets"},
      {R"({"dtype":"F32","shape":[2,2],"data_offsets":[8,0]})", "bad data offsets"},
      {R"({"dtype":"F32","shape":[2,2],"data_offsets":[0,"16"]})", "bad data offsets"},
      {R"({"dtype":"F32","shape":[2,2],"data_offsets":[0,24]})", "ends at byte 24 of a 16-byte data section"},
      {R"({"dtype":"F32","shape":[2,3],"data_offsets":[0,16]})",
       "has 16 bytes of data but shape (2, 3) needs 24 bytes"},
      {R"({"dtype":"F32","shape":[2.5,1.5],"data_offsets":[0,16]})", "has a bad shape"},
      {R"({"dtype":"F32","shape":[-4],"data_offsets":[0,16]})", "has a bad shape"},
      {R"({"dtype":"F32","shape":[1e300],"data_offsets":[0,16]})", "has a bad shape"},
      {R"({"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,16]})", "has a bad shape"},  // 2^63
      {R"({"dtype":"F32","shape":4,"data_offsets":[0,16]})", "has a bad shape"},
  };
  for (const auto& [entry, want] : cases) {
    write_file(f, safetensors_bytes(entry, 16));
    expect_user_error([&] { read_safetensors(f); }, want);
  }
  write_file(f, safetensors_bytes(R"({"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})", 16));  // the control
  const TensorMap m = read_safetensors(f);
  EXPECT_EQ(m.at("a").shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(m.at("a").data, std::vector<float>(4, 0.0f));
}

namespace {
// A flax msgpack file {"w": ExtType 1 [shape, "float32", bin of `data_bytes` bytes]}; `shape` is msgpack.
std::string flax_bytes(const std::string& shape, size_t data_bytes) {
  std::string payload = "\x93" + shape +
                        "\xa7"
                        "float32" +
                        "\xc6";
  for (int k = 3; k >= 0; k--) payload += char((data_bytes >> (8 * k)) & 0xff);
  payload += std::string(data_bytes, '\0');
  std::string out = "\x81\xa1w\xc9";
  for (int k = 3; k >= 0; k--) out += char((payload.size() >> (8 * k)) & 0xff);
  return out + '\x01' + payload;
}
}  // namespace

TEST(FlaxMsgpack, HostileShapesAreRefused) {
  const std::string d = make_temp_dir(), f = d + "/params";
  const std::string i64 = "\xd3", two_62 = std::string("\x40\0\0\0\0\0\0\0", 8);
  write_file(f, flax_bytes("\x91" + i64 + two_62, 0));  // shape [2^62], no data
  expect_user_error([&] { read_flax_arrays(f); },
                    "array 'w' has 0 bytes of data but shape (4611686018427387904,) needs 2^64 or more bytes");
  write_file(f, flax_bytes("\x92" + i64 + two_62 + i64 + two_62, 16));  // [2^62, 2^62]: overflows 64 bits
  expect_user_error([&] { read_flax_arrays(f); }, "needs 2^64 or more bytes");
  write_file(f, flax_bytes("\x91\xff", 16));  // shape [-1]
  expect_user_error([&] { read_flax_arrays(f); }, "array 'w' has a bad shape");
  write_file(f, flax_bytes("\x91\xcb" + std::string("\x40\x10\0\0\0\0\0\0", 8), 16));  // shape [4.0]: not an int
  expect_user_error([&] { read_flax_arrays(f); }, "array 'w' has a bad shape");
  write_file(f, flax_bytes("\x92\x02\x03", 16));  // (2, 3) needs 24 bytes
  expect_user_error([&] { read_flax_arrays(f); }, "has 16 bytes of data but shape (2, 3) needs 24 bytes");
  write_file(f, flax_bytes("\x92\x02\x02", 16));  // the control: (2, 2) with 16 bytes loads
  const TensorMap m = read_flax_arrays(f);
  EXPECT_EQ(m.at("w").shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(m.at("w").data, std::vector<float>(4, 0.0f));
}

// JSONL from Python's json.dumps escapes non-BMP characters as UTF-16 surrogate pairs.
TEST(Json, UnicodeEscapes) {
  EXPECT_EQ(parse_json(R"("\ud83d\ude00")", "t").str, "\xf0\x9f\x98\x80");  // U+1F600, 4 UTF-8 bytes
  EXPECT_EQ(parse_json(R"("a\uD834\uDD1Eb")", "t").str,
            "a\xf0\x9d\x84\x9e"
            "b");  // U+1D11E, upper-case hex
  EXPECT_EQ(parse_json(R"("\u0041\u00e9\u20ac\uffff")", "t").str, "A\xc3\xa9\xe2\x82\xac\xef\xbf\xbf");
  EXPECT_EQ(parse_json(R"("\u0000")", "t").str, std::string(1, '\0'));  // a real NUL stays one
  expect_user_error([] { parse_json(R"({"text": "\uZZZZ"})", "line 7 of 'x.jsonl'"); },
                    "line 7 of 'x.jsonl' is not valid JSON (bad \\u escape");
  expect_user_error([] { parse_json(R"("\u12")", "t"); }, "bad \\u escape");
  expect_user_error([] { parse_json(R"("\u+123")", "t"); }, "bad \\u escape");
  expect_user_error([] { parse_json(R"("\ud83d")", "line 3 of 'y'"); },
                    "line 3 of 'y' is not valid JSON (unpaired surrogate");
  expect_user_error([] { parse_json(R"("\ud83dx")", "t"); }, "unpaired surrogate");
  expect_user_error([] { parse_json(R"("\ud83d\u0041")", "t"); }, "unpaired surrogate");
  expect_user_error([] { parse_json(R"("\ude00\ud83d")", "t"); }, "unpaired surrogate");
}

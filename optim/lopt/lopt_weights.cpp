#include "optim/lopt/lopt_weights.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>

#include "common/error.h"
#include "common/json.h"
#include "optim/lopt/msgpack.h"
#include "optim/lopt/safetensors.h"
#include "optim/lopt/weight_files.h"

bool is_dir_path(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool path_exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

std::string safetensors_in(const std::string& path) { return is_dir_path(path) ? path + "/model.safetensors" : path; }

void weights_missing(const std::string& what, const std::string& path, const std::string& hint) {
  user_error(what, " weights not found at '", path, "'; ",
             hint.empty() ? "run scripts/download_lopt_weights.sh (needs the network) or pass --lopt-weights PATH "
                            "to a folder holding them."
                          : hint);
}

void require_finite(const TensorMap& tensors, const std::string& file) {
  for (const auto& [name, t] : tensors) {
    const auto bad = std::find_if(t.data.begin(), t.data.end(), [](float x) { return !std::isfinite(x); });
    if (bad != t.data.end())
      user_error("'", file, "' has the value ", *bad, " in tensor '", name, "' (element ", bad - t.data.begin(),
                 "); meta-weights must be finite numbers, so the file is damaged: replace it.");
  }
}

Json read_weight_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  if (!path_exists(path)) return Json();
  std::ifstream f(path);
  std::string text((std::istreambuf_iterator<char>(f)), {});
  return parse_json(text, "'" + path + "'");
}

void check_config_numbers(const Json& j, const std::string& path,
                          const std::vector<std::pair<std::string, double>>& want) {
  for (const auto& [k, v] : want) {
    if (!j.has(k)) user_error("'", path, "' has no key '", k, "'; it is not the expected weight folder.");
    const Json& x = j.at(k);
    double got = x.type == Json::Bool ? (x.b ? 1 : 0) : x.num;
    if (got != v) user_error("'", path, "' has ", k, " = ", got, " but ", v, " is required.");
  }
}

namespace {
// Checks config.json beside a safetensors file, if present: every expected key with its value.
void check_config(const std::string& dir, const std::vector<std::pair<std::string, double>>& want) {
  const Json j = read_weight_config(dir);
  if (j.type != Json::Null) check_config_numbers(j, dir + "/config.json", want);
}

std::vector<float> transpose(const std::vector<float>& a, int64_t rows,
                             int64_t cols) {  // (rows x cols) -> (cols x rows)
  std::vector<float> t(a.size());
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) t[size_t(c * rows + r)] = a[size_t(r * cols + c)];
  return t;
}

// Candidate rows from PyLO's VeLOMLP storage tensors.
std::vector<float> pack_candidates(const std::vector<float>& w0, const std::vector<float>& b0,
                                   const std::vector<float>& w1, const std::vector<float>& b1,
                                   const std::vector<float>& w2, const std::vector<float>& b2) {
  using V = VeloWeights;
  std::vector<float> cand(size_t(V::kCand * V::kMlp));
  for (int j = 0; j < V::kCand; j++) {
    float* row = &cand[size_t(j * V::kMlp)];
    std::copy_n(&w0[size_t(j * 120)], 120, row + V::kW0);  // 4 x 30
    std::copy_n(&b0[size_t(j * 4)], 4, row + V::kB0);
    std::copy_n(&w1[size_t(j * 16)], 16, row + V::kW1);  // 4 x 4
    std::copy_n(&b1[size_t(j * 4)], 4, row + V::kB1);
    std::copy_n(&w2[size_t(j * 12)], 12, row + V::kW2);  // 3 x 4
    std::copy_n(&b2[size_t(j * 3)], 3, row + V::kB2);
  }
  return cand;
}

VeloWeights load_velo_pylo(const std::string& dir) {
  VeloWeights w;
  const std::string rnn_dir = dir + "/VeLO_RNN", mlp_dir = dir + "/VeLO_MLP";
  if (!path_exists(rnn_dir + "/model.safetensors")) weights_missing("VeLO", rnn_dir + "/model.safetensors");
  if (!path_exists(mlp_dir + "/model.safetensors")) weights_missing("VeLO", mlp_dir + "/model.safetensors");
  check_config(rnn_dir, {{"input_size", 30}, {"lstm_hidden_size", 512}, {"param_inits", 256}});
  const std::string rf = rnn_dir + "/model.safetensors", mf = mlp_dir + "/model.safetensors";
  TensorMap r = read_safetensors(rf), m = read_safetensors(mf);
  auto get = [&](const TensorMap& t, const std::string& n, std::vector<int64_t> s, const std::string& f) {
    return require_tensor(t, n, s, f).data;
  };
  w.mix1_w = get(r, "mix_layer1.weight", {512, 30}, rf);
  w.mix1_b = get(r, "mix_layer1.bias", {512}, rf);
  w.mix2_w = get(r, "mix_layer2.weight", {512, 30}, rf);
  w.mix2_b = get(r, "mix_layer2.bias", {512}, rf);
  w.final_w = get(r, "final_mix_layer.weight", {512, 30}, rf);
  w.final_b = get(r, "final_mix_layer.bias", {512}, rf);
  w.lstm_w = get(r, "lstm.linear.weight", {2048, 1024}, rf);
  w.lstm_b = get(r, "lstm.linear.bias", {2048}, rf);
  w.ctrl_w = get(r, "rnn_to_controls.weight", {256, 512}, rf);
  w.ctrl_b = get(r, "rnn_to_controls.bias", {256}, rf);
  w.ss_w = get(r, "step_size.weight", {1, 512}, rf);
  w.ss_b = get(r, "step_size.bias", {1}, rf);
  w.init_h = get(r, "lstm_init_state.0", {1, 512}, rf);
  w.init_c = get(r, "lstm_init_state.1", {1, 512}, rf);
  w.cand = pack_candidates(get(m, "input_weights_", {256, 4, 30}, mf), get(m, "input_bias_", {256, 4}, mf),
                           get(m, "hidden_weights_.0", {256, 4, 4}, mf), get(m, "hidden_bias_.0", {256, 4}, mf),
                           get(m, "output_weights_", {256, 3, 4}, mf), get(m, "output_bias_", {256, 3}, mf));
  require_finite(r, rf);
  require_finite(m, mf);
  return w;
}

// JAX layout -> PyLO layout (velo.md 8.3): every (in, out) matrix transposed to torch's (out, in), and the
// candidate MLPs' first layer, stored as 14 feature blocks w0__0..w0__13, joined in numeric order.
VeloWeights load_velo_jax(const std::string& file) {
  TensorMap t = read_flax_arrays(file);
  // The params tree may sit under "params" (a ParameterCheckpoint) or be the root itself.
  std::string pre = t.count("params/lstm_init_state/hidden") ? "params/" : "";
  auto get = [&](const std::string& n, std::vector<int64_t> s) { return require_tensor(t, pre + n, s, file).data; };
  VeloWeights w;
  w.mix1_w = transpose(get("rnn_params/linear/w", {30, 512}), 30, 512);
  w.mix1_b = get("rnn_params/linear/b", {512});
  w.mix2_w = transpose(get("rnn_params/linear_1/w", {30, 512}), 30, 512);
  w.mix2_b = get("rnn_params/linear_1/b", {512});
  w.final_w = transpose(get("rnn_params/linear_2/w", {30, 512}), 30, 512);
  w.final_b = get("rnn_params/linear_2/b", {512});
  w.lstm_w = transpose(get("rnn_params/rnn/linear/w", {1024, 2048}), 1024, 2048);
  w.lstm_b = get("rnn_params/rnn/linear/b", {2048});
  w.ctrl_w = transpose(get("rnn_params/rnn_to_controls/w", {512, 256}), 512, 256);
  w.ctrl_b = get("rnn_params/rnn_to_controls/b", {256});
  w.ss_w = transpose(get("rnn_params/step_size/w", {512, 1}), 512, 1);
  w.ss_b = get("rnn_params/step_size/b", {1});
  w.init_h = get("lstm_init_state/hidden", {1, 512});
  w.init_c = get("lstm_init_state/cell", {1, 512});
  // w0__0..w0__13 concatenated along the feature axis in numeric order: 256 x 30 x 4.
  static const int widths[14] = {1, 1, 1, 3, 1, 3, 1, 3, 1, 3, 3, 3, 3, 3};
  std::vector<float> w0(size_t(256 * 4 * 30)), w1(256 * 16), w2(256 * 12);
  int f0 = 0;
  for (int k = 0; k < 14; k++) {
    auto blk = get("ff_mod_stack/~/w0__" + std::to_string(k), {256, widths[k], 4});
    for (int j = 0; j < 256; j++)
      for (int f = 0; f < widths[k]; f++)
        for (int o = 0; o < 4; o++) w0[size_t((j * 4 + o) * 30 + f0 + f)] = blk[size_t((j * widths[k] + f) * 4 + o)];
    f0 += widths[k];
  }
  auto jw1 = get("ff_mod_stack/~/w1", {256, 4, 4}), jw2 = get("ff_mod_stack/~/w2", {256, 4, 3});
  for (int j = 0; j < 256; j++) {
    for (int i = 0; i < 4; i++)
      for (int o = 0; o < 4; o++) w1[size_t(j * 16 + o * 4 + i)] = jw1[size_t(j * 16 + i * 4 + o)];
    for (int i = 0; i < 4; i++)
      for (int o = 0; o < 3; o++) w2[size_t(j * 12 + o * 4 + i)] = jw2[size_t(j * 12 + i * 3 + o)];
  }
  w.cand = pack_candidates(w0, get("ff_mod_stack/~/b0", {256, 4}), w1, get("ff_mod_stack/~/b1", {256, 4}), w2,
                           get("ff_mod_stack/~/b2", {256, 3}));
  require_finite(t, file);
  return w;
}

void normal_fill(std::vector<float>& v, size_t n, std::mt19937_64& rng, float sd) {
  std::normal_distribution<float> z(0.0f, sd);
  v.resize(n);
  for (auto& x : v) x = z(rng);
}
}  // namespace

namespace {
// MetaMLP(39, 32, hidden_layers=1) in torch's Linear layout: μLO's and ELO's files (small_fc_lopt.md 6.1).
SmallFcWeights load_meta_mlp(const std::string& path, const std::string& what) {
  const std::string file = safetensors_in(path);
  if (!path_exists(file)) weights_missing(what, file);
  if (is_dir_path(path)) check_config(path, {{"input_size", 39}, {"hidden_size", 32}, {"hidden_layers", 1}});
  TensorMap t = read_safetensors(file);
  SmallFcWeights w;
  w.w0 = require_tensor(t, "network.input.weight", {32, 39}, file).data;
  w.b0 = require_tensor(t, "network.input.bias", {32}, file).data;
  w.w1 = require_tensor(t, "network.linear_0.weight", {32, 32}, file).data;
  w.b1 = require_tensor(t, "network.linear_0.bias", {32}, file).data;
  w.w2 = require_tensor(t, "network.output.weight", {2, 32}, file).data;
  w.b2 = require_tensor(t, "network.output.bias", {2}, file).data;
  require_finite(t, file);
  return w;
}
}  // namespace

SmallFcWeights load_small_fc_weights(const std::string& path) {
  return load_meta_mlp(path.empty() ? "weights/mulo" : path, "small_fc_lopt (μLO)");
}

SmallFcWeights load_elo_weights(const std::string& path) {
  return load_meta_mlp(path.empty() ? "weights/elo" : path, "ELO");
}

VeloWeights load_velo_weights(const std::string& path_in) {
  const std::string path = path_in.empty() ? "weights" : path_in;
  if (is_dir_path(path)) return load_velo_pylo(path);
  if (!path_exists(path)) weights_missing("VeLO", path);
  return load_velo_jax(path);
}

void save_small_fc_weights(const std::string& dir, const SmallFcWeights& w) {
  mkdir(dir.c_str(), 0755);
  write_safetensors(dir + "/model.safetensors", {{"network.input.weight", {{32, 39}, w.w0}},
                                                 {"network.input.bias", {{32}, w.b0}},
                                                 {"network.linear_0.weight", {{32, 32}, w.w1}},
                                                 {"network.linear_0.bias", {{32}, w.b1}},
                                                 {"network.output.weight", {{2, 32}, w.w2}},
                                                 {"network.output.bias", {{2}, w.b2}}});
  std::ofstream(dir + "/config.json") << "{\n  \"hidden_layers\": 1,\n  \"hidden_size\": 32,\n  \"input_size\": 39\n}";
}

void save_velo_weights_pylo(const std::string& dir, const VeloWeights& w) {
  mkdir(dir.c_str(), 0755);
  mkdir((dir + "/VeLO_RNN").c_str(), 0755);
  mkdir((dir + "/VeLO_MLP").c_str(), 0755);
  write_safetensors(dir + "/VeLO_RNN/model.safetensors", {{"mix_layer1.weight", {{512, 30}, w.mix1_w}},
                                                          {"mix_layer1.bias", {{512}, w.mix1_b}},
                                                          {"mix_layer2.weight", {{512, 30}, w.mix2_w}},
                                                          {"mix_layer2.bias", {{512}, w.mix2_b}},
                                                          {"final_mix_layer.weight", {{512, 30}, w.final_w}},
                                                          {"final_mix_layer.bias", {{512}, w.final_b}},
                                                          {"lstm.linear.weight", {{2048, 1024}, w.lstm_w}},
                                                          {"lstm.linear.bias", {{2048}, w.lstm_b}},
                                                          {"rnn_to_controls.weight", {{256, 512}, w.ctrl_w}},
                                                          {"rnn_to_controls.bias", {{256}, w.ctrl_b}},
                                                          {"step_size.weight", {{1, 512}, w.ss_w}},
                                                          {"step_size.bias", {{1}, w.ss_b}},
                                                          {"lstm_init_state.0", {{1, 512}, w.init_h}},
                                                          {"lstm_init_state.1", {{1, 512}, w.init_c}}});
  std::ofstream(dir + "/VeLO_RNN/config.json")
      << "{\n  \"input_size\": 30,\n  \"lstm_hidden_size\": 512,\n  \"mix_layers\": true,\n  \"param_inits\": 256\n}";
  using V = VeloWeights;
  std::vector<float> w0, b0, w1, b1, w2, b2;
  for (int j = 0; j < V::kCand; j++) {
    const float* row = &w.cand[size_t(j * V::kMlp)];
    w0.insert(w0.end(), row + V::kW0, row + V::kB0);
    b0.insert(b0.end(), row + V::kB0, row + V::kW1);
    w1.insert(w1.end(), row + V::kW1, row + V::kB1);
    b1.insert(b1.end(), row + V::kB1, row + V::kW2);
    w2.insert(w2.end(), row + V::kW2, row + V::kB2);
    b2.insert(b2.end(), row + V::kB2, row + V::kMlp);
  }
  write_safetensors(dir + "/VeLO_MLP/model.safetensors",
                    {{"input_weights_", {{256, 4, 30}, w0}},
                     {"input_bias_", {{256, 4}, b0}},
                     {"hidden_weights_.0", {{256, 4, 4}, w1}},
                     {"hidden_bias_.0", {{256, 4}, b1}},
                     {"output_weights_", {{256, 3, 4}, w2}},
                     {"output_bias_", {{256, 3}, b2}},
                     {"input_weights", {{4, 30}, std::vector<float>(120, 0.0f)}}});  // a scratch tensor, ignored
}

void save_velo_weights_jax(const std::string& file, const VeloWeights& w) {
  using V = VeloWeights;
  TensorMap t;
  t["params/rnn_params/linear/w"] = {{30, 512}, transpose(w.mix1_w, 512, 30)};
  t["params/rnn_params/linear/b"] = {{512}, w.mix1_b};
  t["params/rnn_params/linear_1/w"] = {{30, 512}, transpose(w.mix2_w, 512, 30)};
  t["params/rnn_params/linear_1/b"] = {{512}, w.mix2_b};
  t["params/rnn_params/linear_2/w"] = {{30, 512}, transpose(w.final_w, 512, 30)};
  t["params/rnn_params/linear_2/b"] = {{512}, w.final_b};
  t["params/rnn_params/rnn/linear/w"] = {{1024, 2048}, transpose(w.lstm_w, 2048, 1024)};
  t["params/rnn_params/rnn/linear/b"] = {{2048}, w.lstm_b};
  t["params/rnn_params/rnn_to_controls/w"] = {{512, 256}, transpose(w.ctrl_w, 256, 512)};
  t["params/rnn_params/rnn_to_controls/b"] = {{256}, w.ctrl_b};
  t["params/rnn_params/step_size/w"] = {{512, 1}, transpose(w.ss_w, 1, 512)};
  t["params/rnn_params/step_size/b"] = {{1}, w.ss_b};
  t["params/lstm_init_state/hidden"] = {{1, 512}, w.init_h};
  t["params/lstm_init_state/cell"] = {{1, 512}, w.init_c};
  static const int widths[14] = {1, 1, 1, 3, 1, 3, 1, 3, 1, 3, 3, 3, 3, 3};
  int f0 = 0;
  for (int k = 0; k < 14; k++) {
    std::vector<float> blk(size_t(256 * widths[k] * 4));
    for (int j = 0; j < 256; j++)
      for (int f = 0; f < widths[k]; f++)
        for (int o = 0; o < 4; o++)
          blk[size_t((j * widths[k] + f) * 4 + o)] = w.cand[size_t(j * V::kMlp + V::kW0 + o * V::kIn + f0 + f)];
    t["params/ff_mod_stack/~/w0__" + std::to_string(k)] = {{256, widths[k], 4}, blk};
    f0 += widths[k];
  }
  std::vector<float> b0, w1(256 * 16), b1, w2(256 * 12), b2;
  for (int j = 0; j < V::kCand; j++) {
    const float* row = &w.cand[size_t(j * V::kMlp)];
    b0.insert(b0.end(), row + V::kB0, row + V::kW1);
    b1.insert(b1.end(), row + V::kB1, row + V::kW2);
    b2.insert(b2.end(), row + V::kB2, row + V::kMlp);
    for (int i = 0; i < 4; i++)
      for (int o = 0; o < 4; o++) w1[size_t(j * 16 + i * 4 + o)] = row[V::kW1 + o * 4 + i];
    for (int i = 0; i < 4; i++)
      for (int o = 0; o < 3; o++) w2[size_t(j * 12 + i * 3 + o)] = row[V::kW2 + o * 4 + i];
  }
  t["params/ff_mod_stack/~/b0"] = {{256, 4}, b0};
  t["params/ff_mod_stack/~/w1"] = {{256, 4, 4}, w1};
  t["params/ff_mod_stack/~/b1"] = {{256, 4}, b1};
  t["params/ff_mod_stack/~/w2"] = {{256, 4, 3}, w2};
  t["params/ff_mod_stack/~/b2"] = {{256, 3}, b2};
  write_flax_arrays(file, t, {"params/rnn_params/rnn/linear"});
}

SmallFcWeights random_small_fc_weights(uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  SmallFcWeights w;
  normal_fill(w.w0, 32 * 39, rng, scale / std::sqrt(39.0f));
  normal_fill(w.b0, 32, rng, 0.1f * scale);
  normal_fill(w.w1, 32 * 32, rng, scale / std::sqrt(32.0f));
  normal_fill(w.b1, 32, rng, 0.1f * scale);
  normal_fill(w.w2, 2 * 32, rng, scale / std::sqrt(32.0f));
  normal_fill(w.b2, 2, rng, 0.1f * scale);
  return w;
}

VeloWeights random_velo_weights(uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  VeloWeights w;
  normal_fill(w.mix1_w, 512 * 30, rng, scale);
  normal_fill(w.mix1_b, 512, rng, scale);
  normal_fill(w.mix2_w, 512 * 30, rng, scale);
  normal_fill(w.mix2_b, 512, rng, scale);
  normal_fill(w.final_w, 512 * 30, rng, scale);
  normal_fill(w.final_b, 512, rng, scale);
  normal_fill(w.lstm_w, 2048 * 1024, rng, scale);
  normal_fill(w.lstm_b, 2048, rng, scale);
  normal_fill(w.ctrl_w, 256 * 512, rng, scale);
  normal_fill(w.ctrl_b, 256, rng, scale);
  normal_fill(w.ss_w, 512, rng, scale);
  normal_fill(w.ss_b, 1, rng, scale);
  normal_fill(w.init_h, 512, rng, scale);
  normal_fill(w.init_c, 512, rng, scale);
  normal_fill(w.cand, 256 * 159, rng, 1.0f);
  return w;
}

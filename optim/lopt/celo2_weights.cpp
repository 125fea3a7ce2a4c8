#include "optim/lopt/celo2_weights.h"

#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <random>
#include <set>

#include "common/error.h"
#include "optim/lopt/safetensors.h"
#include "optim/lopt/weight_files.h"

namespace {
std::string group_name(int i) { return "w0." + std::to_string(i); }

// config.json holds CELO2MLP's constructor arguments; a key that is absent takes PyLO's default, as
// from_pretrained would construct it.
void check_celo2_config(const std::string& dir, int out) {
  const Json j = read_weight_config(dir);
  if (j.type == Json::Null) return;
  const std::string path = dir + "/config.json";
  if (j.has("activation") && j.at("activation").str != "relu")
    user_error("'", path, "' has activation '", j.at("activation").str, "' but CELO2's MLP uses relu.");
  if (j.has("feature_dims")) {
    const Json& fd = j.at("feature_dims");
    bool same = fd.type == Json::Array && fd.arr.size() == size_t(Celo2Weights::kGroups);
    for (size_t i = 0; same && i < fd.arr.size(); i++) same = fd.arr[i].num == Celo2Weights::kGroupDims[i];
    if (!same) user_error("'", path, "' has feature_dims other than CELO2's 14 groups [1,1,1,3,1,3,1,3,1,3,3,3,3,3].");
  }
  std::vector<std::pair<std::string, double>> want = {
      {"hidden_size", Celo2Weights::kHidden}, {"hidden_layers", 2}, {"output_size", out}};
  for (const auto& kv : want)
    if (j.has(kv.first)) check_config_numbers(j, path, {kv});
}

const F32Tensor& get(const TensorMap& t, const std::string& name, std::vector<int64_t> shape, const std::string& file) {
  return require_tensor(t, name, shape, file);
}

Celo2Weights read_celo2(const std::string& path, const std::string& what, const std::string& hint) {
  const std::string file = safetensors_in(path);
  if (!path_exists(file)) weights_missing(what, file, hint);
  const TensorMap t = read_safetensors(file);
  Celo2Weights w;
  auto b2 = t.find("dense_b.1");  // the output width is the one free size (celo2.md 7.1: >= 2)
  if (b2 != t.end() && b2->second.shape.size() == 1 && b2->second.shape[0] >= 2) w.out = int(b2->second.shape[0]);
  const int H = Celo2Weights::kHidden;
  for (int i = 0; i < Celo2Weights::kGroups; i++) {
    const auto& blk = get(t, group_name(i), {Celo2Weights::kGroupDims[i], H}, file).data;
    w.w0.insert(w.w0.end(), blk.begin(), blk.end());
  }
  w.b0 = get(t, "b0", {H}, file).data;
  w.w1 = get(t, "dense_w.0", {H, H}, file).data;
  w.b1 = get(t, "dense_b.0", {H}, file).data;
  w.w2 = get(t, "dense_w.1", {H, w.out}, file).data;
  w.b2 = get(t, "dense_b.1", {w.out}, file).data;
  // Anything else means another architecture (more groups or layers), which PyLO's strict load refuses.
  std::set<std::string> known = {"b0", "dense_w.0", "dense_b.0", "dense_w.1", "dense_b.1"};
  for (int i = 0; i < Celo2Weights::kGroups; i++) known.insert(group_name(i));
  for (const auto& kv : t)
    if (!known.count(kv.first))
      user_error("'", file, "' has a tensor '", kv.first, "' that CELO2's MLP (14 input groups, 8-8-", w.out,
                 ") does not have; it is not a CELO2 weight file.");
  if (is_dir_path(path)) check_celo2_config(path, w.out);  // after the tensors: their message is more precise
  require_finite(t, file);
  return w;
}
}  // namespace

Celo2Weights load_celo2_weights(const std::string& path) {
  if (!path.empty()) return read_celo2(path, "CELO2", "");
  return read_celo2(kCelo2DefaultWeights, "CELO2",
                    "they ship with the repository: run from its root, or pass --set celo2.weights=PATH.");
}

Celo2Weights load_elo_celo2_weights(const std::string& path) {
  return read_celo2(path.empty() ? kEloCelo2DefaultWeights : path, "ELO_CELO2", "");
}

void save_celo2_weights(const std::string& dir, const Celo2Weights& w) {
  mkdir(dir.c_str(), 0755);
  const int H = Celo2Weights::kHidden;
  TensorMap t;
  int row = 0;
  for (int i = 0; i < Celo2Weights::kGroups; i++) {
    const int fd = Celo2Weights::kGroupDims[i];
    t[group_name(i)] = {{fd, H}, std::vector<float>(w.w0.begin() + row * H, w.w0.begin() + (row + fd) * H)};
    row += fd;
  }
  t["b0"] = {{H}, w.b0};
  t["dense_w.0"] = {{H, H}, w.w1};
  t["dense_b.0"] = {{H}, w.b1};
  t["dense_w.1"] = {{H, w.out}, w.w2};
  t["dense_b.1"] = {{w.out}, w.b2};
  write_safetensors(dir + "/model.safetensors", t);
  // json.dumps(config, indent=2, sort_keys=True), as huggingface_hub writes it.
  std::ofstream f(dir + "/config.json");
  f << "{\n  \"activation\": \"relu\",\n  \"feature_dims\": [\n";
  for (int i = 0; i < Celo2Weights::kGroups; i++)
    f << "    " << Celo2Weights::kGroupDims[i] << (i + 1 < Celo2Weights::kGroups ? ",\n" : "\n");
  f << "  ],\n  \"hidden_layers\": 2,\n  \"hidden_size\": " << H << ",\n  \"output_size\": " << w.out << "\n}";
}

Celo2Weights random_celo2_weights(uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  auto fill = [&](std::vector<float>& v, size_t n, float sd) {
    std::normal_distribution<float> z(0.0f, sd);
    v.resize(n);
    for (auto& x : v) x = z(rng);
  };
  Celo2Weights w;
  const int H = Celo2Weights::kHidden;
  fill(w.w0, size_t(Celo2Weights::kIn * H), scale / std::sqrt(float(Celo2Weights::kIn)));
  fill(w.b0, H, 0.1f * scale);
  fill(w.w1, size_t(H * H), scale / std::sqrt(float(H)));
  fill(w.b1, H, 0.1f * scale);
  fill(w.w2, size_t(H * w.out), scale / std::sqrt(float(H)));
  fill(w.b2, size_t(w.out), 0.1f * scale);
  return w;
}

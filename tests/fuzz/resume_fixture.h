// What the resume fuzz target (tests/fuzz/fuzz_resume.cpp) and its seeds (make_seeds.cpp) share: a small
// model's parameter table, the token shard and the two WebDataset shards the loaders resume over, and the
// loaders' settings, so that a seed checkpoint written for them gets past every identity check.
#pragma once
#include <string>
#include <vector>

#include "core/param_table.h"
#include "data/tar_writer.h"
#include "data/token_shards.h"
#include "data/wds_stream.h"

namespace resume_fixture {
constexpr int kB = 2, kT = 4, kVocab = 256, kClasses = 10;

inline ParamTable table() {
  ParamTable t;
  t.add(tensor_spec("wte", {16, 8}, Role::Embedding));
  t.add(tensor_spec("h0.mlp.w", {8, 8}, Role::Hidden));
  t.add(tensor_spec("h0.mlp.b", {8}, Role::Bias, false));
  return t;
}

// A 200-token shard in `dir` (tokens below kVocab).
inline std::string token_shard(const std::string& dir) {
  std::vector<uint16_t> t(200);
  for (size_t i = 0; i < t.size(); i++) t[i] = uint16_t(i * 13 % kVocab);
  const std::string path = dir + "/tokens.bin";
  write_token_shard(path, t);
  return path;
}

// Two shards of three samples each in `dir` (the image bytes are not decoded on the way to a resume).
inline std::vector<std::string> wds_shards(const std::string& dir) {
  std::vector<std::string> paths;
  for (int s = 0; s < 2; s++) {
    paths.push_back(dir + "/shard-" + std::to_string(s) + ".tar");
    TarWriter w(paths.back());
    for (int i = 0; i < 3; i++) {
      const std::string key = "s" + std::to_string(s) + "_" + std::to_string(i);
      w.add(key + ".jpg", std::string(100 + 37 * i, char('a' + i)));
      w.add(key + ".cls", std::to_string((s * 3 + i) % kClasses));
    }
    w.commit();
  }
  return paths;
}

inline WdsStreamOptions wds_options() {
  WdsStreamOptions o;
  o.num_classes = kClasses;
  o.shuffle_shards = true;
  o.shuffle_buffer = 2;
  o.seed = 5;
  return o;
}
}  // namespace resume_fixture

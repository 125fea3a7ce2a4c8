// Writes the files of tests/cli/test_cli_errors.sh that a shell cannot write: checkpoints whose structure
// and checksums are right but whose content is not (another optimizer, a step of -5 or INT64_MAX, a sample
// generator "hello world"), meta-weights holding a NaN, and one small valid photo (for the tools that read
// images). Each checkpoint is of the model the suite's command lines choose, so the trainers' model check
// passes and the crafted part is what gets refused.
//
//   build/make_bad_inputs OUT_DIR      (made if missing)
#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "common/error.h"
#include "common/sections.h"
#include "data/image_encode.h"
#include "models/model_tables.h"
#include "optim/lopt/lopt_weights.h"
#include "train/flags.h"

namespace {
struct Crafted {
  std::string optimizer = "adamw";
  int64_t step = 0;
  std::string rng;  // empty: a valid generator state
  int64_t groups = 1;
};

// A checkpoint of `table` as save_checkpoint lays it out, with zero parameters and only the optimizer
// sections that the trainers read before any GPU work.
void write_checkpoint(const std::string& path, const ParamTable& table, const std::vector<int64_t>& loader,
                      const Crafted& c) {
  SectionWriter w(path);
  const uint64_t fingerprint = table.fingerprint();
  w.put("model.table", &fingerprint, sizeof fingerprint);
  w.put_vector("model.params", std::vector<float>(size_t(table.natural_total())));
  w.put_string("optim.name", c.optimizer);
  if (c.groups > 1) w.put_i64("optim.groups", c.groups);
  w.put_i64("train.step", c.step);
  w.put_i64("train.dropout_counter", 0);
  w.put_vector("train.loader", loader);
  std::ostringstream rng;
  rng << std::mt19937_64();
  w.put_string("train.sample_rng", c.rng.empty() ? rng.str() : c.rng);
  w.commit();
}

// One set per trainer: <prefix>_ok.bin and one file per flaw.
void write_set(const std::string& dir, const std::string& prefix, const ParamTable& table,
               const std::vector<int64_t>& loader) {
  write_checkpoint(dir + "/" + prefix + "_ok.bin", table, loader, {});
  Crafted c;
  c.optimizer = "muon";
  write_checkpoint(dir + "/" + prefix + "_muon.bin", table, loader, c);
  c = {};
  c.groups = 6;  // what --overlap 1 writes
  write_checkpoint(dir + "/" + prefix + "_overlap.bin", table, loader, c);
  c = {};
  c.step = -5;
  write_checkpoint(dir + "/" + prefix + "_step_negative.bin", table, loader, c);
  c.step = INT64_MAX;
  write_checkpoint(dir + "/" + prefix + "_step_max.bin", table, loader, c);
  c = {};
  c.rng = "hello world";
  write_checkpoint(dir + "/" + prefix + "_rng.bin", table, loader, c);
}
}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc != 2) user_error("usage: make_bad_inputs OUT_DIR");
    const std::string dir = argv[1];
    std::filesystem::create_directories(dir);
    // train_gpt2 -e tiny (separate q/k/v, its default), positioned at the start of the token shards.
    write_set(dir, "gpt2_tiny", model_by_name("tiny", kGpt2Tiny).table(), {0, 0, 0});
    // train_vit's defaults: vit-ti4 on 28x28 gray images, 10 classes, fused q/k/v. Its loader position is
    // never reached in the cases that use these files.
    VitShape vit = vit_shape("vit-ti4");
    vit.image = 28;
    vit.in_chans = 1;
    vit.classes = 10;
    write_set(dir, "vit_ti4", vit_param_table(vit), {1});
    // Meta-weights of the published shapes with one NaN.
    SmallFcWeights w = random_small_fc_weights(1);
    w.b1[3] = std::numeric_limits<float>::quiet_NaN();
    save_small_fc_weights(dir + "/mulo_nan", w);
    Image photo(48, 40, 3);
    for (size_t i = 0; i < photo.pixels.size(); i++) photo.pixels[i] = uint8_t(i * 37 % 251);
    std::ofstream(dir + "/photo.png", std::ios::binary) << encode_png(photo);
    return 0;
  } catch (const UserError& e) {
    std::fprintf(stderr, "make_bad_inputs: %s\n", e.what());
    return 1;
  }
}

// Fuzz target: resuming from a checkpoint, as far as it goes before any GPU work. The input is written to a
// file and opened by SectionReader (common/sections.cpp); then come the checks and reads of
// train/checkpoint_read.cpp (the model's fingerprint and size, the training state, the data-parallel
// record, a rank file's position), and the data loaders seek to the position the file holds: the token
// loader's three integers (train_gpt2) or the image loader's position over a WebDataset stream
// (train_vit), and serve a few samples from there. Every token served must be in the vocabulary and every
// label in range. Seeds: checkpoints as train/checkpoint.cu writes them (tests/fuzz/make_seeds.cpp).
#include <memory>

#include "common/sections.h"
#include "data/image_loader.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/resume_fixture.h"
#include "train/checkpoint.h"

namespace {
using namespace resume_fixture;

struct Loaders {
  ParamTable table = resume_fixture::table();
  TokenLoader tokens{{token_shard(fuzz_dir())}, kB, kT, 0, 1, kVocab, true, 3};
  WdsStream stream{wds_shards(fuzz_dir()), wds_options()};
};
Loaders& loaders() {
  static Loaders l;
  return l;
}

void resume_tokens(const std::vector<int64_t>& d) {
  if (d.size() != 3) return;
  TokenLoader& t = loaders().tokens;
  t.seek({d[0], d[1], d[2]});
  std::vector<int32_t> in(kB * kT), target(kB * kT);
  for (int b = 0; b < 3; b++) {
    t.next(in.data(), target.data());
    for (int k = 0; k < kB * kT; k++) FUZZ_EXPECT(in[size_t(k)] >= 0 && in[size_t(k)] < kVocab);
  }
}

void resume_images(const std::vector<int64_t>& d) {
  const ImageLoader::Position p = ImageLoader::Position::from_ints(d);
  WdsStream& s = loaders().stream;
  s.seek(p.stream);
  WdsSample x;
  for (int k = 0; k < 4 && s.next(x); k++) FUZZ_EXPECT(x.label >= 0 && x.label < kClasses);
}
}  // namespace

// Each step on its own, as a resume would take it: one refused section must not hide the steps after it.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Loaders& l = loaders();
  const std::string path = fuzz_file("ckpt.bin", data, size);
  std::unique_ptr<SectionReader> r;
  try {
    r = std::make_unique<SectionReader>(path);
  } catch (const UserError&) {
    return 0;
  }
  TrainState state;
  try {
    check_checkpoint_params(*r, l.table, "the model flags");
    check_checkpoint_optimizer(*r, "adamw", false);
    state = read_train_state(*r, int64_t(1) << 40);  // any step a run could resume at
  } catch (const UserError&) {
  }
  for (const DpRecord& dp : {DpRecord{1, {}}, DpRecord{2, {0, 1, 1}}}) {
    try {  // as rank 0's file, then as a rank file of a 2-process sharded run
      check_checkpoint_dp(*r, dp);
      read_rank_position(*r, l.table, dp, r->has("train.step") ? r->get_i64("train.step") : 0);
    } catch (const UserError&) {
    }
  }
  std::vector<int64_t> position;
  try {
    position = r->get_vector<int64_t>("train.loader");
    resume_tokens(position);
  } catch (const UserError&) {
  }
  try {
    resume_images(position);
  } catch (const UserError&) {
  }
  return 0;
}

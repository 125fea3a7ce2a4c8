// Fuzz target: section files (checkpoints and optimizer state). The input is written to a file and opened
// by SectionReader (common/sections.cpp: magic, version, named sections with CRCs, end marker), then the
// sections a resume reads are fetched the ways the trainer and the optimizers fetch them (whole, as i64,
// string or vector, in pieces). Seeds: checkpoint-like files from SectionWriter (tests/fuzz/make_seeds.cpp).
#include <cstring>
#include <memory>

#include "common/sections.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz_file("state.bin", data, size);
  std::unique_ptr<SectionReader> r;
  try {
    r = std::make_unique<SectionReader>(path);
  } catch (const UserError&) {
    return 0;
  }
  static const char* names[] = {"model.shape", "model.table",       "model.params",     "model.kernels",
                                "optim.name",  "optim.fingerprint", "optim.step",       "optim.m",
                                "train.step",  "train.loader",      "train.sample_rng", "x"};
  for (const char* name : names) {
    try {  // each fetch on its own: one refused section must not hide the others
      if (!r->has(name)) continue;
      const uint64_t n = r->size(name);
      if (n <= 4096) FUZZ_EXPECT(r->get_string(name).size() == n);
      if (n == 8) r->get_i64(name);
      if (n <= 4096) r->get_vector<float>(name);
      if (n <= 4096) r->get_vector<int64_t>(name);
      uint64_t seen = 0;
      r->read_pieces(name, n, 7, [&](const void* p, size_t k, uint64_t off) {
        FUZZ_EXPECT(off == seen && k > 0 && k <= 7);
        volatile char c = static_cast<const char*>(p)[k - 1];
        (void)c;
        seen += k;
      });
      FUZZ_EXPECT(seen == n);
      int64_t wrong;
      r->read(name, &wrong, n == 8 ? 4 : 8);  // a size the file does not hold: refused
      FUZZ_EXPECT(false);
    } catch (const UserError&) {
    }
  }
  return 0;
}

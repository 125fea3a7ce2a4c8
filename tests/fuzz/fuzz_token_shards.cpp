// Fuzz target: llm.c token shards and the loader (data/token_shards.cpp). The first 32 bytes of the input
// choose the loader's settings (batch, sequence, ranks, vocabulary, shuffle, the other shards, batches to
// draw, and a resume position as a checkpoint's train.loader holds it); the rest is a shard file, read by
// read_token_shard and by a TokenLoader that then serves batches: every token served must be inside the
// vocabulary and targets must be the inputs shifted by one. Seeds: settings + write_token_shard files.
#include <cstring>

#include "data/token_shards.h"
#include "tests/fuzz/fuzz_util.h"

namespace {
constexpr size_t kSettings = 32;

const std::string& good_shard() {  // a valid 500-token shard (tokens < 256) for the multi-shard layouts
  static const std::string path = [] {
    std::vector<uint16_t> t(500);
    for (size_t i = 0; i < t.size(); i++) t[i] = uint16_t(i * 7 % 256);
    const std::string p = fuzz_dir() + "/good.bin";
    write_token_shard(p, t);
    return p;
  }();
  return path;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < kSettings) return 0;
  const uint8_t* s = data;
  const std::string path = fuzz_file("fuzz.bin", data + kSettings, size - kSettings);
  const int B = s[0] % 5, T = s[1] % 9, world = 1 + s[2] % 3, rank = s[3] % 4;  // B or T 0, rank >= world: refused
  static const int vocabs[4] = {50257, 256, 1, 65536};
  const int vocab = vocabs[s[4] % 4];
  const bool shuffle = s[5] & 1;
  const int batches = s[6] % 64;
  std::vector<std::string> files;
  switch ((s[5] >> 1) % 4) {
    case 0:
      files = {path};
      break;
    case 1:
      files = {path, good_shard()};
      break;
    case 2:
      files = {good_shard(), path};
      break;
    default:
      files = {path, path};
      break;
  }
  try {
    read_token_shard(path, vocab);
  } catch (const UserError&) {
  }
  try {
    TokenLoader L(files, B, T, rank, world, vocab, shuffle, s[7]);
    if (s[5] & 8) {  // resume at a position read from a checkpoint (untrusted: any three int64)
      int64_t p[3];
      std::memcpy(p, s + 8, sizeof p);
      L.seek({p[0], p[1], p[2]});
    }
    const size_t n = size_t(B) * size_t(T);
    std::vector<int32_t> x(n), y(n);
    for (int b = 0; b < batches; b++) {
      L.next(x.data(), y.data());
      for (size_t i = 0; i < n; i++) {
        FUZZ_EXPECT(x[i] >= 0 && x[i] < vocab && y[i] >= 0 && y[i] < vocab);
        if (i + 1 < n) FUZZ_EXPECT(y[i] == x[i + 1]);
      }
    }
  } catch (const UserError&) {
  }
  return 0;
}

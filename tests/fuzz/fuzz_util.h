// Shared by the libFuzzer targets (tests/fuzz/fuzz_*.cpp, run by `make fuzz`). A target lets UserError
// pass (bad input, refused with a sentence: the expected outcome); anything else that escapes (another
// exception, a crash, a sanitizer report, a failed FUZZ_EXPECT) is a finding. Parsers that read a path get
// the input written to a file in one scratch folder per process, removed at exit (`make fuzz` points
// TMPDIR into build/fuzz/, so a run that dies on a finding leaves its folder there, not in /tmp).
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/temp_dir.h"

// A check of the parser's result by the harness; failing it is a finding like a crash.
#define FUZZ_EXPECT(cond)                                                                 \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "fuzz check failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)

inline const std::string& fuzz_dir() {
  static TempDir dir("lopt_fuzz_");
  return dir.path();
}

// Writes the bytes to <fuzz_dir>/<name> and returns the path. A new file each time, not the old one
// truncated: ext4 writes a truncated-and-rewritten file back to disk when it is closed, which held the
// file-based targets to a few hundred runs a second.
inline std::string fuzz_file(const std::string& name, const void* data, size_t size) {
  const std::string path = fuzz_dir() + "/" + name;
  std::remove(path.c_str());
  FILE* f = std::fopen(path.c_str(), "wb");
  const bool ok = f && (size == 0 || std::fwrite(data, 1, size, f) == size);
  if (!f || std::fclose(f) != 0 || !ok) {  // the harness's own failure, not the parser's
    std::perror(path.c_str());
    std::abort();
  }
  return path;
}

// The tokenizer wants exactly 50256 ranks, so a valid ranks file cannot be small; the harnesses make one.
// Rank r's bytes: the 256 single bytes first (byte-level BPE needs each), then pairs and triples of
// common characters, so that encoding has merges to make.
inline std::string synthetic_token(int r) {
  if (r < 256) return std::string(1, char(r));
  static const char a[] = "etaoinshrdlucmfwypvbgkqjxz ETAOINSHRDLUCMFWYPVBGKQJXZ0123456789.,";  // 64
  r -= 256;
  if (r < 64 * 64) return {a[r / 64], a[r % 64]};
  r -= 64 * 64;
  return {a[r / 4096 % 64], a[r / 64 % 64], a[r % 64]};
}

inline std::string base64(const std::string& s) {
  static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < s.size(); i += 3) {
    uint32_t v = uint32_t(uint8_t(s[i])) << 16;
    if (i + 1 < s.size()) v |= uint32_t(uint8_t(s[i + 1])) << 8;
    if (i + 2 < s.size()) v |= uint32_t(uint8_t(s[i + 2]));
    out += tab[v >> 18];
    out += tab[(v >> 12) & 63];
    out += i + 1 < s.size() ? tab[(v >> 6) & 63] : '=';
    out += i + 2 < s.size() ? tab[v & 63] : '=';
  }
  return out;
}

// The line "base64 rank\n" of rank r of the synthetic ranks file.
inline std::string synthetic_rank_line(int r) { return base64(synthetic_token(r)) + " " + std::to_string(r) + "\n"; }

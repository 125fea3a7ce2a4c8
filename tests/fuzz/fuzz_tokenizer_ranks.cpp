// Fuzz target: the tokenizer's ranks file (Gpt2Tokenizer's constructor, data/gpt2_tokenizer.cpp: lines of
// "base64 rank", exactly 50256 of them, every single byte a token). Input byte 0 even: the rest is the whole
// file. Odd: the rest is the file's first lines, completed by the synthetic file's lines from the next rank
// on (fuzz_util.h), so inputs reach the checks made after the last line. A file that loads must encode and
// decode a text holding every byte value back to itself. Seeds: heads of the synthetic file, broken lines.
#include <algorithm>

#include "data/gpt2_tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

namespace {
// The synthetic file, and where each rank's line starts in it.
struct Synthetic {
  std::string text;
  std::vector<size_t> at;
  Synthetic() {
    for (int r = 0; r < Gpt2Tokenizer::kEot; r++) at.push_back(text.size()), text += synthetic_rank_line(r);
    at.push_back(text.size());
  }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const Synthetic syn;
  std::string file(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 1) {
    size_t lines = 0;  // non-empty lines, as the reader counts them
    for (size_t i = 0; i < file.size();) {
      const size_t e = std::min(file.find('\n', i), file.size());
      lines += e > i;
      i = e + 1;
    }
    if (!file.empty() && file.back() != '\n') file += '\n';
    if (lines < syn.at.size()) file.append(syn.text, syn.at[lines], std::string::npos);
  }
  try {  // from memory: writing and reading 0.7 MB per run held the target to 150 runs/s
    Gpt2Tokenizer tok(Gpt2Tokenizer::FromBytes{}, file, "ranks.tiktoken");
    std::string text = "Hello world, it's 42 caf\xc3\xa9 \xf0\x9f\x8e\x89  end\n";
    for (int b = 0; b < 256; b++) text += char(b);
    const std::vector<int> ids = tok.encode(text);
    for (int id : ids) FUZZ_EXPECT(id >= 0 && id < Gpt2Tokenizer::kEot);
    FUZZ_EXPECT(tok.decode(ids) == text);
  } catch (const UserError&) {
  }
  return 0;
}

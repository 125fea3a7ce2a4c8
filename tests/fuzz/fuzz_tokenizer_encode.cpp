// Fuzz target: the tokenizer's encode on arbitrary bytes (gpt2_pretokenize's UTF-8 scanner and the BPE
// merge, data/gpt2_tokenizer.cpp), with the real r50k ranks when tokenizer/r50k_base.tiktoken is present
// (scripts/download_tokenizer.sh; CI runs it), else the synthetic ranks file of fuzz_util.h. The pieces
// must tile the input, every id must be a GPT-2 token and decode must give the input back byte for byte.
// Seeds: English, whitespace runs, contractions, numbers, accents, CJK, emoji and invalid UTF-8.
#include <fstream>
#include <memory>

#include "data/gpt2_tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

namespace {
const Gpt2Tokenizer& tokenizer() {
  static const std::unique_ptr<Gpt2Tokenizer> tok = [] {
    const std::string real = "tokenizer/r50k_base.tiktoken";
    if (std::ifstream(real)) return std::make_unique<Gpt2Tokenizer>(real);
    std::fprintf(stderr,
                 "fuzz_tokenizer_encode: %s is missing (scripts/download_tokenizer.sh); using synthetic ranks.\n",
                 real.c_str());
    std::string text;
    for (int r = 0; r < Gpt2Tokenizer::kEot; r++) text += synthetic_rank_line(r);
    return std::make_unique<Gpt2Tokenizer>(fuzz_file("synthetic.tiktoken", text.data(), text.size()));
  }();
  return *tok;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Gpt2Tokenizer& tok = tokenizer();
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    size_t end = 0;
    for (auto [a, b] : gpt2_pretokenize(text)) {
      FUZZ_EXPECT(a == end && b > a);
      end = b;
    }
    FUZZ_EXPECT(end == text.size());
    const std::vector<int> ids = tok.encode(text);
    for (int id : ids) FUZZ_EXPECT(id >= 0 && id < Gpt2Tokenizer::kEot);
    FUZZ_EXPECT(tok.decode(ids) == text);
  } catch (const UserError&) {
  }
  return 0;
}

// GPT-2 byte-level BPE (the r50k ranks): encode text to token ids and decode ids to bytes, no Python.
// Pre-tokenisation follows GPT-2's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// with a hand-written scanner and Unicode letter/number tables (data/unicode_tables.inc); each piece
// is then merged by rank, lowest first. "<|endoftext|>" in text is ordinary text (encode_ordinary); the
// EOT id 50256 is only ever inserted explicitly. Memory stays within a few times the text's size for any
// text (a piece over kMaxBpeBytes is merged in chunks).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

class Gpt2Tokenizer {
 public:
  static constexpr int kEot = 50256, kVocab = 50257;
  static constexpr size_t kMaxBpeBytes = 65536;  // longer pieces are merged in chunks (gpt2_tokenizer.cpp)
  // Reads r50k_base.tiktoken (base64 token bytes, space, rank per line); UserError names the problem.
  explicit Gpt2Tokenizer(const std::string& tiktoken_path);
  // The same from the file's bytes; `name` is the file named in messages.
  struct FromBytes {};
  Gpt2Tokenizer(FromBytes, const std::string& tiktoken_bytes, const std::string& name);
  std::vector<int> encode(const std::string& text) const;
  std::string decode(const std::vector<int>& ids) const;
  const std::string& token_bytes(int id) const;

 private:
  void bpe(const std::string& piece, std::vector<int>* out) const;
  int rank_of(std::string_view bytes) const;  // the id of a token's bytes; -1 if none
  void add_rank(int id);                      // bytes_[id] -> id (a later id with the same bytes wins)
  std::vector<std::string> bytes_;            // id -> bytes
  // bytes -> id: an open-addressing table of ids (-1: empty), 2^17 slots. One allocation, and a lookup
  // copies nothing (a map of strings made 50,000 nodes per load and a string per lookup).
  std::vector<int32_t> slots_;
};

// The pre-tokeniser alone (exposed for tests): byte ranges of the pieces.
std::vector<std::pair<size_t, size_t>> gpt2_pretokenize(const std::string& text);

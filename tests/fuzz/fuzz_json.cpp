// Fuzz target: the JSON reader (common/json.cpp) as its three users call it: the whole input as one
// document (safetensors headers, config.json: then the keys a config check reads), and each line as a
// JSONL record whose "text" string tokenize reads. Seeds: safetensors headers, configs, JSONL lines with
// escapes and surrogate pairs, nesting.
#include <algorithm>

#include "common/json.h"
#include "tests/fuzz/fuzz_util.h"

namespace {
// The tree must be no deeper than the reader's limit: deeper input is refused, never recursed into.
int depth(const Json& j) {
  int d = 0;
  for (const auto& x : j.arr) d = std::max(d, depth(x));
  for (const auto& [k, x] : j.obj) d = std::max(d, depth(x));
  return d + 1;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const Json j = parse_json(text, "the fuzz input");
    FUZZ_EXPECT(depth(j) <= 64);
    for (const char* k : {"input_size", "hidden_size", "text"})
      if (j.has(k)) (void)j.at(k).num;
    j.at("data_offsets");  // UserError unless present
  } catch (const UserError&) {
  }
  for (size_t i = 0; i < text.size();) {
    const size_t e = std::min(text.find('\n', i), text.size());
    try {
      const Json j = parse_json(text.substr(i, e - i), "a JSONL line");
      if (j.has("text") && j.at("text").type == Json::String) (void)j.at("text").str.size();
    } catch (const UserError&) {
    }
    i = e + 1;
  }
  return 0;
}

// Fuzz target: optimizer options (optim/options.cpp). The input's first line names the optimizer, the next
// (at most 16) are --set strings for set_option; then validate_options checks the ranges and
// check_options_apply refuses options of another optimizer, as train_gpt2 does; describe_options prints
// every value (--help). Each step may refuse with a UserError independently.
// Seeds: default and typical settings of every optimizer, good and bad values.
#include <algorithm>

#include "optim/options.h"
#include "tests/fuzz/fuzz_util.h"

// set_option builds its table of keys per call: inputs of a hundred lines held the target to ~200 runs/s,
// and 16 settings reach every check (the options are independent of one another).
constexpr size_t kMaxSets = 16;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> lines;
  for (size_t i = 0; i <= text.size();) {
    const size_t e = std::min(text.find('\n', i), text.size());
    lines.push_back(text.substr(i, e - i));
    i = e + 1;
  }
  OptimOptions o;
  std::vector<std::string> accepted;
  for (size_t k = 1; k < lines.size() && k <= kMaxSets; k++) {
    try {
      set_option(o, lines[k]);
      accepted.push_back(lines[k]);
    } catch (const UserError&) {
    }
  }
  try {
    validate_options(lines[0], o);
  } catch (const UserError&) {
  }
  try {
    check_options_apply(accepted, {lines[0]});
  } catch (const UserError&) {
  }
  for (const auto& d : describe_options(o)) FUZZ_EXPECT(!d.empty());
  return 0;
}

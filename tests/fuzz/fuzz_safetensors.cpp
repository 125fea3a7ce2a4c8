// Fuzz target: safetensors weight files. The input is written to a file and read by read_safetensors
// (optim/lopt/safetensors.cpp: u64 header length, JSON header, F32 data), as the learned optimizers' weight
// loaders do; every tensor it returns must hold exactly prod(shape) floats, and all of them are read.
// Seeds: files from write_safetensors (tests/fuzz/make_seeds.cpp).
#include "optim/lopt/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz_file("model.safetensors", data, size);
  try {
    const TensorMap m = read_safetensors(path);
    for (const auto& [name, t] : m) {
      uint64_t n = 1;
      for (int64_t d : t.shape) {
        FUZZ_EXPECT(d >= 0);
        n *= uint64_t(d);
      }
      FUZZ_EXPECT(t.data.size() == n);
      volatile float sum = 0;  // touch every value (ASan checks the copy's bounds)
      for (float x : t.data) sum = sum + x;
      require_tensor(m, name, t.shape, path);
    }
    require_tensor(m, "w", {2, 3}, path);  // what a weight loader does next: a named tensor of one shape
  } catch (const UserError&) {
  }
  return 0;
}

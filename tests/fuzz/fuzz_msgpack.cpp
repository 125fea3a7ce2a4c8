// Fuzz target: flax msgpack checkpoints (VeLO's JAX params file). The input is written to a file and read
// by read_flax_arrays (optim/lopt/msgpack.cpp: the msgpack subset flax writes, arrays as ExtType 1), which
// flattens it into "a/b/c" -> float32 arrays; each must hold exactly prod(shape) floats.
// Seeds: trees from write_flax_arrays and a hand-made old-flax namedtuple (tests/fuzz/make_seeds.cpp).
#include "optim/lopt/msgpack.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz_file("params.msgpack", data, size);
  try {
    for (const auto& [name, t] : read_flax_arrays(path)) {
      uint64_t n = 1;
      for (int64_t d : t.shape) {
        FUZZ_EXPECT(d >= 0);
        n *= uint64_t(d);
      }
      FUZZ_EXPECT(t.data.size() == n);
      volatile float sum = 0;
      for (float x : t.data) sum = sum + x;
    }
  } catch (const UserError&) {
  }
  return 0;
}

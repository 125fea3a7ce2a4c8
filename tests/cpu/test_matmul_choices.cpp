// kernels/matmul_choices: a measured choice applies only to its own plan on its own GPU and cuBLASLt
// version; everything else gets the heuristic's first algorithm (index 0).
#include <gtest/gtest.h>

#include "kernels/matmul_choices.h"

namespace {
constexpr const char* kGpu = "NVIDIA H100 80GB HBM3";
constexpr size_t kVersion = 130100;
// GPT-2 124M's head forward (50304 x 65536 x 768, no epilogue), measured 8.27 -> 6.56 ms with algorithm 6.
constexpr int64_t kHead[8] = {1, 50304, 65536, 768, 3298534884096, 216054034908288, 1099511628032, 1099511627776};
}  // namespace

TEST(MatmulChoices, AMeasuredPlanGetsItsAlgorithm) { EXPECT_EQ(matmul_choice(kGpu, kVersion, kHead), 6); }

TEST(MatmulChoices, AnythingElseGetsTheHeuristicsFirst) {
  EXPECT_EQ(matmul_choice("NVIDIA H200", kVersion, kHead), 0);
  EXPECT_EQ(matmul_choice(kGpu, kVersion + 1, kHead), 0);
  for (int i = 0; i < 8; i++) {
    int64_t key[8];
    for (int j = 0; j < 8; j++) key[j] = kHead[j];
    key[i] += 1;
    EXPECT_EQ(matmul_choice(kGpu, kVersion, key), 0) << "key field " << i << " changed";
  }
}

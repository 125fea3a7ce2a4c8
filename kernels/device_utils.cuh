// Small device helpers that every kernel file needs, written once.
#pragma once
#include <cstdint>

// Sum / max over the 32 lanes of a warp (butterfly: every lane gets the result, in a fixed order).
__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

// Blocks of t threads that cover n items.
inline unsigned blocks(int64_t n, int t) { return unsigned((n + t - 1) / t); }

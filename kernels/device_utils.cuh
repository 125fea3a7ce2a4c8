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

// Asks for the 128-byte line holding *p to be brought into L2, with no register waiting for it: a kernel
// whose registers bound the loads it keeps in flight can start its next loads early this way.
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// Blocks of t threads that cover n items.
inline unsigned blocks(int64_t n, int t) { return unsigned((n + t - 1) / t); }

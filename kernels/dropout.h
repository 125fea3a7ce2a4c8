// Dropout masks drawn from a counter-based hash. Whether element (row, col) of a dropout site is kept is
// a pure function of (seed, counter, site, row, col), so the backward pass regenerates the forward's mask
// instead of storing it, every kernel can draw any element in any thread layout, and the CPU reference
// (compiled by g++) draws exactly the same masks as the GPU.
//
// Draw: key = mix64(seed, counter, site); per row r = lowbias32(lowbias32(r ^ key.lo) + key.hi); per pair
// of columns h = lowbias32(r ^ (col / 2) * golden); the element's 16 random bits are h's low half for an
// even column and its high half for an odd one, and it is kept iff they are >= threshold = round(p 65536).
// Kept elements are scaled by 65536 / (65536 - threshold), so the expectation is exact for the p drawn.
//
// A model numbers its dropout sites (GPT-2's: models/gpt2_sites.h). Rows are token positions n = b T + t
// with columns the channels, or for attention probabilities (b NH + h) T + query with columns the key
// positions.
#pragma once
#include <cstdint>

#ifdef __CUDACC__
#define DROPOUT_HD __host__ __device__ __forceinline__
#else
#define DROPOUT_HD inline
#endif

// What a kernel needs to draw one site's mask. threshold 0 = no dropout.
struct DropoutArgs {
  uint64_t seed = 0;
  const uint64_t* counter = nullptr;  // device: training micro-batches so far (read in the kernel, so graphs replay it)
  uint32_t site = 0;
  uint32_t threshold = 0;
  float scale = 1.0f;
  DROPOUT_HD bool on() const { return threshold != 0; }
};

DROPOUT_HD uint32_t dropout_threshold(float p) { return uint32_t(double(p) * 65536.0 + 0.5); }  // 0 <= p < 1
DROPOUT_HD float dropout_scale(uint32_t threshold) { return float(65536.0 / double(65536u - threshold)); }

DROPOUT_HD uint32_t lowbias32(uint32_t x) {  // an avalanching 32-bit mixer
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}
DROPOUT_HD uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
DROPOUT_HD uint64_t dropout_site_key(uint64_t seed, uint64_t counter, uint32_t site) {
  return splitmix64(seed ^ splitmix64((counter << 16) + site));
}
DROPOUT_HD uint32_t dropout_row(uint64_t key, uint32_t row) {
  return lowbias32(lowbias32(row ^ uint32_t(key)) + uint32_t(key >> 32));
}
// 32 random bits for columns 2 pair and 2 pair + 1 of a row (low half: the even column).
DROPOUT_HD uint32_t dropout_pair_bits(uint32_t row_hash, uint32_t pair) {
  return lowbias32(row_hash ^ (pair * 0x9e3779b9u));
}
DROPOUT_HD bool dropout_keep(uint32_t row_hash, uint32_t col, uint32_t threshold) {
  const uint32_t h = dropout_pair_bits(row_hash, col >> 1);
  return ((col & 1) ? h >> 16 : h & 0xffffu) >= threshold;
}

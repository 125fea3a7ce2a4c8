// A fingerprint of the data a training step reads, logged beside its loss, so that two runs claimed to
// train on the same samples can be checked to have done so (scripts/device_multi_gpu_check.sh). Each
// sample hashes to 64 bits; a batch's digest is the sum of its samples' hashes (mod 2^64). The sum does
// not depend on the order of the samples, so N processes of B samples each, summed over the processes,
// give the digest of one process reading the same N * B samples in one batch, while any other sample
// changes it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

// 64 bits of the bytes, starting from `seed`: 8 bytes at a time through a multiply-xorshift mix (the
// finaliser of splitmix64), so that hashing a 150 KB image costs tens of microseconds.
inline uint64_t digest_mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline uint64_t digest_bytes(const void* data, size_t n, uint64_t seed) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = digest_mix(seed ^ (n * 0x9e3779b97f4a7c15ull));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = digest_mix(h ^ w) + 0x9e3779b97f4a7c15ull;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p + i, n - i);
  return digest_mix(h ^ tail ^ (uint64_t(n - i) << 56));
}

// The digest of `count` samples laid out back to back, each of `a_bytes` in `a` and `b_bytes` in `b`
// (b may be null): tokens with their targets, or images with their labels.
inline uint64_t digest_samples(const void* a, size_t a_bytes, const void* b, size_t b_bytes, int64_t count) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < count; i++) {
    uint64_t h = digest_bytes(static_cast<const char*>(a) + size_t(i) * a_bytes, a_bytes, 0);
    if (b) h = digest_bytes(static_cast<const char*>(b) + size_t(i) * b_bytes, b_bytes, h);
    sum += h;
  }
  return sum;
}

// splitmix64 (Steele, Lea & Flood 2014): its output function, a bijection of 64-bit words that mixes every
// input bit into every output bit, and its increment (2^64 / the golden ratio). Counter-based draws hash a key
// and a counter with it, so a value depends on nothing but the two (data/rng.h, init_params).
#pragma once
#include <cstdint>

constexpr uint64_t kGolden64 = 0x9e3779b97f4a7c15ull;

inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// bfloat16 rounding on the host (round to nearest even, like __float2bfloat16_rn), for CPU references.
#pragma once
#include <cstdint>
#include <cstring>

inline float bf16_round(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) {  // inf or NaN: keep, quiet NaNs
    if (u & 0x007fffffu) u |= 0x00400000u;
    u &= 0xffff0000u;
  } else {
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
  }
  float y;
  std::memcpy(&y, &u, 4);
  return y;
}

// The learned optimizers' record {m0, m1, m2, v} in bf16 (velo.bf16_record, small_fc_lopt.bf16_record;
// docs/performance.md, "The records in bf16"): 8 bytes an element instead of 16. Each value is rounded
// stochastically: up to the next bf16 with probability equal to its distance from the lower one over their
// gap, so that an EMA with decay 0.999 keeps its expectation where round-to-nearest would drop every update
// below half a bf16 step (1/512 to 1/256 of the value) and stall. The random bits are a hash of (step key,
// element), so a run repeats itself and the CPU reference rounds as the GPU does. Host and device.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/dropout.h"  // lowbias32, splitmix64

#ifdef __CUDACC__
#define LO_R16_HD __host__ __device__ __forceinline__
#else
#define LO_R16_HD inline
#endif

// The bits of a 4-byte value as another 4-byte type: a float's as uint32_t, or back (a move on either side).
template <class To, class From>
LO_R16_HD To lo_r16_cast(From x) {
  static_assert(sizeof(To) == 4 && sizeof(From) == 4, "4-byte values");
  To y;
  std::memcpy(&y, &x, 4);
  return y;
}

// x as bf16 bits, rounded stochastically by the 16 random bits r: adding r below the kept bits and
// truncating rounds the magnitude up exactly when r >= 65536 - (x's dropped bits). Inf stays; a NaN stays a
// (quiet) NaN, whose dropped bits must not carry into the sign.
LO_R16_HD uint16_t lo_bf16_sr(float x, uint32_t r) {
  const uint32_t u = lo_r16_cast<uint32_t>(x);
  if ((u & 0x7f800000u) == 0x7f800000u) return uint16_t((u >> 16) | ((u & 0x007fffffu) ? 0x0040u : 0u));
  return uint16_t((u + (r & 0xffffu)) >> 16);
}
LO_R16_HD float lo_bf16_value(uint16_t b) { return lo_r16_cast<float>(uint32_t(b) << 16); }

// One tensor's key at a step, then 64 random bits for its element i: four 16-bit draws, one per value of the
// record (m0 in the low bits). The draws hang on (step, tensor, element), not on where an arena puts the
// tensor, so one GPU and every data-parallel layout round alike.
LO_R16_HD uint64_t lo_r16_tensor_key(uint64_t step, uint32_t tensor) {
  return splitmix64(splitmix64(step) ^ ((uint64_t(tensor) << 32) | 0x5a17u));
}
LO_R16_HD uint64_t lo_r16_draws(uint64_t key, uint64_t i) {
  const uint32_t a = lowbias32(lowbias32(uint32_t(i) ^ uint32_t(key)) + uint32_t(key >> 32));
  const uint32_t h0 = lowbias32(a ^ uint32_t(i >> 32));
  const uint32_t h1 = lowbias32(h0 ^ 0x9e3779b9u);
  return (uint64_t(h1) << 32) | h0;
}

#ifdef __CUDACC__
#include <type_traits>

// An element's record as the passes store it: fp32 (float4) or four bf16 (uint2: m0 | m1 << 16, m2 | v << 16).
template <bool k16>
using LoRec = std::conditional_t<k16, uint2, float4>;

__device__ __forceinline__ float4 lo_rec_load(const float4* s, int64_t i) { return s[i]; }
__device__ __forceinline__ float4 lo_rec_load(const uint2* s, int64_t i) {
  const uint2 u = s[i];
  return make_float4(lo_bf16_value(uint16_t(u.x)), lo_bf16_value(uint16_t(u.x >> 16)), lo_bf16_value(uint16_t(u.y)),
                     lo_bf16_value(uint16_t(u.y >> 16)));
}
// Stores record r at s[i] and returns what was stored, which the features read. bf16: element el of its
// tensor (the draws' index) rounded with the tensor's key of this step.
__device__ __forceinline__ float4 lo_rec_store(float4* s, int64_t i, float4 r, uint64_t, int64_t) {
  s[i] = r;
  return r;
}
__device__ __forceinline__ float4 lo_rec_store(uint2* s, int64_t i, float4 r, uint64_t key, int64_t el) {
  const uint64_t d = lo_r16_draws(key, uint64_t(el));
  const uint16_t a = lo_bf16_sr(r.x, uint32_t(d)), b = lo_bf16_sr(r.y, uint32_t(d >> 16));
  const uint16_t c = lo_bf16_sr(r.z, uint32_t(d >> 32)), e = lo_bf16_sr(r.w, uint32_t(d >> 48));
  s[i] = make_uint2(a | (uint32_t(b) << 16), c | (uint32_t(e) << 16));
  return make_float4(lo_bf16_value(a), lo_bf16_value(b), lo_bf16_value(c), lo_bf16_value(e));
}
#endif

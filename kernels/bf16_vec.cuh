// bf16 row access shared by the element-wise kernels: 8 values through one 16-byte load or store.
#pragma once
#include <cuda_bf16.h>

using bf16 = __nv_bfloat16;

// 8 bf16 <-> 8 floats through one 16-byte access.
struct Vec8 {
  float v[8];
  __device__ __forceinline__ void load(const bf16* p) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
    for (int k = 0; k < 4; k++) {
      const float2 f = __bfloat1622float2(h[k]);
      v[2 * k] = f.x;
      v[2 * k + 1] = f.y;
    }
  }
  __device__ __forceinline__ void store(bf16* p) const {
    uint4 u;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
    for (int k = 0; k < 4; k++) h[k] = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
    *reinterpret_cast<uint4*>(p) = u;
  }
};

// 8 bf16 kept packed (4 registers instead of Vec8's 8), each widened when read: for kernels that hold
// several rows at once.
struct Packed8 {
  uint4 u;
  __device__ __forceinline__ void load(const bf16* p) { u = *reinterpret_cast<const uint4*>(p); }
  __device__ __forceinline__ float operator[](int e) const {  // e known at compile time
    const unsigned w = e < 2 ? u.x : e < 4 ? u.y : e < 6 ? u.z : u.w;
    return __uint_as_float(e % 2 ? w & 0xffff0000u : w << 16);
  }
};

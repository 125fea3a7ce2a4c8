// The PTX instructions the tensor-core kernels use, one small wrapper each: flash attention
// (kernels/flash_attention_*.cu) and the learned optimizers' fast MLP (optim/lopt/small_fc_fast.cu).
//
//   cp.async     global -> shared copies that run while the warp computes (a cp_async_commit closes a
//                group, cp_async_wait<N> waits until at most N groups are in flight)
//   ldmatrix     four 8x8 b16 matrices from shared memory into the mma fragment layout, one per register
//   mma.sync     D = A B + C on 16x8 tiles, fp32 accumulation; A 16x16 (or 16x8), B 16x8 (8x8)
//   conversions  two floats into one bf16x2 / f16x2 register (the low half is the first, lower-k value)
//
// Fragments of m16n8k16, lane = 4 g + t: A holds (rows g | g + 8, k 2t, 2t + 1 | + 8), B holds (k 2t,
// 2t + 1 | + 8, column g), C and D hold (rows g | g + 8, columns 2t, 2t + 1). The accumulator layout of
// two n8 tiles is the A layout of one k16 step, so a layer's outputs feed the next mma without a trip
// through shared memory.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

// The shared-memory address of a generic pointer into shared memory (what cp.async and ldmatrix take).
__device__ __forceinline__ uint32_t smem_u32(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// ---- cp.async -------------------------------------------------------------------------------------------
// Copies 16 (cg: through L2 only), 8 or 4 (ca) bytes from global memory to shared address dst; with valid
// false nothing is read and zeros are written. The source is a pointer, or a global address held as an integer
// (kernels that compute their addresses with one wide multiply-add from an opaque() base).
__device__ __forceinline__ void cp_async16(uint32_t dst, size_t src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async8(uint32_t dst, size_t src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 8 : 0) : "memory");
}
__device__ __forceinline__ void cp_async4(uint32_t dst, size_t src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0) : "memory");
}
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  cp_async16(dst, reinterpret_cast<size_t>(src), valid);
}
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, bool valid) {
  cp_async4(dst, reinterpret_cast<size_t>(src), valid);
}
// 16 bytes only if issue (a predicated instruction, no branch); fill false: zeros, nothing read.
__device__ __forceinline__ void cp_async16_if(uint32_t dst, size_t src, bool issue, bool fill) {
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %2, 0; @p cp.async.cg.shared.global [%0], [%1], 16, %3; }" ::"r"(dst),
               "l"(src), "r"(int(issue)), "r"(fill ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's most recent groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// ---- ldmatrix -------------------------------------------------------------------------------------------
// Lanes 8i .. 8i + 7 give the row addresses of matrix i, which lands in register i; .trans transposes each
// matrix (B operands from a [k][n] tile).
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// ---- mma.sync -------------------------------------------------------------------------------------------
// D = A B + C on m16n8k16 tiles, fp32 accumulation; kF16: fp16 operands, else bf16.
template <bool kF16>
__device__ __forceinline__ float4 mma_16816(const uint32_t* a, uint32_t b0, uint32_t b1, float4 c) {
  float4 d;
  if (kF16)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
        : "=f"(d.x), "=f"(d.y), "=f"(d.z), "=f"(d.w)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c.x), "f"(c.y), "f"(c.z), "f"(c.w));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
        : "=f"(d.x), "=f"(d.y), "=f"(d.z), "=f"(d.w)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c.x), "f"(c.y), "f"(c.z), "f"(c.w));
  return d;
}
// d (16x8 fp32) += a (16x16 bf16, row) * b (16x8 bf16, col), in place.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  const float4 r = mma_16816<false>(a, b0, b1, make_float4(d[0], d[1], d[2], d[3]));
  d[0] = r.x;
  d[1] = r.y;
  d[2] = r.z;
  d[3] = r.w;
}
// D = A B + C on an m16n8k8 tile, bf16 operands: A (16x8) in two registers, B (8x8) in one.
__device__ __forceinline__ float4 mma_bf16_1688(uint32_t a0, uint32_t a1, uint32_t b, float4 c) {
  float4 d;
  asm("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};"
      : "=f"(d.x), "=f"(d.y), "=f"(d.z), "=f"(d.w)
      : "r"(a0), "r"(a1), "r"(b), "f"(c.x), "f"(c.y), "f"(c.z), "f"(c.w));
  return d;
}

// The same with fp16 operands.
__device__ __forceinline__ float4 mma_f16_1688(uint32_t a0, uint32_t a1, uint32_t b, float4 c) {
  float4 d;
  asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};"
      : "=f"(d.x), "=f"(d.y), "=f"(d.z), "=f"(d.w)
      : "r"(a0), "r"(a1), "r"(b), "f"(c.x), "f"(c.y), "f"(c.z), "f"(c.w));
  return d;
}

// ---- conversions ----------------------------------------------------------------------------------------
// Two floats rounded to bf16 (fp16) in one register; lo goes to the lower half (the lower column or k).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
__device__ __forceinline__ uint32_t pack_f16(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
// relu, then fp16 saturated to +-65504 (a value past fp16's range stays finite).
__device__ __forceinline__ uint32_t pack_f16_relu(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.satfinite.relu.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// The low and high bf16 of a register as floats (exact).
__device__ __forceinline__ float bf16_lo(uint32_t v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t v) { return __uint_as_float(v & 0xffff0000u); }
// max(v, 0) of each bf16 half.
__device__ __forceinline__ uint32_t max0_bf16x2(uint32_t v) {
  uint32_t y;
  asm("max.bf16x2 %0, %1, %2;\n" : "=r"(y) : "r"(v), "r"(0u));
  return y;
}

// ---- special-function unit ------------------------------------------------------------------------------
// 2^x and 1/sqrt(x) on the MUFU, flushing denormals (ex2(-inf) = 0): for inputs that are never denormal
// and results that are rounded to 16 bits or fed to an exponent anyway.
__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float rsqrt_approx(float x) {
  float y;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// ---- global memory --------------------------------------------------------------------------------------
// Stores of a float / a float rounded to bf16 to a global address if pred (a predicated instruction, no
// branch).
__device__ __forceinline__ void st_global_if(size_t addr, float v, bool pred) {
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %2, 0; @p st.global.f32 [%0], %1; }" ::"l"(addr), "f"(v), "r"(int(pred))
               : "memory");
}
__device__ __forceinline__ void st_global_bf16_if(size_t addr, float v, bool pred) {
  const __nv_bfloat16 b = __float2bfloat16_rn(v);
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %2, 0; @p st.global.b16 [%0], %1; }" ::"l"(addr),
               "h"(*reinterpret_cast<const unsigned short*>(&b)), "r"(int(pred))
               : "memory");
}
// x, with its derivation hidden from the compiler: addresses are then one wide multiply-add from it (else
// the compiler folds offsets into each index and rebuilds 64-bit sums per row).
__device__ __forceinline__ size_t opaque(size_t x) {
  size_t y;
  asm("mov.b64 %0, %1;" : "=l"(y) : "l"(x));
  return y;
}

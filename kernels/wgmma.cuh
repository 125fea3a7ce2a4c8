// Hopper's warpgroup matrix multiply (wgmma, sm_90a only), the few forms the Hopper attention kernels use
// (kernels/flash_attention_fwd_sm90.cu, _bwd_sm90.cu). A warpgroup is 4 consecutive warps starting at a warp index
// divisible by 4; its 128 threads issue each wgmma together, and it runs asynchronously until a wait:
//
//   fence      before the first wgmma that reads registers other instructions wrote (accumulators, A)
//   commit     closes a group of issued wgmmas; wait<N> waits until at most N groups are still running
//
// m64n64k16, bf16 inputs, fp32 accumulators: D (64 x 64) += A (64 x 16) B (16 x 64). Warp w of the group
// holds rows 16w .. 16w + 15 of D in 32 registers laid out as 8 mma.sync m16n8 tiles ([8][4],
// kernels/mma_ptx.cuh): d[4j + e] is row g + 8 (e / 2), column 8j + 2t + e % 2 (lane = 4g + t). A from
// registers takes mma.sync's A layout for its 16 rows, so two n8 tiles of one product are one k16 step of
// A for the next: P = softmax(S) feeds P V without a trip through shared memory.
//
// Shared-memory operands are described by a 64-bit descriptor. Every tile here has rows of 64 bf16 (128
// bytes) with the 16-byte chunks swizzled as flash_attention.cuh's swz() does (chunk c of row r at c ^ (r %
// 8)), which is exactly the hardware's 128-byte swizzle when the tile starts on a 1024-byte boundary: the
// descriptor's stride byte offset is then 1024 (8 rows) and its leading byte offset is unused.
//   K-major operand (Q, K: rows are M or N, the 64 elements along the k dimension): k-step kk starts 32
//   bytes further (kk * 16 elements into each row; the hardware swizzles the address it forms).
//   MN-major operand (V: rows are k, the 64 elements along N; imm-trans-b = 1): k-step kk starts 16 rows,
//   2048 bytes, further.
#pragma once
#include <cstdint>

namespace wgmma {

__device__ __forceinline__ uint64_t desc_sw128(uint32_t smem_addr) {
  return uint64_t((smem_addr & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}
// The descriptor moved on by `bytes` (a multiple of 16).
__device__ __forceinline__ uint64_t desc_add(uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); }

// p moved up to the next 1024-byte boundary of shared memory, where the 128-byte swizzle's pattern starts.
__device__ __forceinline__ uint8_t* align1024(uint8_t* p) {
  return p + ((1024 - (uint32_t(__cvta_generic_to_shared(p)) & 1023)) & 1023);
}
// An accumulator tile in mma.sync's [8][4] layout as the 32 registers a wgmma takes.
__device__ __forceinline__ float (&flat(float (&x)[8][4]))[32] { return reinterpret_cast<float(&)[32]>(x); }

__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Shared memory written by ordinary stores or cp.async is read by wgmma through the async proxy: each
// writing thread fences before the barrier that publishes it.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Keeps the compiler from moving reads or writes of an accumulator across the asynchronous region.
__device__ __forceinline__ void fence_operands(float (&d)[32]) {
#pragma unroll
  for (int i = 0; i < 32; i++) asm volatile("" : "+f"(d[i])::"memory");
}

#define WGMMA_D32                                                                                                   \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31}"
#define WGMMA_OUT32(d)                                                                                        \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), \
      "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),  \
      "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), \
      "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

// d (= or +=, accumulate) A B, A and B K-major in shared memory.
__device__ __forceinline__ void mma_ss(float (&d)[32], uint64_t a, uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WGMMA_D32 ", %32, %33, p, 1, 1, 0, 0;\n}\n"
      : WGMMA_OUT32(d)
      : "l"(a), "l"(b), "r"(int(accumulate)));
}
// d += A B, A in registers (bf16 pairs, mma.sync's A layout), B MN-major in shared memory.
__device__ __forceinline__ void mma_rs_bt(float (&d)[32], const uint32_t (&a)[4], uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WGMMA_D32 ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : WGMMA_OUT32(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}
#undef WGMMA_D32
#undef WGMMA_OUT32

// The products of whole 64 x 64 tiles that attention is made of, over k = 64 (four k-steps):
// d = A B, A and B K-major tiles in shared memory (Q K^T, dO V^T, K Q^T, V dO^T);
__device__ __forceinline__ void tile_ss(float (&d)[32], uint32_t a, uint32_t b) {
  const uint64_t da = desc_sw128(a), db = desc_sw128(b);
#pragma unroll
  for (int kk = 0; kk < 4; kk++) mma_ss(d, desc_add(da, 32 * kk), desc_add(db, 32 * kk), kk > 0);
}
// d += A B, A in registers k-step by k-step (P, dS, their transposes), B an MN-major tile (V, dO, Q, K).
__device__ __forceinline__ void tile_rs(float (&d)[32], const uint32_t (&a)[4][4], uint32_t b) {
  const uint64_t db = desc_sw128(b);
#pragma unroll
  for (int kk = 0; kk < 4; kk++) mma_rs_bt(d, a[kk], desc_add(db, 2048 * kk));
}
}  // namespace wgmma

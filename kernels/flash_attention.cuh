// What the forward (flash_attention_fwd.cu) and backward (flash_attention_bwd.cu) attention kernels share:
// tile sizes, the swizzled shared-memory tile layout, mma fragment addresses, tile copies, the grid order,
// the dropout keep tests and the launchers' checks. Every kernel runs 4 warps on head size 64, bf16
// tensor cores (mma.sync m16n8k16, fp32 accumulation: kernels/mma_ptx.cuh), and is a template on kCausal:
// the non-causal one visits every key tile and hides only the keys past T (zero-filled padding of the
// last tile).
//
// Shared-memory tiles hold 64-element head rows (128 bytes) with the 16-byte chunks XOR-swizzled by
// row, so cp.async row writes and ldmatrix reads are free of bank conflicts. The next two tiles load
// (cp.async, three stages, one barrier per tile) while the current one is multiplied. Rows at or past T
// are zero-filled, never read, and masked, so any T works. CTAs go head by head, so that the tiles a
// head's CTAs share are read from HBM about once and then from L2.
//
// Dropout on P (kernels/dropout.h; every kernel is a template on kDrop, and kDrop = false is the plain
// code): the mask is drawn where it is used, from hashes of the row (query) and of the pair of adjacent
// key columns, so the forward and both backward kernels draw the same mask without storing it.
#pragma once
#include <algorithm>
#include <cstdint>

#include "common/cuda_check.h"
#include "kernels/flash_attention.h"
#include "kernels/mma_ptx.cuh"

namespace flash {
constexpr int kHead = 64;                                   // head size: one row of a head is 128 bytes
constexpr int kTile = 64;                                   // rows per K/V tile, and per query tile of the backward
constexpr int kTileBytes = kTile * kHead * 2;               // 8 KB
constexpr int kThreads = 128;                               // every kernel here runs 4 warps
constexpr int kStages = 3;                                  // tiles in flight: one barrier per tile suffices
constexpr float kScaleLog2 = 0.125f * 1.4426950408889634f;  // 1/sqrt(64) * log2(e)
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Byte offset of 16-byte chunk c (0..7) of row r in a tile of 128-byte rows. The XOR spreads the 8 rows
// that one ldmatrix phase reads at the same logical chunk over all 32 banks.
__device__ __forceinline__ uint32_t swz(int r, int c) { return uint32_t(r * 128 + ((c ^ (r & 7)) << 4)); }

// ---- dropout keep tests ---------------------------------------------------------------------------------
// Keep tests of the low and high 16-bit halves of h against thr16 = threshold << 16 (a half is >=
// threshold iff it is >= thr16 when shifted to the top). The kernels get thr16 as an argument, so that
// it stays in the constant bank instead of taking a register.
__device__ __forceinline__ bool keep_lo(uint32_t h, uint32_t thr16) { return (h << 16) >= thr16; }
__device__ __forceinline__ bool keep_hi(uint32_t h, uint32_t thr16) { return h >= thr16; }

// ---- fragment addresses ---------------------------------------------------------------------------------
// m16n8k16 fragments, lane = 4*g + t: A holds (row g | g+8, k 2t..2t+1 | +8), B holds (k 2t..2t+1 | +8,
// n g), C holds (row g | g+8, n 2t..2t+1). One ldmatrix.x4 fetches four 8x8 matrices; lanes 8i..8i+7
// give the row addresses of matrix i, which lands in register i.

// A operand, 16 rows x 16 k (k-step kk) from a [row][k] tile.
__device__ __forceinline__ uint32_t addr_a(uint32_t tile, int row0, int kk, int lane) {
  return tile + swz(row0 + (lane & 15), 2 * kk + (lane >> 4));
}
// B operands of two n-tiles (n0..n0+15) for k-step kk, from a [n][k] tile (k contiguous), plain ldmatrix:
// registers {0,1} are b0,b1 of the first n-tile, {2,3} of the second.
__device__ __forceinline__ uint32_t addr_b_nk(uint32_t tile, int n0, int kk, int lane) {
  return tile + swz(n0 + (lane & 7) + ((lane >> 4) << 3), 2 * kk + ((lane >> 3) & 1));
}
// The same from a [k][n] tile (n contiguous) with ldmatrix.trans: k rows k0..k0+15, n columns 16*np..+15.
__device__ __forceinline__ uint32_t addr_b_kn(uint32_t tile, int k0, int np, int lane) {
  return tile + swz(k0 + (lane & 7) + (((lane >> 3) & 1) << 3), 2 * np + (lane >> 4));
}

// The dQ pass's per-row inputs for this thread's two rows (row0 + 8 hf): the forward's log-sum-exp in log2
// units and D = rowsum(dO * O); rows past T get 0.
__device__ __forceinline__ void dq_row_stats(const float* lse, const float* Dsum, int bh, int T, int row0,
                                             float (&lse2)[2], float (&D)[2]) {
#pragma unroll
  for (int hf = 0; hf < 2; hf++) {
    const int row = row0 + 8 * hf;
    lse2[hf] = row < T ? lse[int64_t(bh) * T + row] * kLog2e : 0.0f;
    D[hf] = row < T ? Dsum[int64_t(bh) * T + row] : 0.0f;
  }
}

// The largest of one row's 64 scores in a 16 x 64 tile (row half hf: 16 in this thread, then the quad's 4
// lanes), as the same tree of fmaxf in both forward kernels, so that they give the same bits.
__device__ __forceinline__ float quad_row_max(const float (&s)[8][4], int hf) {
  float m[8];
#pragma unroll
  for (int nt = 0; nt < 8; nt++) m[nt] = fmaxf(s[nt][2 * hf], s[nt][2 * hf + 1]);
#pragma unroll
  for (int w = 4; w > 0; w >>= 1)
#pragma unroll
    for (int i = 0; i < w; i++) m[i] = fmaxf(m[i], m[i + w]);
  const float mx = fmaxf(m[0], __shfl_xor_sync(0xffffffffu, m[0], 1));
  return fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
}

// d (16x8 fp32) += a (16x16 bf16, row) * b (16x8 bf16, col): every product here accumulates in place.
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  mma_bf16_16816(d, a, b0, b1);
}

// ---- tile movement --------------------------------------------------------------------------------------

// Starts copying ROWS head rows, from row r0 of a row-major matrix with row stride ld, into a swizzled tile.
template <int ROWS>
__device__ __forceinline__ void load_rows(uint32_t tile, const bf16* g, int64_t ld, int r0, int T, int tid) {
  static_assert(ROWS % (kThreads / 8) == 0, "whole rows per pass");
  const int c = tid & 7;
#pragma unroll
  for (int i = 0; i < ROWS / (kThreads / 8); i++) {
    const int r = (tid >> 3) + i * (kThreads / 8);
    const bool ok = r0 + r < T;
    cp_async16(tile + swz(r, c), g + (ok ? int64_t(r0 + r) * ld : 0) + c * 8, ok);
  }
}

// Starts copying n floats from x[r0..] (zeros past T) into shared memory; threads [t0, t0 + n) take part.
__device__ __forceinline__ void load_vec(uint32_t dst, const float* x, int r0, int T, int tid, int t0, int n) {
  const int i = tid - t0;
  if (i >= 0 && i < n) {
    const bool ok = r0 + i < T;
    cp_async4(dst + 4 * i, x + (ok ? r0 + i : 0), ok);
  }
}

// Writes a warp's 16 x 64 accumulator tile (row half hf scaled by mul[hf]) as bf16 into rows row0.. of a
// swizzled tile.
__device__ __forceinline__ void stage_acc(uint8_t* tile, int row0, const float (&acc)[8][4], const float (&mul)[2],
                                          int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < 8; nt++)
#pragma unroll
    for (int hf = 0; hf < 2; hf++)
      *reinterpret_cast<uint32_t*>(tile + swz(row0 + g + 8 * hf, nt) + 4 * t) =
          pack_bf16(acc[nt][2 * hf] * mul[hf], acc[nt][2 * hf + 1] * mul[hf]);
}
// One warp copies ROWS rows of a swizzled tile to global rows grow0.. (only rows < T), 16 bytes a lane.
template <int ROWS>
__device__ __forceinline__ void store_rows(bf16* g, int64_t ld, int grow0, int T, const uint8_t* tile, int row0,
                                           int lane) {
  const int c = lane & 7;
#pragma unroll
  for (int i = 0; i < ROWS / 4; i++) {
    const int r = (lane >> 3) + 4 * i;
    if (grow0 + r < T)
      *reinterpret_cast<uint4*>(g + int64_t(grow0 + r) * ld + c * 8) =
          *reinterpret_cast<const uint4*>(tile + swz(row0 + r, c));
  }
}

// ---- grid order -----------------------------------------------------------------------------------------

// CTA blockIdx.x -> (batch*head, tile rank). Heads go in groups of `group`; within a group all heads'
// rank-r tiles come before rank r + 1. Rank 0 is the longest tile, so each group starts its long tiles
// first and the grid ends on short ones (a short tail), while the CTAs in flight span about one group,
// whose shared K/V (or Q/dO) tiles then come from L2 instead of HBM.
__device__ __forceinline__ void grid_pos(int n_tiles, int group, int& bh, int& rank) {
  const int BH = int(gridDim.x) / n_tiles, per_group = group * n_tiles;
  const int grp = int(blockIdx.x) / per_group, size = min(group, BH - grp * group);
  const int r = int(blockIdx.x) - grp * per_group;
  rank = r / size;
  bh = grp * group + (r - rank * size);
}

// ---- the launchers' checks and settings -----------------------------------------------------------------

inline void check_shape(const char* who, int B, int T, int NH) {
  if (B < 1 || T < 1 || NH < 1)
    user_error(who, ": B, T and NH must all be at least 1 (got B=", B, ", T=", T, ", NH=", NH, ").");
  if (int64_t(B) * NH * ((T + kTile - 1) / kTile) > 0x7fffffff)  // one CTA per (batch, head, 64-row tile)
    user_error(who, ": shape B=", B, ", T=", T, ", NH=", NH, " is too large for the attention kernels' grid.");
}
inline void check_aligned(const char* who, const void* p, const char* name, unsigned align) {
  if (reinterpret_cast<uintptr_t>(p) % align != 0)
    user_error(who, ": ", name, " must be ", align, "-byte aligned (cudaMalloc'd buffers are).");
}
inline void check_dropout(const char* who, const DropoutArgs& d) {
  if (!d.on()) return;
  if (d.counter == nullptr) user_error(who, ": dropout needs its device counter.");
  if (d.threshold >= 65536u) user_error(who, ": dropout threshold must be below 65536 (got ", d.threshold, ").");
}
// Heads per grid_pos group: at most as many as keep the 256 bytes per row (K and V, or Q and dO) that a
// head's CTAs share within about 16 MB of L2, and groups of equal size (a small last group would run its
// long tiles alone at the end).
inline int heads_per_group(int B, int T, int NH) {
  const int64_t heads = int64_t(B) * NH, fit = std::max<int64_t>(1, (int64_t(16) << 20) / (int64_t(T) * 2 * kHead * 2));
  const int64_t groups = (heads + fit - 1) / fit;
  return int((heads + groups - 1) / groups);
}
template <class K>
void set_smem(K kernel, int bytes) {
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                  int(cudaSharedmemCarveoutMaxShared)));
}
}  // namespace flash

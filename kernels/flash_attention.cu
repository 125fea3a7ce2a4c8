// Flash attention, causal (GPT-2) or not (ViT), head size 64, bf16 tensor cores (mma.sync m16n8k16, fp32
// accumulation). Every kernel is a template on kCausal; the non-causal one visits every key tile and hides
// only the keys past T (zero-filled padding of the last tile).
//
// Forward, per (batch, head) and tile of 128 queries: S = Q K^T * 1/8 one 64-key tile at a time, an online
// softmax in fp32 (running row max m and sum l, in log2 units so that exp is one ex2), O += P V with P
// rounded to bf16. Per query row it stores O / l (bf16) and lse = m + log l. A query tile reads its Q
// once and the K/V tiles up to its diagonal, which its head's other CTAs read too (from L2, see
// grid_pos). The work is 2*2*T^2/2*64 FLOPs per head against about 8*T*64 bytes of HBM traffic, so the
// tensor cores and the exp unit (one ex2 per score) bound it, not memory.
//
// Backward, with P = exp(S - lse) recomputed from the saved lse and D = rowsum(dO * O):
//   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - D),  dQ = dS K / 8,  dK = dS^T Q / 8.
// Two kernels and no atomics, so results are bit-reproducible: one per 64-key tile walks the query
// tiles at and after its diagonal and owns dK, dV; the other per 64-query tile walks the key tiles up
// to its diagonal and owns dQ. S and dP are thus computed twice (7 matrix products instead of 5).
//
// Shared-memory tiles hold 64-element head rows (128 bytes) with the 16-byte chunks XOR-swizzled by
// row, so cp.async row writes and ldmatrix reads are free of bank conflicts. The next two tiles load
// (cp.async, three stages, one barrier per tile) while the current one is multiplied. Rows at or past T
// are zero-filled, never read, and masked, so any T works. CTAs go head by head, so that the tiles a
// head's CTAs share are read from HBM about once and then from L2.
//
// Dropout on P (kernels/dropout.h; every kernel is a template on kDrop, and kDrop = false is the plain
// code): with Z = keep * scale, O = (Z * P) V, and the backward's P, lse and D stay those of the undropped
// scores: dV = (Z * P)^T dO, dS = P * (Z * dP - D). The mask is drawn where it is used, from hashes of the
// row (query) and of the pair of adjacent key columns: the forward and the dQ kernel hold adjacent key
// pairs and hash each pair once; the dK/dV kernel, whose lanes hold keys g and g + 8 of a query, shares
// row and pair hashes between lanes by shuffles (see drop_bits_kv). The forward zeroes dropped P when
// it packs them to bf16 and folds the scale into 1/l; the dK/dV kernel flips the sign of dropped P (P
// >= 0), so that max(P, 0) is the mask for dV (scaled at the end) and |P| the P of dS.
#include <algorithm>
#include <cstdint>

#include "common/cuda_check.h"
#include "kernels/flash_attention.h"

namespace {
constexpr int kHead = 64;                                   // head size: one row of a head is 128 bytes
constexpr int kTile = 64;                                   // rows per K/V tile, and per query tile of the backward
constexpr int kTileBytes = kTile * kHead * 2;               // 8 KB
constexpr int kThreads = 128;                               // every kernel here runs 4 warps
constexpr float kScaleLog2 = 0.125f * 1.4426950408889634f;  // 1/sqrt(64) * log2(e)
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// ---- small PTX wrappers ----------------------------------------------------------------------------

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// Byte offset of 16-byte chunk c (0..7) of row r in a tile of 128-byte rows. The XOR spreads the 8 rows
// that one ldmatrix phase reads at the same logical chunk over all 32 banks.
__device__ __forceinline__ uint32_t swz(int r, int c) { return uint32_t(r * 128 + ((c ^ (r & 7)) << 4)); }

// Asynchronous global -> shared copies; with valid == false nothing is read and zeros are written.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N of this thread's most recent groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// d (16x8 fp32) += a (16x16 bf16, row) * b (16x8 bf16, col).
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float ex2(float x) {  // 2^x on the special-function unit; ex2(-inf) = 0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {  // lo goes to the lower column
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
__device__ __forceinline__ float bf16_lo(uint32_t v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t v) { return __uint_as_float(v & 0xffff0000u); }
__device__ __forceinline__ uint32_t max0_bf16x2(uint32_t v) {  // max(v, 0) per bf16 half
  uint32_t y;
  asm("max.bf16x2 %0, %1, %2;\n" : "=r"(y) : "r"(v), "r"(0u));
  return y;
}

// ---- dropout ------------------------------------------------------------------------------------------
// Keep tests of the low and high 16-bit halves of h against thr16 = threshold << 16 (a half is >=
// threshold iff it is >= thr16 when shifted to the top). The kernels get thr16 as an argument, so that
// it stays in the constant bank instead of taking a register.
__device__ __forceinline__ bool keep_lo(uint32_t h, uint32_t thr16) { return (h << 16) >= thr16; }
__device__ __forceinline__ bool keep_hi(uint32_t h, uint32_t thr16) { return h >= thr16; }
// Zeroes the dropped ones of two adjacent columns (lo: the even one) whose random bits are h.
__device__ __forceinline__ void drop_pair(float& lo, float& hi, uint32_t h, uint32_t thr16) {
  lo = keep_lo(h, thr16) ? lo : 0.0f;
  hi = keep_hi(h, thr16) ? hi : 0.0f;
}
// dK/dV kernel: the random bits of query m0 + 8 nt + 2 t4 + par (lane = 4 g + t4) at keys kw + g (low half)
// and kw + g + 8 (high half). rh_mine: the row hash of query m0 + 8 g + 2 t4 + par, which lane 4 nt + t4
// hands on. Lanes g and g ^ 1 need the same two pairs of columns, (kw + g) / 2 and that + 4, so each hashes
// one (own_pair: the first for even g, the second for odd g), they swap, and perm picks the halves.
__device__ __forceinline__ uint32_t drop_bits_kv(uint32_t rh_mine, int nt, int t4, uint32_t own_pair, uint32_t perm) {
  const uint32_t rh = __shfl_sync(0xffffffffu, rh_mine, 4 * nt + t4);
  const uint32_t a = dropout_pair_bits(rh, own_pair);
  const uint32_t b = __shfl_xor_sync(0xffffffffu, a, 4);  // lane g ^ 1's
  return __byte_perm(a, b, perm);
}

// ---- fragment addresses -----------------------------------------------------------------------------
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

// ---- tile movement ------------------------------------------------------------------------------------

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

// ---- grid order ---------------------------------------------------------------------------------------

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

// ---- forward ------------------------------------------------------------------------------------------

constexpr int kFwdRows = 128;  // queries per CTA: warp w owns rows 16w..16w+15 and 64+16w..64+16w+15
constexpr int kStages = 3;     // K/V (or Q/dO) tiles in flight: one barrier per tile suffices
// Shared memory: Q (128 rows, 16 KB; reused to stage O), then kStages stages of (K, V) tiles (8 KB each).
constexpr int kFwdSmem = kFwdRows * 128 + kStages * 2 * kTileBytes;

// One key tile for m-tiles MT0..1 of a warp (m-tile mt holds rows r0 + 64 mt .. +15): S = Q K^T, online
// softmax, O += P V. MT0 = 1 when the key tile lies wholly after m-tile 0 (the CTA's last key tile).
// kDrop: rh holds the rows' dropout hashes; dropped p are zeroed after the row sums (scale: at the end).
template <int MT0, bool kDrop, bool kCausal>
__device__ __forceinline__ void fwd_tile(float (&o)[2][8][4], float (&row_max)[2][2], float (&row_sum)[2][2],
                                         const uint32_t (&qf)[2][4][4], uint32_t sK, uint32_t sV, int n0, int r0, int T,
                                         int lane, const uint32_t (&rh)[2][2], uint32_t thr16) {
  const int g = lane >> 2, t4 = lane & 3;
  float s[2][8][4] = {};
#pragma unroll
  for (int kk = 0; kk < 4; kk++)
#pragma unroll
    for (int np = 0; np < 4; np++) {
      uint32_t bk[4];
      ldsm_x4(bk, addr_b_nk(sK, np * 16, kk, lane));
#pragma unroll
      for (int mt = MT0; mt < 2; mt++) {  // each K fragment feeds both m-tiles
        mma(s[mt][2 * np], qf[mt][kk], bk[0], bk[1]);
        mma(s[mt][2 * np + 1], qf[mt][kk], bk[2], bk[3]);
      }
    }
  if (kCausal ? n0 + kTile - 1 > r0 + 64 * MT0 : n0 + kTile > T) {  // hide keys after the row, or past T
#pragma unroll
    for (int mt = MT0; mt < 2; mt++)
#pragma unroll
      for (int nt = 0; nt < 8; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int key = n0 + nt * 8 + 2 * t4 + (e & 1);
          if (kCausal ? key > r0 + 64 * mt + g + 8 * (e >> 1) : key >= T) s[mt][nt][e] = -INFINITY;
        }
  }
  // Online softmax. A row's 64 scores sit in the 4 lanes of a quad; maxima and sums are taken as trees.
  float corr[2][2];
  bool grew = false;  // did any row max of this warp grow (then O and the sums need rescaling)?
#pragma unroll
  for (int mt = MT0; mt < 2; mt++)
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
      float m[8];
#pragma unroll
      for (int nt = 0; nt < 8; nt++) m[nt] = fmaxf(s[mt][nt][2 * hf], s[mt][nt][2 * hf + 1]);
#pragma unroll
      for (int w = 4; w > 0; w >>= 1)
#pragma unroll
        for (int i = 0; i < w; i++) m[i] = fmaxf(m[i], m[i + w]);
      float mx = fmaxf(m[0], __shfl_xor_sync(0xffffffffu, m[0], 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(row_max[mt][hf], mx * kScaleLog2);
      grew |= m_new > row_max[mt][hf];
      corr[mt][hf] = ex2(row_max[mt][hf] - (m_new == -INFINITY ? 0.0f : m_new));
      row_max[mt][hf] = m_new;
    }
  // Past the first key tiles row maxima rarely grow; when none did, every factor is exactly 1.
  if (__any_sync(0xffffffffu, grew)) {
#pragma unroll
    for (int mt = MT0; mt < 2; mt++)
#pragma unroll
      for (int hf = 0; hf < 2; hf++) {
        row_sum[mt][hf] *= corr[mt][hf];
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
          o[mt][nt][2 * hf] *= corr[mt][hf];
          o[mt][nt][2 * hf + 1] *= corr[mt][hf];
        }
      }
  }
#pragma unroll
  for (int mt = MT0; mt < 2; mt++)
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
      // A row with no key yet (max -inf) would give inf - inf: use 0, its p are all 0 anyway.
      const float m_use = row_max[mt][hf] == -INFINITY ? 0.0f : row_max[mt][hf];
      float sum[8];
#pragma unroll
      for (int nt = 0; nt < 8; nt++) {
        const float p0 = ex2(fmaf(s[mt][nt][2 * hf], kScaleLog2, -m_use));
        const float p1 = ex2(fmaf(s[mt][nt][2 * hf + 1], kScaleLog2, -m_use));
        s[mt][nt][2 * hf] = p0;
        s[mt][nt][2 * hf + 1] = p1;
        sum[nt] = p0 + p1;
      }
#pragma unroll
      for (int w = 4; w > 0; w >>= 1)
#pragma unroll
        for (int i = 0; i < w; i++) sum[i] += sum[i + w];
      row_sum[mt][hf] += sum[0];  // this lane's part; the quad is summed at the end
    }
    // O += P V: P's accumulator layout is already the A-fragment layout (two n-tiles per k-step).
#pragma unroll
  for (int kk = 0; kk < 4; kk++) {
    uint32_t pa[2][4];
#pragma unroll
    for (int mt = MT0; mt < 2; mt++) {
      if constexpr (kDrop) {
#pragma unroll
        for (int r = 0; r < 4; r++) {  // A register r: n-tile 2 kk + r / 2, row half r % 2
          float* e = &s[mt][2 * kk + (r >> 1)][2 * (r & 1)];
          drop_pair(e[0], e[1], dropout_pair_bits(rh[mt][r & 1], (n0 >> 1) + (2 * kk + (r >> 1)) * 4 + t4), thr16);
        }
      }
      pa[mt][0] = pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
      pa[mt][1] = pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
      pa[mt][2] = pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
      pa[mt][3] = pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
    }
#pragma unroll
    for (int dp = 0; dp < 4; dp++) {
      uint32_t bv[4];
      ldsm_x4_t(bv, addr_b_kn(sV, kk * 16, dp, lane));
#pragma unroll
      for (int mt = MT0; mt < 2; mt++) {
        mma(o[mt][2 * dp], pa[mt], bv[0], bv[1]);
        mma(o[mt][2 * dp + 1], pa[mt], bv[2], bv[3]);
      }
    }
  }
}

// One CTA per (batch, head, 128-query tile). The warps' rows interleave (16w.. and 64 + 16w..) so that
// on the CTA's last key tile, which only the upper 64 rows see (causal), all four warps share the work.
template <bool kDrop, bool kCausal>
__global__ void __launch_bounds__(kThreads, 2)
    flash_fwd_k(bf16* out, float* lse, const bf16* qkv, int T, int NH, int group, DropoutArgs drop, uint32_t thr16) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const int n_qt = (T + kFwdRows - 1) / kFwdRows;
  int bh, rank;
  grid_pos(n_qt, group, bh, rank);
  const int b = bh / NH, h = bh - b * NH;
  const int m0 = (n_qt - 1 - rank) * kFwdRows;  // the last query tile has the most key tiles
  const int C = NH * kHead;
  const int64_t ld = 3LL * C;
  const bf16* q = qkv + int64_t(b) * T * ld + h * kHead;
  const bf16* k = q + C;
  const bf16* v = q + 2 * C;
  const uint32_t sQ = smem_u32(smem), sKV = sQ + kFwdRows * 128;  // stage s: K at sKV + 2s*8K, V after it
  const int n_kv = ((kCausal ? min(m0 + kFwdRows, T) : T) + kTile - 1) / kTile;  // key tiles (to the diagonal)
  auto load_kv = [&](int j, int st) {
    load_rows<kTile>(sKV + 2 * st * kTileBytes, k, ld, j * kTile, T, tid);
    load_rows<kTile>(sKV + (2 * st + 1) * kTileBytes, v, ld, j * kTile, T, tid);
  };

  // Commit group j holds key tile j (group 0 also Q).
  load_rows<kFwdRows>(sQ, q, ld, m0, T, tid);
  load_kv(0, 0);
  cp_async_commit();
  if (n_kv > 1) load_kv(1, 1);
  cp_async_commit();
  cp_async_wait<1>();
  __syncthreads();

  const int r0 = m0 + warp * 16;  // first row of this warp's m-tile 0; m-tile 1 starts at r0 + 64
  uint32_t qf[2][4][4];           // Q fragments, kept in registers
#pragma unroll
  for (int mt = 0; mt < 2; mt++)
#pragma unroll
    for (int kk = 0; kk < 4; kk++) ldsm_x4(qf[mt][kk], addr_a(sQ, warp * 16 + mt * 64, kk, lane));
  float o[2][8][4] = {};
  float row_max[2][2] = {{-INFINITY, -INFINITY}, {-INFINITY, -INFINITY}};  // in scaled log2 units
  float row_sum[2][2] = {};
  uint32_t rh[2][2] = {};  // dropout: the hashes of this thread's rows
  if constexpr (kDrop) {
    const uint64_t key = dropout_site_key(drop.seed, *drop.counter, drop.site);
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
      for (int hf = 0; hf < 2; hf++)
        rh[mt][hf] = dropout_row(key, uint32_t(bh) * uint32_t(T) + uint32_t(r0 + 64 * mt + g + 8 * hf));
  }

  for (int j = 0, st = 0; j < n_kv; j++, st = st == kStages - 1 ? 0 : st + 1) {
    if (j > 0) {
      cp_async_wait<1>();  // tile j has landed ...
      __syncthreads();     // ... for every thread, and every warp is done with tile j - 1
    }
    if (j + 2 < n_kv) load_kv(j + 2, st == 0 ? kStages - 1 : st - 1);  // into tile j - 1's stage
    cp_async_commit();
    const int n0 = j * kTile;
    const uint32_t sK = sKV + 2 * st * kTileBytes, sV = sK + kTileBytes;
    if (kCausal && n0 > r0 + 15)
      fwd_tile<1, kDrop, kCausal>(o, row_max, row_sum, qf, sK, sV, n0, r0, T, lane, rh, thr16);
    else
      fwd_tile<0, kDrop, kCausal>(o, row_max, row_sum, qf, sK, sV, n0, r0, T, lane, rh, thr16);
  }

  // Normalise, write lse and O (staged through this warp's own rows of the Q tile for 16-byte stores).
#pragma unroll
  for (int mt = 0; mt < 2; mt++) {
    float inv[2];
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
      float l = row_sum[mt][hf];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      inv[hf] = kDrop ? drop.scale / l : 1.0f / l;  // kept p carry the dropout scale
      const int row = r0 + 64 * mt + g + 8 * hf;
      if (t4 == 0 && row < T) lse[int64_t(bh) * T + row] = (row_max[mt][hf] + log2f(l)) * kLn2;
    }
    stage_acc(smem, warp * 16 + mt * 64, o[mt], inv, lane);
  }
  __syncwarp();
  bf16* out_bh = out + int64_t(b) * T * C + h * kHead;
  store_rows<16>(out_bh, C, r0, T, smem, warp * 16, lane);
  store_rows<16>(out_bh, C, r0 + 64, T, smem, warp * 16 + 64, lane);
}

// ---- backward -----------------------------------------------------------------------------------------

// D[b, h, t] = sum_d dout * out over one head row; 8 lanes per row, 16 bytes each.
__global__ void flash_bwd_dsum_k(float* D, const bf16* dout, const bf16* out, int B, int T, int NH) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t row = i >> 3, rows = int64_t(B) * T * NH;  // row = (b*T + t)*NH + h
  float acc = 0.0f;
  if (row < rows) {
    const uint4 a = *reinterpret_cast<const uint4*>(dout + row * kHead + (i & 7) * 8);
    const uint4 c = *reinterpret_cast<const uint4*>(out + row * kHead + (i & 7) * 8);
    const uint32_t* pa = &a.x;
    const uint32_t* pc = &c.x;
#pragma unroll
    for (int w = 0; w < 4; w++) acc += bf16_lo(pa[w]) * bf16_lo(pc[w]) + bf16_hi(pa[w]) * bf16_hi(pc[w]);
  }
  acc += __shfl_xor_sync(0xffffffffu, acc, 1);
  acc += __shfl_xor_sync(0xffffffffu, acc, 2);
  acc += __shfl_xor_sync(0xffffffffu, acc, 4);
  if ((i & 7) == 0 && row < rows) {
    const int h = int(row % NH);
    const int64_t bt = row / NH;
    const int t = int(bt % T), b = int(bt / T);
    D[(int64_t(b) * NH + h) * T + t] = acc;
  }
}

// Shared memory of both backward kernels: two fixed 64-row tiles, kStages stages of two streamed 64-row
// tiles, and kStages stages of two 64-float vectors (lse, D; dK/dV kernel only).
constexpr int kBwdSmem = (2 + 2 * kStages) * kTileBytes + kStages * 2 * kTile * 4;

// dK, dV for one 64-key tile, looping over the query tiles at and after it (causal) or over all of them.
// Warp w owns keys n0 + 16w .. +15 and works on the transposed products: S^T = K Q^T, dP^T = V dO^T (keys
// as rows), so that the K and V fragments stay in registers and the dK, dV accumulators never leave the warp.
template <bool kDrop, bool kCausal>
__global__ void __launch_bounds__(kThreads, 2)
    flash_bwd_dkdv_k(bf16* dqkv, const bf16* dout, const float* lse, const float* Dsum, const bf16* qkv, int T, int NH,
                     int group, DropoutArgs drop, uint32_t thr16) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const int n_m = (T + kTile - 1) / kTile;
  int bh, key_tile;  // causal: the first key tile has the most query tiles
  grid_pos(n_m, group, bh, key_tile);
  const int b = bh / NH, h = bh - b * NH;
  const int n0 = key_tile * kTile;             // keys n0 .. n0 + 63
  const int m_first = kCausal ? key_tile : 0;  // query tiles m_first .. n_m - 1
  const int C = NH * kHead;
  const int64_t ld = 3LL * C;
  const bf16* q = qkv + int64_t(b) * T * ld + h * kHead;
  const bf16* k = q + C;
  const bf16* v = q + 2 * C;
  const bf16* dO = dout + int64_t(b) * T * C + h * kHead;
  const float* L = lse + int64_t(bh) * T;
  const float* Dr = Dsum + int64_t(bh) * T;
  // Layout: K, V, then stage s: Q at 2 + 2s, dO at 3 + 2s (in 8 KB tiles), then stage s: lse, D (256 B each).
  constexpr int kVecOff = (2 + 2 * kStages) * kTileBytes;
  const uint32_t sK = smem_u32(smem), sV = sK + kTileBytes, sQ0 = sK + 2 * kTileBytes, sVec0 = sK + kVecOff;
  const float* vec = reinterpret_cast<const float*>(smem + kVecOff);

  auto load_stage = [&](int m, int st) {
    load_rows<kTile>(sQ0 + 2 * st * kTileBytes, q, ld, m * kTile, T, tid);
    load_rows<kTile>(sQ0 + (2 * st + 1) * kTileBytes, dO, C, m * kTile, T, tid);
    load_vec(sVec0 + st * 512, L, m * kTile, T, tid, 0, kTile);
    load_vec(sVec0 + st * 512 + 256, Dr, m * kTile, T, tid, kTile, kTile);
  };
  load_rows<kTile>(sK, k, ld, n0, T, tid);
  load_rows<kTile>(sV, v, ld, n0, T, tid);
  load_stage(m_first, 0);
  cp_async_commit();
  if (m_first + 1 < n_m) load_stage(m_first + 1, 1);
  cp_async_commit();
  cp_async_wait<1>();
  __syncthreads();

  const int kw = n0 + warp * 16;  // this warp's first key
  uint32_t kf[4][4], vf[4][4];    // K and V fragments of the warp's keys, kept in registers
#pragma unroll
  for (int kk = 0; kk < 4; kk++) {
    ldsm_x4(kf[kk], addr_a(sK, warp * 16, kk, lane));
    ldsm_x4(vf[kk], addr_a(sV, warp * 16, kk, lane));
  }
  float dk[8][4] = {}, dv[8][4] = {};
  uint64_t key = 0;  // dropout (see drop_bits_kv)
  uint32_t own_pair = 0, perm = 0, row_base = 0;
  if constexpr (kDrop) {
    key = dropout_site_key(drop.seed, *drop.counter, drop.site);
    own_pair = uint32_t((kw >> 1) + (g >> 1) + 4 * (g & 1));
    perm = g & 1 ? 0x3276u : 0x5410u;  // even g: low halves of (own, other); odd g: high halves of (other, own)
    row_base = uint32_t(bh) * uint32_t(T) + uint32_t(8 * g + 2 * t4);
  }

  for (int i = 0, st = 0; m_first + i < n_m; i++, st = st == kStages - 1 ? 0 : st + 1) {
    if (i > 0) {
      cp_async_wait<1>();  // query tile i has landed ...
      __syncthreads();     // ... for every thread, and every warp is done with tile i - 1
    }
    if (m_first + i + 2 < n_m) load_stage(m_first + i + 2, st == 0 ? kStages - 1 : st - 1);  // tile i - 1's stage
    cp_async_commit();
    const int m0 = (m_first + i) * kTile;
    const uint32_t sQ = sQ0 + 2 * st * kTileBytes, sdO = sQ + kTileBytes;
    const float* sL = vec + st * 128;
    const float* sD = sL + 64;

    // S^T = K Q^T (16 keys x 64 queries), then P^T = exp(S^T / 8 - lse[query]) as bf16 A fragments.
    float s[8][4] = {};
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
#pragma unroll
      for (int np = 0; np < 4; np++) {
        uint32_t bq[4];
        ldsm_x4(bq, addr_b_nk(sQ, np * 16, kk, lane));
        mma(s[2 * np], kf[kk], bq[0], bq[1]);
        mma(s[2 * np + 1], kf[kk], bq[2], bq[3]);
      }
    const bool mask = (kCausal && m0 < kw + 16) || m0 + kTile > T;  // the diagonal tile, or rows past T
    uint32_t rh_mine[2];                                            // dropout: see drop_bits_kv
    if constexpr (kDrop)
#pragma unroll
      for (int par = 0; par < 2; par++) rh_mine[par] = dropout_row(key, row_base + uint32_t(m0 + par));
    uint32_t pa[4][4];  // [k-step over queries][A register]; with dropout, dropped P negated
#pragma unroll
    for (int nt = 0; nt < 8; nt++) {
      const float2 l2 = *reinterpret_cast<const float2*>(sL + nt * 8 + 2 * t4);
      float p[4];
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int qi = m0 + nt * 8 + 2 * t4 + (e & 1), kj = kw + g + 8 * (e >> 1);
        const float x = mask && ((kCausal && qi < kj) || qi >= T) ? -INFINITY : s[nt][e];
        p[e] = ex2(fmaf(x, kScaleLog2, -(e & 1 ? l2.y : l2.x) * kLog2e));
      }
      if constexpr (kDrop) {
#pragma unroll
        for (int par = 0; par < 2; par++) {
          const uint32_t bits = drop_bits_kv(rh_mine[par], nt, t4, own_pair, perm);
          p[par] = keep_lo(bits, thr16) ? p[par] : -p[par];
          p[par + 2] = keep_hi(bits, thr16) ? p[par + 2] : -p[par + 2];
        }
      }
      pa[nt >> 1][2 * (nt & 1)] = pack_bf16(p[0], p[1]);
      pa[nt >> 1][2 * (nt & 1) + 1] = pack_bf16(p[2], p[3]);
    }
    // dV += P^T dO (with dropout max(P^T, 0) = keep * P^T, the scale applied at the end)
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
      uint32_t pk[4];
#pragma unroll
      for (int r = 0; r < 4; r++) pk[r] = kDrop ? max0_bf16x2(pa[kk][r]) : pa[kk][r];
#pragma unroll
      for (int dp = 0; dp < 4; dp++) {
        uint32_t bo[4];
        ldsm_x4_t(bo, addr_b_kn(sdO, kk * 16, dp, lane));
        mma(dv[2 * dp], pk, bo[0], bo[1]);
        mma(dv[2 * dp + 1], pk, bo[2], bo[3]);
      }
    }
    // dP^T = V dO^T, then dS^T = P^T (Z dP^T - D[query]), overwriting the P^T fragments.
    float dpt[8][4] = {};
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
#pragma unroll
      for (int np = 0; np < 4; np++) {
        uint32_t bo[4];
        ldsm_x4(bo, addr_b_nk(sdO, np * 16, kk, lane));
        mma(dpt[2 * np], vf[kk], bo[0], bo[1]);
        mma(dpt[2 * np + 1], vf[kk], bo[2], bo[3]);
      }
#pragma unroll
    for (int nt = 0; nt < 8; nt++) {
      const float2 d2 = *reinterpret_cast<const float2*>(sD + nt * 8 + 2 * t4);
#pragma unroll
      for (int hf = 0; hf < 2; hf++) {
        uint32_t& r = pa[nt >> 1][2 * (nt & 1) + hf];
        if constexpr (kDrop) {  // P = |p|, kept iff p >= 0
          const float p0 = bf16_lo(r), p1 = bf16_hi(r);
          r = pack_bf16(fabsf(p0) * fmaf(p0 >= 0.0f ? drop.scale : 0.0f, dpt[nt][2 * hf], -d2.x),
                        fabsf(p1) * fmaf(p1 >= 0.0f ? drop.scale : 0.0f, dpt[nt][2 * hf + 1], -d2.y));
        } else {
          r = pack_bf16(bf16_lo(r) * (dpt[nt][2 * hf] - d2.x), bf16_hi(r) * (dpt[nt][2 * hf + 1] - d2.y));
        }
      }
    }
    // dK += dS^T Q (scaled by 1/8 at the end)
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
#pragma unroll
      for (int dp = 0; dp < 4; dp++) {
        uint32_t bq[4];
        ldsm_x4_t(bq, addr_b_kn(sQ, kk * 16, dp, lane));
        mma(dk[2 * dp], pa[kk], bq[0], bq[1]);
        mma(dk[2 * dp + 1], pa[kk], bq[2], bq[3]);
      }
  }

  // Stage through this warp's own rows of the K and V tiles, then 16-byte stores.
  const float scale[2] = {0.125f, 0.125f}, dv_scale[2] = {kDrop ? drop.scale : 1.0f, kDrop ? drop.scale : 1.0f};
  stage_acc(smem, warp * 16, dk, scale, lane);
  stage_acc(smem + kTileBytes, warp * 16, dv, dv_scale, lane);
  __syncwarp();
  bf16* dqkv_b = dqkv + int64_t(b) * T * ld + h * kHead;
  store_rows<16>(dqkv_b + C, ld, kw, T, smem, warp * 16, lane);
  store_rows<16>(dqkv_b + 2 * C, ld, kw, T, smem + kTileBytes, warp * 16, lane);
}

// dQ for one 64-query tile, looping over the key tiles up to its diagonal (causal) or over all of them.
// Warp w owns query rows m0 + 16w .. +15.
template <bool kDrop, bool kCausal>
__global__ void __launch_bounds__(kThreads, 3)
    flash_bwd_dq_k(bf16* dqkv, const bf16* dout, const float* lse, const float* Dsum, const bf16* qkv, int T, int NH,
                   int group, DropoutArgs drop, uint32_t thr16) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const int n_qt = (T + kTile - 1) / kTile;
  int bh, rank;
  grid_pos(n_qt, group, bh, rank);
  const int b = bh / NH, h = bh - b * NH;
  const int m0 = (n_qt - 1 - rank) * kTile;  // the last query tile has the most key tiles
  const int C = NH * kHead;
  const int64_t ld = 3LL * C;
  const bf16* q = qkv + int64_t(b) * T * ld + h * kHead;
  const bf16* k = q + C;
  const bf16* v = q + 2 * C;
  const bf16* dO = dout + int64_t(b) * T * C + h * kHead;
  // Layout: Q, dO, then stage s: K at 2 + 2s, V at 3 + 2s (8 KB tiles).
  const uint32_t sQ = smem_u32(smem), sdO = sQ + kTileBytes, sKV0 = sQ + 2 * kTileBytes;
  const int n_kv = kCausal ? m0 / kTile + 1 : (T + kTile - 1) / kTile;  // key tiles 0 .. the diagonal one, or all

  auto load_kv = [&](int j, int st) {
    load_rows<kTile>(sKV0 + 2 * st * kTileBytes, k, ld, j * kTile, T, tid);
    load_rows<kTile>(sKV0 + (2 * st + 1) * kTileBytes, v, ld, j * kTile, T, tid);
  };
  load_rows<kTile>(sQ, q, ld, m0, T, tid);
  load_rows<kTile>(sdO, dO, C, m0, T, tid);
  load_kv(0, 0);
  cp_async_commit();
  if (n_kv > 1) load_kv(1, 1);
  cp_async_commit();

  const int rw = m0 + warp * 16;  // this warp's first query row
  float lse2[2], Drow[2];         // per row half: lse in log2 units, D
#pragma unroll
  for (int hf = 0; hf < 2; hf++) {
    const int row = rw + g + 8 * hf;
    lse2[hf] = row < T ? lse[int64_t(bh) * T + row] * kLog2e : 0.0f;
    Drow[hf] = row < T ? Dsum[int64_t(bh) * T + row] : 0.0f;
  }
  uint32_t rh[2] = {};  // dropout: the hashes of this thread's rows
  if constexpr (kDrop) {
    const uint64_t key = dropout_site_key(drop.seed, *drop.counter, drop.site);
#pragma unroll
    for (int hf = 0; hf < 2; hf++) rh[hf] = dropout_row(key, uint32_t(bh) * uint32_t(T) + uint32_t(rw + g + 8 * hf));
  }
  cp_async_wait<1>();
  __syncthreads();
  // Q fragments stay in registers; dO's are re-read per key tile (4 of 52 ldmatrix) to stay in 168 registers.
  uint32_t qf[4][4];
#pragma unroll
  for (int kk = 0; kk < 4; kk++) ldsm_x4(qf[kk], addr_a(sQ, warp * 16, kk, lane));
  float dq[8][4] = {};

  for (int j = 0, st = 0; j < n_kv; j++, st = st == kStages - 1 ? 0 : st + 1) {
    if (j > 0) {
      cp_async_wait<1>();  // key tile j has landed ...
      __syncthreads();     // ... for every thread, and every warp is done with tile j - 1
    }
    if (j + 2 < n_kv) load_kv(j + 2, st == 0 ? kStages - 1 : st - 1);  // into tile j - 1's stage
    cp_async_commit();
    const int n0 = j * kTile;
    const uint32_t sK = sKV0 + 2 * st * kTileBytes, sV = sK + kTileBytes;
    // S = Q K^T and P = exp(S / 8 - lse) in place.
    float s[8][4] = {};
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
#pragma unroll
      for (int np = 0; np < 4; np++) {
        uint32_t bk[4];
        ldsm_x4(bk, addr_b_nk(sK, np * 16, kk, lane));
        mma(s[2 * np], qf[kk], bk[0], bk[1]);
        mma(s[2 * np + 1], qf[kk], bk[2], bk[3]);
      }
    const bool mask = kCausal ? n0 + kTile - 1 > rw : n0 + kTile > T;  // the diagonal tile, or keys past T
#pragma unroll
    for (int nt = 0; nt < 8; nt++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int key = n0 + nt * 8 + 2 * t4 + (e & 1);
        const float x = mask && (kCausal ? key > rw + g + 8 * (e >> 1) : key >= T) ? -INFINITY : s[nt][e];
        s[nt][e] = ex2(fmaf(x, kScaleLog2, -lse2[e >> 1]));
      }
    // dP = dO V^T
    float dp[8][4] = {};
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
      uint32_t of[4];
      ldsm_x4(of, addr_a(sdO, warp * 16, kk, lane));
#pragma unroll
      for (int np = 0; np < 4; np++) {
        uint32_t bv[4];
        ldsm_x4(bv, addr_b_nk(sV, np * 16, kk, lane));
        mma(dp[2 * np], of, bv[0], bv[1]);
        mma(dp[2 * np + 1], of, bv[2], bv[3]);
      }
    }
    if constexpr (kDrop) {  // dP = Z dP (here rather than in the dS loop: that spilled)
#pragma unroll
      for (int nt = 0; nt < 8; nt++)
#pragma unroll
        for (int hf = 0; hf < 2; hf++) {
          const uint32_t bits = dropout_pair_bits(rh[hf], (n0 >> 1) + nt * 4 + t4);
          dp[nt][2 * hf] = keep_lo(bits, thr16) ? dp[nt][2 * hf] * drop.scale : 0.0f;
          dp[nt][2 * hf + 1] = keep_hi(bits, thr16) ? dp[nt][2 * hf + 1] * drop.scale : 0.0f;
        }
    }
    // dS = P (Z dP - D) as bf16 A fragments (k = key), then dQ += dS K.
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
      uint32_t da[4];
#pragma unroll
      for (int r = 0; r < 4; r++) {
        const int nt = 2 * kk + (r >> 1), hf = r & 1;
        da[r] =
            pack_bf16(s[nt][2 * hf] * (dp[nt][2 * hf] - Drow[hf]), s[nt][2 * hf + 1] * (dp[nt][2 * hf + 1] - Drow[hf]));
      }
#pragma unroll
      for (int dn = 0; dn < 4; dn++) {
        uint32_t bk[4];
        ldsm_x4_t(bk, addr_b_kn(sK, kk * 16, dn, lane));
        mma(dq[2 * dn], da, bk[0], bk[1]);
        mma(dq[2 * dn + 1], da, bk[2], bk[3]);
      }
    }
  }

  const float scale[2] = {0.125f, 0.125f};
  stage_acc(smem, warp * 16, dq, scale, lane);  // this warp's own rows of the Q tile
  __syncwarp();
  store_rows<16>(dqkv + int64_t(b) * T * ld + h * kHead, ld, rw, T, smem, warp * 16, lane);
}

void check_shape(const char* who, int B, int T, int NH) {
  if (B < 1 || T < 1 || NH < 1)
    user_error(who, ": B, T and NH must all be at least 1 (got B=", B, ", T=", T, ", NH=", NH, ").");
  if (int64_t(B) * NH * ((T + kTile - 1) / kTile) > 0x7fffffff)  // one CTA per (batch, head, 64-row tile)
    user_error(who, ": shape B=", B, ", T=", T, ", NH=", NH, " is too large for the attention kernels' grid.");
}
void check_aligned(const char* who, const void* p, const char* name, unsigned align) {
  if (reinterpret_cast<uintptr_t>(p) % align != 0)
    user_error(who, ": ", name, " must be ", align, "-byte aligned (cudaMalloc'd buffers are).");
}
// Heads per grid_pos group: at most as many as keep the 256 bytes per row (K and V, or Q and dO) that a
// head's CTAs share within about 16 MB of L2, and groups of equal size (a small last group would run its
// long tiles alone at the end).
int heads_per_group(int B, int T, int NH) {
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
void check_dropout(const char* who, const DropoutArgs& d) {
  if (!d.on()) return;
  if (d.counter == nullptr) user_error(who, ": dropout needs its device counter.");
  if (d.threshold >= 65536u) user_error(who, ": dropout threshold must be below 65536 (got ", d.threshold, ").");
}
}  // namespace

void flash_attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, bool causal, cudaStream_t s,
                             const DropoutArgs& drop) {
  const char* who = "flash_attention_forward";
  check_shape(who, B, T, NH);
  check_aligned(who, out, "out", 16);
  check_aligned(who, qkv, "qkv", 16);
  check_aligned(who, lse, "lse", 4);
  check_dropout(who, drop);
  const auto kernel = drop.on() ? (causal ? flash_fwd_k<true, true> : flash_fwd_k<true, false>)
                                : (causal ? flash_fwd_k<false, true> : flash_fwd_k<false, false>);
  set_smem(kernel, kFwdSmem);
  const unsigned grid = unsigned(B * NH * ((T + kFwdRows - 1) / kFwdRows));
  kernel<<<grid, kThreads, kFwdSmem, s>>>(out, lse, qkv, T, NH, heads_per_group(B, T, NH), drop, drop.threshold << 16);
  CUDA_CHECK_LAUNCH();
}

void flash_attention_backward(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                              float* scratch, int B, int T, int NH, bool causal, cudaStream_t s,
                              const DropoutArgs& drop) {
  const char* who = "flash_attention_backward";
  check_shape(who, B, T, NH);
  check_aligned(who, dqkv, "dqkv", 16);
  check_aligned(who, dout, "dout", 16);
  check_aligned(who, out, "out", 16);
  check_aligned(who, qkv, "qkv", 16);
  check_aligned(who, lse, "lse", 4);
  check_aligned(who, scratch, "scratch", 4);
  check_dropout(who, drop);
  const int64_t lanes = int64_t(B) * T * NH * 8;
  flash_bwd_dsum_k<<<unsigned((lanes + 255) / 256), 256, 0, s>>>(scratch, dout, out, B, T, NH);
  CUDA_CHECK_LAUNCH();
  const uint32_t thr16 = drop.threshold << 16;  // see keep_lo
  const auto dkdv = drop.on() ? (causal ? flash_bwd_dkdv_k<true, true> : flash_bwd_dkdv_k<true, false>)
                              : (causal ? flash_bwd_dkdv_k<false, true> : flash_bwd_dkdv_k<false, false>);
  const auto dq = drop.on() ? (causal ? flash_bwd_dq_k<true, true> : flash_bwd_dq_k<true, false>)
                            : (causal ? flash_bwd_dq_k<false, true> : flash_bwd_dq_k<false, false>);
  set_smem(dkdv, kBwdSmem);
  set_smem(dq, kBwdSmem);
  const unsigned grid = unsigned(B * NH * ((T + kTile - 1) / kTile));
  const int group = heads_per_group(B, T, NH);
  dkdv<<<grid, kThreads, kBwdSmem, s>>>(dqkv, dout, lse, scratch, qkv, T, NH, group, drop, thr16);
  CUDA_CHECK_LAUNCH();
  dq<<<grid, kThreads, kBwdSmem, s>>>(dqkv, dout, lse, scratch, qkv, T, NH, group, drop, thr16);
  CUDA_CHECK_LAUNCH();
}

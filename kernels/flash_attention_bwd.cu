// Flash attention backward, causal (GPT-2) or not (ViT), head size 64 (shared layout and helpers:
// flash_attention.cuh). With P = exp(S - lse) recomputed from the forward's lse and D = rowsum(dO * O):
//   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - D),  dQ = dS K / 8,  dK = dS^T Q / 8.
// Two kernels and no atomics, so results are bit-reproducible: one per 64-key tile walks the query
// tiles at and after its diagonal and owns dK, dV; the other per 64-query tile walks the key tiles up
// to its diagonal and owns dQ. S and dP are thus computed twice (7 matrix products instead of 5).
//
// Dropout (Z = keep * scale): P, lse and D stay those of the undropped scores; dV = (Z * P)^T dO and
// dS = P * (Z * dP - D). The dQ kernel holds adjacent key pairs and hashes each pair once; the dK/dV
// kernel, whose lanes hold keys g and g + 8 of a query, shares row and pair hashes between lanes by
// shuffles (see drop_bits_kv). The dK/dV kernel flips the sign of dropped P (P >= 0), so that max(P, 0)
// is the mask for dV (scaled at the end) and |P| the P of dS.
#include "kernels/flash_attention.cuh"
#include "kernels/flash_attention_sm90.h"

using namespace flash;

namespace {
// Shared memory of both backward kernels: two fixed 64-row tiles, kStages stages of two streamed 64-row
// tiles, and kStages stages of two 64-float vectors (lse, D; dK/dV kernel only).
constexpr int kBwdSmem = (2 + 2 * kStages) * kTileBytes + kStages * 2 * kTile * 4;

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

// The dK/dV kernel's dropout bits of query m0 + 8 nt + 2 t4 + par (lane = 4 g + t4) at keys kw + g (low
// half) and kw + g + 8 (high half). rh_mine: the row hash of query m0 + 8 g + 2 t4 + par, which lane
// 4 nt + t4 hands on. Lanes g and g ^ 1 need the same two pairs of columns, (kw + g) / 2 and that + 4, so
// each hashes one (own_pair: the first for even g, the second for odd g), they swap, and perm picks the
// halves.
__device__ __forceinline__ uint32_t drop_bits_kv(uint32_t rh_mine, int nt, int t4, uint32_t own_pair, uint32_t perm) {
  const uint32_t rh = __shfl_sync(0xffffffffu, rh_mine, 4 * nt + t4);
  const uint32_t a = dropout_pair_bits(rh, own_pair);
  const uint32_t b = __shfl_xor_sync(0xffffffffu, a, 4);  // lane g ^ 1's
  return __byte_perm(a, b, perm);
}

// dK, dV for one 64-key tile, looping over the query tiles at and after it (causal) or over all of them.
// Warp w owns keys n0 + 16w .. +15 and works on the transposed products: S^T = K Q^T, dP^T = V dO^T (keys
// as rows), so that the K and V fragments stay in registers and the dK, dV accumulators never leave the warp.
// One function of ~170 lines, its steps marked by comments: ptxas's output follows the compiler's value
// numbering, and moving the loop body into helper functions changes the machine code (it did, checked with
// scripts/compare_kernels.sh); the kernel keeps the instructions that were measured on the H100.
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
        p[e] = ex2_approx(fmaf(x, kScaleLog2, -(e & 1 ? l2.y : l2.x) * kLog2e));
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
// Warp w owns query rows m0 + 16w .. +15. One function, as flash_bwd_dkdv_k and for the same reason.
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
  dq_row_stats(lse, Dsum, bh, T, rw + g, lse2, Drow);
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
        s[nt][e] = ex2_approx(fmaf(x, kScaleLog2, -lse2[e >> 1]));
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
}  // namespace

namespace {
// The argument checks and D = rowsum(dout * out) into scratch, which both backward paths start with.
void backward_prologue(const bf16* dqkv, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                       float* scratch, int B, int T, int NH, cudaStream_t s, const DropoutArgs& drop) {
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
}
}  // namespace

void flash_attention_backward(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                              float* scratch, int B, int T, int NH, bool causal, cudaStream_t s,
                              const DropoutArgs& drop) {
  if (drop.on() || !flash_attention_sm90_available())
    return flash_attention_backward_mma(dqkv, dout, out, lse, qkv, scratch, B, T, NH, causal, s, drop);
  backward_prologue(dqkv, dout, out, lse, qkv, scratch, B, T, NH, s, drop);
  flash_attention_backward_sm90(dqkv, scratch, dout, lse, qkv, B, T, NH, causal, s);
}

void flash_attention_backward_mma(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                                  float* scratch, int B, int T, int NH, bool causal, cudaStream_t s,
                                  const DropoutArgs& drop) {
  backward_prologue(dqkv, dout, out, lse, qkv, scratch, B, T, NH, s, drop);
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

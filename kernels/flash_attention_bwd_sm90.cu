// Flash attention backward on Hopper's warpgroup MMA (wgmma), causal or not, head size 64, no dropout:
// flash_attention_bwd.cu's two kernels (dK/dV per 64-key tile, dQ per 64-query tile, no atomics) with the
// same arithmetic in the same order, so the two give the same bits, and each CTA one warpgroup (4 warps, warp
// w owning rows 16w .. 16w + 15 of the tile, as there). The operands that mma.sync read from shared memory
// through ldmatrix (or kept in registers) are read by the wgmma from shared memory; the intermediate
// products (P, dS) stay in registers as the A operand of the next product (kernels/wgmma.cuh):
//   dK/dV: S^T = K Q^T, P^T; dV += P^T dO and dP^T = V dO^T together; dS^T; dK += dS^T Q.
//   dQ:    S = Q K^T and dP = dO V^T together; P, dS; dQ += dS K.
// Each tile's products are waited for before its stage of shared memory can be reloaded (three stages,
// loads two tiles ahead, as in flash_attention_bwd.cu); other CTAs on the SM fill the gaps.
#include "kernels/flash_attention.cuh"
#include "kernels/flash_attention_sm90.h"
#include "kernels/wgmma.cuh"

using namespace flash;

namespace {
// Two fixed tiles, kStages stages of two streamed tiles, kStages stages of two 64-float vectors (lse, D;
// dK/dV kernel), and 1 KB to start the tiles on a 1024-byte boundary (the swizzle's period).
constexpr int kVecOff = (2 + 2 * kStages) * kTileBytes;
constexpr int kSmem90 = 1024 + kVecOff + kStages * 2 * kTile * 4;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// P^T = exp(S^T / 8 - lse[query]) as bf16 A fragments (k = query), keys kw + g (+ 8) of this thread.
template <bool kCausal>
__device__ __forceinline__ void p_transposed(uint32_t (&pa)[4][4], const float (&s)[8][4], const float* sL, int m0,
                                             int kw, int T, int lane) {
  const int g = lane >> 2, t4 = lane & 3;
  const bool mask = (kCausal && m0 < kw + 16) || m0 + kTile > T;  // the diagonal tile, or rows past T
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
    pa[nt >> 1][2 * (nt & 1)] = pack_bf16(p[0], p[1]);
    pa[nt >> 1][2 * (nt & 1) + 1] = pack_bf16(p[2], p[3]);
  }
}
// dS^T = P^T (dP^T - D[query]), in place of P^T.
__device__ __forceinline__ void ds_transposed(uint32_t (&pa)[4][4], const float (&dpt)[8][4], const float* sD,
                                              int lane) {
  const int t4 = lane & 3;
#pragma unroll
  for (int nt = 0; nt < 8; nt++) {
    const float2 d2 = *reinterpret_cast<const float2*>(sD + nt * 8 + 2 * t4);
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
      uint32_t& r = pa[nt >> 1][2 * (nt & 1) + hf];
      r = pack_bf16(bf16_lo(r) * (dpt[nt][2 * hf] - d2.x), bf16_hi(r) * (dpt[nt][2 * hf + 1] - d2.y));
    }
  }
}
#endif

// dK, dV for one 64-key tile, over the query tiles at and after it (causal) or all of them.
template <bool kCausal>
__global__ void __launch_bounds__(kThreads, 2)
    flash_bwd_dkdv_sm90_k(bf16* dqkv, const bf16* dout, const float* lse, const float* Dsum, const bf16* qkv, int T,
                          int NH, int group) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* smem = wgmma::align1024(smem_raw);
  const int tid = threadIdx.x, lane = tid & 31, warp = __shfl_sync(0xffffffffu, tid >> 5, 0);
  const int n_m = (T + kTile - 1) / kTile;
  int bh, key_tile;
  grid_pos(n_m, group, bh, key_tile);
  const int b = bh / NH, h = bh - b * NH, C = NH * kHead;
  const int n0 = key_tile * kTile, m_first = kCausal ? key_tile : 0;
  const int64_t ld = 3LL * C;
  const bf16* q = qkv + int64_t(b) * T * ld + h * kHead;
  const bf16* dO = dout + int64_t(b) * T * C + h * kHead;
  const float* L = lse + int64_t(bh) * T;
  const float* Dr = Dsum + int64_t(bh) * T;
  // K, V, then stage s: Q at 2 + 2s, dO at 3 + 2s (8 KB tiles), then stage s: lse, D (256 B each).
  const uint32_t sK = smem_u32(smem), sV = sK + kTileBytes, sQ0 = sK + 2 * kTileBytes, sVec0 = sK + kVecOff;
  const float* vec = reinterpret_cast<const float*>(smem + kVecOff);
  auto load_stage = [&](int m, int st) {
    load_rows<kTile>(sQ0 + 2 * st * kTileBytes, q, ld, m * kTile, T, tid);
    load_rows<kTile>(sQ0 + (2 * st + 1) * kTileBytes, dO, C, m * kTile, T, tid);
    load_vec(sVec0 + st * 512, L, m * kTile, T, tid, 0, kTile);
    load_vec(sVec0 + st * 512 + 256, Dr, m * kTile, T, tid, kTile, kTile);
  };
  load_rows<kTile>(sK, q + C, ld, n0, T, tid);
  load_rows<kTile>(sV, q + 2 * C, ld, n0, T, tid);
  load_stage(m_first, 0);
  cp_async_commit();
  if (m_first + 1 < n_m) load_stage(m_first + 1, 1);
  cp_async_commit();

  const int kw = n0 + warp * 16;  // this warp's first key
  float dk[8][4] = {}, dv[8][4] = {}, s[8][4], dpt[8][4];
  uint32_t pa[4][4];
  for (int i = 0, st = 0; m_first + i < n_m; i++, st = st == kStages - 1 ? 0 : st + 1) {
    cp_async_wait<1>();  // query tile i has landed ...
    wgmma::fence_proxy_async();
    __syncthreads();  // ... for every thread, and tile i - 1's products are done with its stage
    if (m_first + i + 2 < n_m) load_stage(m_first + i + 2, st == 0 ? kStages - 1 : st - 1);
    cp_async_commit();
    const int m0 = (m_first + i) * kTile;
    const uint32_t sQ = sQ0 + 2 * st * kTileBytes, sdO = sQ + kTileBytes;
    const float* sL = vec + st * 128;
    wgmma::fence();
    wgmma::tile_ss(wgmma::flat(s), sK, sQ);  // S^T = K Q^T
    wgmma::commit();
    wgmma::wait<0>();
    wgmma::fence_operands(wgmma::flat(s));
    p_transposed<kCausal>(pa, s, sL, m0, kw, T, lane);
    wgmma::fence();
    wgmma::tile_rs(wgmma::flat(dv), pa, sdO);   // dV += P^T dO
    wgmma::tile_ss(wgmma::flat(dpt), sV, sdO);  // dP^T = V dO^T
    wgmma::commit();
    wgmma::wait<0>();
    wgmma::fence_operands(wgmma::flat(dpt));
    ds_transposed(pa, dpt, sL + 64, lane);
    wgmma::fence();
    wgmma::tile_rs(wgmma::flat(dk), pa, sQ);  // dK += dS^T Q
    wgmma::commit();
    wgmma::wait<0>();
  }
  wgmma::fence_operands(wgmma::flat(dk));
  wgmma::fence_operands(wgmma::flat(dv));
  // Stage through this warp's own rows of the K and V tiles (every product that read them is done), then
  // 16-byte stores.
  const float scale[2] = {0.125f, 0.125f}, one[2] = {1.0f, 1.0f};
  stage_acc(smem, warp * 16, dk, scale, lane);
  stage_acc(smem + kTileBytes, warp * 16, dv, one, lane);
  __syncwarp();
  bf16* dqkv_b = dqkv + int64_t(b) * T * ld + h * kHead;
  store_rows<16>(dqkv_b + C, ld, kw, T, smem, warp * 16, lane);
  store_rows<16>(dqkv_b + 2 * C, ld, kw, T, smem + kTileBytes, warp * 16, lane);
#endif
}

// dQ for one 64-query tile, over the key tiles up to its diagonal (causal) or all of them.
template <bool kCausal>
__global__ void __launch_bounds__(kThreads, 3)
    flash_bwd_dq_sm90_k(bf16* dqkv, const bf16* dout, const float* lse, const float* Dsum, const bf16* qkv, int T,
                        int NH, int group) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* smem = wgmma::align1024(smem_raw);
  const int tid = threadIdx.x, lane = tid & 31, warp = __shfl_sync(0xffffffffu, tid >> 5, 0);
  const int g = lane >> 2, t4 = lane & 3;
  const int n_qt = (T + kTile - 1) / kTile;
  int bh, rank;
  grid_pos(n_qt, group, bh, rank);
  const int b = bh / NH, h = bh - b * NH, C = NH * kHead;
  const int m0 = (n_qt - 1 - rank) * kTile;  // the last query tile has the most key tiles
  const int64_t ld = 3LL * C;
  const bf16* q = qkv + int64_t(b) * T * ld + h * kHead;
  const bf16* dO = dout + int64_t(b) * T * C + h * kHead;
  // Q, dO, then stage s: K at 2 + 2s, V at 3 + 2s (8 KB tiles).
  const uint32_t sQ = smem_u32(smem), sdO = sQ + kTileBytes, sKV0 = sQ + 2 * kTileBytes;
  const int n_kv = kCausal ? m0 / kTile + 1 : (T + kTile - 1) / kTile;
  auto load_kv = [&](int j, int st) {
    load_rows<kTile>(sKV0 + 2 * st * kTileBytes, q + C, ld, j * kTile, T, tid);
    load_rows<kTile>(sKV0 + (2 * st + 1) * kTileBytes, q + 2 * C, ld, j * kTile, T, tid);
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
  float dq[8][4] = {}, s[8][4], dp[8][4];
  uint32_t da[4][4];
  for (int j = 0, st = 0; j < n_kv; j++, st = st == kStages - 1 ? 0 : st + 1) {
    cp_async_wait<1>();  // key tile j has landed ...
    wgmma::fence_proxy_async();
    __syncthreads();  // ... for every thread, and tile j - 1's products are done with its stage
    if (j + 2 < n_kv) load_kv(j + 2, st == 0 ? kStages - 1 : st - 1);
    cp_async_commit();
    const int n0 = j * kTile;
    const uint32_t sK = sKV0 + 2 * st * kTileBytes, sV = sK + kTileBytes;
    wgmma::fence();
    wgmma::tile_ss(wgmma::flat(s), sQ, sK);    // S = Q K^T
    wgmma::tile_ss(wgmma::flat(dp), sdO, sV);  // dP = dO V^T
    wgmma::commit();
    wgmma::wait<0>();
    wgmma::fence_operands(wgmma::flat(s));
    wgmma::fence_operands(wgmma::flat(dp));
    const bool mask = kCausal ? n0 + kTile - 1 > rw : n0 + kTile > T;  // the diagonal tile, or keys past T
#pragma unroll
    for (int nt = 0; nt < 8; nt++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int key = n0 + nt * 8 + 2 * t4 + (e & 1);
        const float x = mask && (kCausal ? key > rw + g + 8 * (e >> 1) : key >= T) ? -INFINITY : s[nt][e];
        s[nt][e] = ex2_approx(fmaf(x, kScaleLog2, -lse2[e >> 1]));
      }
#pragma unroll
    for (int kk = 0; kk < 4; kk++)  // dS = P (dP - D) as bf16 A fragments (k = key)
#pragma unroll
      for (int r = 0; r < 4; r++) {
        const int nt = 2 * kk + (r >> 1), hf = r & 1;
        da[kk][r] =
            pack_bf16(s[nt][2 * hf] * (dp[nt][2 * hf] - Drow[hf]), s[nt][2 * hf + 1] * (dp[nt][2 * hf + 1] - Drow[hf]));
      }
    wgmma::fence();
    wgmma::tile_rs(wgmma::flat(dq), da, sK);  // dQ += dS K
    wgmma::commit();
    wgmma::wait<0>();
  }
  wgmma::fence_operands(wgmma::flat(dq));
  const float scale[2] = {0.125f, 0.125f};
  stage_acc(smem, warp * 16, dq, scale, lane);  // this warp's own rows of the Q tile
  __syncwarp();
  store_rows<16>(dqkv + int64_t(b) * T * ld + h * kHead, ld, rw, T, smem, warp * 16, lane);
#endif
}
}  // namespace

void flash_attention_backward_sm90(bf16* dqkv, const float* Dsum, const bf16* dout, const float* lse, const bf16* qkv,
                                   int B, int T, int NH, bool causal, cudaStream_t s) {
  const auto dkdv = causal ? flash_bwd_dkdv_sm90_k<true> : flash_bwd_dkdv_sm90_k<false>;
  const auto dq = causal ? flash_bwd_dq_sm90_k<true> : flash_bwd_dq_sm90_k<false>;
  set_smem(dkdv, kSmem90);
  set_smem(dq, kSmem90);
  const unsigned grid = unsigned(B * NH * ((T + kTile - 1) / kTile));
  const int group = heads_per_group(B, T, NH);
  dkdv<<<grid, kThreads, kSmem90, s>>>(dqkv, dout, lse, Dsum, qkv, T, NH, group);
  CUDA_CHECK_LAUNCH();
  dq<<<grid, kThreads, kSmem90, s>>>(dqkv, dout, lse, Dsum, qkv, T, NH, group);
  CUDA_CHECK_LAUNCH();
}

// Flash attention forward, causal (GPT-2) or not (ViT), head size 64 (shared layout and helpers:
// flash_attention.cuh).
//
// Per (batch, head) and tile of 128 queries: S = Q K^T * 1/8 one 64-key tile at a time, an online softmax
// in fp32 (running row max m and sum l, in log2 units so that exp is one ex2), O += P V with P rounded to
// bf16. Per query row it stores O / l (bf16) and lse = m + log l, which the backward uses to recompute P.
// A query tile reads its Q once and the K/V tiles up to its diagonal, which its head's other CTAs read too
// (from L2, see grid_pos). The work is 2*2*T^2/2*64 FLOPs per head against about 8*T*64 bytes of HBM
// traffic, so the tensor cores and the exp unit (one ex2 per score) bound it, not memory.
//
// Dropout: with Z = keep * scale, O = (Z * P) V, and lse stays that of the undropped scores. The kernel
// holds adjacent key pairs and hashes each pair once; it zeroes dropped P when it packs them to bf16 and
// folds the scale into 1/l.
#include "kernels/flash_attention.cuh"
#include "kernels/flash_attention_sm90.h"

using namespace flash;

namespace {

constexpr int kFwdRows = 128;  // queries per CTA: warp w owns rows 16w..16w+15 and 64+16w..64+16w+15
// Shared memory: Q (128 rows, 16 KB; reused to stage O), then kStages stages of (K, V) tiles (8 KB each).
constexpr int kFwdSmem = kFwdRows * 128 + kStages * 2 * kTileBytes;

// Zeroes the dropped ones of two adjacent columns (lo: the even one) whose random bits are h.
__device__ __forceinline__ void drop_pair(float& lo, float& hi, uint32_t h, uint32_t thr16) {
  lo = keep_lo(h, thr16) ? lo : 0.0f;
  hi = keep_hi(h, thr16) ? hi : 0.0f;
}

// S = Q K^T for m-tiles MT0..1 of a warp and one key tile; scores of keys after the row (causal) or past T
// become -inf.
template <int MT0, bool kCausal>
__device__ __forceinline__ void fwd_scores(float (&s)[2][8][4], const uint32_t (&qf)[2][4][4], uint32_t sK, int n0,
                                           int r0, int T, int lane) {
  const int g = lane >> 2, t4 = lane & 3;
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
}

// Online softmax of one key tile's scores: the row maxima grow to include them (O and the row sums are
// rescaled by exp(old max - new max) when one did), then s becomes p = exp(s / 8 - max), added to the
// row sums. A row's 64 scores sit in the 4 lanes of a quad; maxima and sums are taken as trees.
template <int MT0>
__device__ __forceinline__ void fwd_softmax(float (&s)[2][8][4], float (&o)[2][8][4], float (&row_max)[2][2],
                                            float (&row_sum)[2][2]) {
  float corr[2][2];
  bool grew = false;  // did any row max of this warp grow (then O and the sums need rescaling)?
#pragma unroll
  for (int mt = MT0; mt < 2; mt++)
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
      const float m_new = fmaxf(row_max[mt][hf], quad_row_max(s[mt], hf) * kScaleLog2);
      grew |= m_new > row_max[mt][hf];
      corr[mt][hf] = ex2_approx(row_max[mt][hf] - (m_new == -INFINITY ? 0.0f : m_new));
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
        const float p0 = ex2_approx(fmaf(s[mt][nt][2 * hf], kScaleLog2, -m_use));
        const float p1 = ex2_approx(fmaf(s[mt][nt][2 * hf + 1], kScaleLog2, -m_use));
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
}

// O += P V: P's accumulator layout is already the A-fragment layout (two n-tiles per k-step). kDrop: rh
// holds the rows' dropout hashes; dropped p are zeroed here, after the row sums (the scale: at the end).
template <int MT0, bool kDrop>
__device__ __forceinline__ void fwd_pv(float (&o)[2][8][4], float (&s)[2][8][4], uint32_t sV, int n0, int lane,
                                       const uint32_t (&rh)[2][2], uint32_t thr16) {
  const int t4 = lane & 3;
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

// One key tile for m-tiles MT0..1 of a warp (m-tile mt holds rows r0 + 64 mt .. +15): S = Q K^T, online
// softmax, O += P V. MT0 = 1 when the key tile lies wholly after m-tile 0 (the CTA's last key tile).
template <int MT0, bool kDrop, bool kCausal>
__device__ __forceinline__ void fwd_tile(float (&o)[2][8][4], float (&row_max)[2][2], float (&row_sum)[2][2],
                                         const uint32_t (&qf)[2][4][4], uint32_t sK, uint32_t sV, int n0, int r0, int T,
                                         int lane, const uint32_t (&rh)[2][2], uint32_t thr16) {
  float s[2][8][4] = {};
  fwd_scores<MT0, kCausal>(s, qf, sK, n0, r0, T, lane);
  fwd_softmax<MT0>(s, o, row_max, row_sum);
  fwd_pv<MT0, kDrop>(o, s, sV, n0, lane, rh, thr16);
}

// Normalises O by the row sums (and the dropout scale), writes lse = (max + log2 l) ln 2, and stores O as
// bf16, staged through this warp's own rows of the Q tile for 16-byte stores.
template <bool kDrop>
__device__ __forceinline__ void fwd_store(bf16* out, float* lse, uint8_t* smem, const float (&o)[2][8][4],
                                          const float (&row_max)[2][2], const float (&row_sum)[2][2], int bh, int b,
                                          int h, int r0, int T, int C, int warp, int lane, int g, int t4,
                                          float drop_scale) {
#pragma unroll
  for (int mt = 0; mt < 2; mt++) {
    float inv[2];
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
      float l = row_sum[mt][hf];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      inv[hf] = kDrop ? drop_scale / l : 1.0f / l;  // kept p carry the dropout scale
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

  fwd_store<kDrop>(out, lse, smem, o, row_max, row_sum, bh, b, h, r0, T, C, warp, lane, g, t4, drop.scale);
}
}  // namespace

void flash_attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, bool causal, cudaStream_t s,
                             const DropoutArgs& drop) {
  if (!drop.on() && flash_attention_sm90_available())
    return flash_attention_forward_sm90(out, lse, qkv, B, T, NH, causal, s);
  flash_attention_forward_mma(out, lse, qkv, B, T, NH, causal, s, drop);
}

void flash_attention_forward_mma(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, bool causal,
                                 cudaStream_t s, const DropoutArgs& drop) {
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

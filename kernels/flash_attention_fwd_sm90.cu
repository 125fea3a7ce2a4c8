// Flash attention forward on Hopper's warpgroup MMA (wgmma), causal or not, head size 64, no dropout: the
// same contract and the same arithmetic as flash_attention_fwd.cu (scores in fp32, an online softmax in log2
// units, P rounded to bf16 for P V), with the products issued by two warpgroups of 64 query rows each.
//
// Why it is faster than mma.sync: a wgmma reads its B operand (K, V) straight from shared memory for all 64
// rows of a warpgroup, so no ldmatrix traffic per warp, and it runs asynchronously: each warpgroup issues
// S_j = Q K_j^T and O += P_{j-1} V_{j-1} back to back and does the softmax of S_j while P_{j-1} V_{j-1} is
// still on the tensor cores.
//
// Tiles: 128 queries per CTA (warpgroup w: rows 64w .. 64w + 63), 64 keys per tile, loaded by cp.async
// into flash_attention.cuh's swizzled layout (the hardware's 128-byte swizzle, kernels/wgmma.cuh) two tiles
// ahead, four stages: tile j + 2 goes where tile j - 2 was, whose V the P V of iteration j - 1 has finished
// reading before the barrier of iteration j.
#include "kernels/flash_attention.cuh"
#include "kernels/flash_attention_sm90.h"
#include "kernels/wgmma.cuh"

using namespace flash;

namespace {
constexpr int kRows = 128, kGroupThreads = 128, kCtaThreads = 256, kSm90Stages = 4;
// Shared memory: Q (128 rows, 16 KB; reused to stage O), then 4 stages of (K, V) tiles, plus 1 KB of slack
// to start them on a 1024-byte boundary (the swizzle's period).
constexpr int kSmem = 1024 + kRows * 128 + kSm90Stages * 2 * kTileBytes;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// ROWS head rows from row r0 of a row-major matrix (row stride ld) into a swizzled tile, by all 256 threads.
template <int ROWS>
__device__ __forceinline__ void load_rows_cta(uint32_t tile, const bf16* g, int64_t ld, int r0, int T, int tid) {
  static_assert(ROWS % (kCtaThreads / 8) == 0, "whole rows per pass");
  const int c = tid & 7;
#pragma unroll
  for (int i = 0; i < ROWS / (kCtaThreads / 8); i++) {
    const int r = (tid >> 3) + i * (kCtaThreads / 8);
    const bool ok = r0 + r < T;
    cp_async16(tile + swz(r, c), g + (ok ? int64_t(r0 + r) * ld : 0) + c * 8, ok);
  }
}

// Per thread: rows row0 + g and row0 + g + 8 (hf = 0, 1) of the warpgroup's 64, columns of s[nt][2 hf + e].
struct Rows {
  float max[2] = {-INFINITY, -INFINITY};  // in scaled log2 units
  float sum[2] = {0.0f, 0.0f};            // this lane's part; the quad is summed at the end
};

// Hides the scores of keys after the row (causal) or at or past T; n0 the tile's first key, row0 this
// thread's row g.
template <bool kCausal>
__device__ __forceinline__ void mask(float (&s)[8][4], int n0, int row0, int T, int t4) {
#pragma unroll
  for (int nt = 0; nt < 8; nt++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int key = n0 + nt * 8 + 2 * t4 + (e & 1);
      if (kCausal ? key > row0 + 8 * (e >> 1) : key >= T) s[nt][e] = -INFINITY;
    }
}

// Online softmax of one tile's scores in flash_attention_fwd.cu's order of operations, so that the two
// kernels give the same bits: the row maxima grow (a tree of fmaxf over the thread's 16 scores, then the
// quad), corr[hf] = exp2(old max - new max) is what O and the row sums are multiplied by (the sums here when
// any row of the warp grew; otherwise every factor is exactly 1), then s becomes p = exp2(s / 8 log2 e - max)
// and each row's p are summed as a tree. Returns whether any row of the warp grew.
__device__ __forceinline__ bool softmax(float (&s)[8][4], Rows& r, float (&corr)[2]) {
  bool grew = false;
#pragma unroll
  for (int hf = 0; hf < 2; hf++) {
    const float m_new = fmaxf(r.max[hf], quad_row_max(s, hf) * kScaleLog2);
    grew |= m_new > r.max[hf];
    corr[hf] = ex2_approx(r.max[hf] - (m_new == -INFINITY ? 0.0f : m_new));
    r.max[hf] = m_new;
  }
  const bool any = __any_sync(0xffffffffu, grew);
  if (any)
#pragma unroll
    for (int hf = 0; hf < 2; hf++) r.sum[hf] *= corr[hf];
#pragma unroll
  for (int hf = 0; hf < 2; hf++) {
    const float m_use = r.max[hf] == -INFINITY ? 0.0f : r.max[hf];  // a row with no key yet: its p are all 0
    float sum[8];
#pragma unroll
    for (int nt = 0; nt < 8; nt++) {
      s[nt][2 * hf] = ex2_approx(fmaf(s[nt][2 * hf], kScaleLog2, -m_use));
      s[nt][2 * hf + 1] = ex2_approx(fmaf(s[nt][2 * hf + 1], kScaleLog2, -m_use));
      sum[nt] = s[nt][2 * hf] + s[nt][2 * hf + 1];
    }
#pragma unroll
    for (int w = 4; w > 0; w >>= 1)
#pragma unroll
      for (int i = 0; i < w; i++) sum[i] += sum[i + w];
    r.sum[hf] += sum[0];
  }
  return any;
}

// The scores of key tile j (first key n0) made probabilities: masked where the tile crosses the diagonal
// (causal) or T, then the online softmax. row0: the warp's first row.
template <bool kCausal>
__device__ __forceinline__ bool scores_to_p(float (&s)[8][4], Rows& r, float (&corr)[2], int n0, int row0, int T,
                                            int lane) {
  if (kCausal ? n0 + kTile - 1 > row0 : n0 + kTile > T) mask<kCausal>(s, n0, row0 + (lane >> 2), T, lane & 3);
  return softmax(s, r, corr);
}

__device__ __forceinline__ void rescale(float (&o)[8][4], const float (&corr)[2]) {
#pragma unroll
  for (int nt = 0; nt < 8; nt++) {
    o[nt][0] *= corr[0];
    o[nt][1] *= corr[0];
    o[nt][2] *= corr[1];
    o[nt][3] *= corr[1];
  }
}

// P as bf16 in wgmma's A layout: k-step kk is n8 tiles 2 kk and 2 kk + 1.
__device__ __forceinline__ void pack_p(uint32_t (&p)[4][4], const float (&s)[8][4]) {
#pragma unroll
  for (int kk = 0; kk < 4; kk++) {
    p[kk][0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
    p[kk][1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
    p[kk][2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    p[kk][3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
}

// O += P V of the warpgroup's last key tile, waited for.
__device__ __forceinline__ void last_pv(float (&o)[32], const uint32_t (&p)[4][4], uint32_t sV) {
  wgmma::fence();
  wgmma::tile_rs(o, p, sV);
  wgmma::commit();
  wgmma::wait<0>();
  wgmma::fence_operands(o);
}

// O / l as bf16 (staged through this warp's 16 rows of the Q tile) and lse = (max + log2 l) ln 2.
__device__ __forceinline__ void store(bf16* out_bh, float* lse_bh, uint8_t* sq, int tile_row, int row0, int T, int C,
                                      const float (&o)[8][4], const Rows& r, int lane) {
  const int g = lane >> 2, t4 = lane & 3;
  float inv[2];
#pragma unroll
  for (int hf = 0; hf < 2; hf++) {
    float l = r.sum[hf];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    inv[hf] = 1.0f / l;
    const int row = row0 + g + 8 * hf;
    if (t4 == 0 && row < T) lse_bh[row] = (r.max[hf] + log2f(l)) * kLn2;
  }
  stage_acc(sq, tile_row, o, inv, lane);
  __syncwarp();
  store_rows<16>(out_bh, C, row0, T, sq, tile_row, lane);
}
#endif

// One CTA per (batch, head, 128-query tile), grid order as flash_attention_fwd.cu's.
template <bool kCausal>
__global__ void __launch_bounds__(kCtaThreads, 2)
    flash_fwd_sm90_k(bf16* out, float* lse, const bf16* qkv, int T, int NH, int group) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  // wg and warp read from lane 0, so that the compiler knows them (and the branches on them) warp-uniform:
  // wgmma issued under a branch it thinks divergent is serialized.
  const int tid = threadIdx.x, lane = tid & 31;
  const int wg = __shfl_sync(0xffffffffu, tid / kGroupThreads, 0);
  const int warp = __shfl_sync(0xffffffffu, (tid % kGroupThreads) >> 5, 0);
  const int n_qt = (T + kRows - 1) / kRows;
  int bh, rank;
  grid_pos(n_qt, group, bh, rank);
  const int b = bh / NH, h = bh - b * NH, C = NH * kHead;
  const int m0 = (n_qt - 1 - rank) * kRows;  // the last query tile has the most key tiles
  const int64_t ld = 3LL * C;
  const bf16* q = qkv + int64_t(b) * T * ld + h * kHead;
  const uint32_t sQ = smem_u32(smem), sKV = sQ + kRows * 128;  // stage st: K at sKV + 2 st 8K, V after it
  const int n_kv = ((kCausal ? min(m0 + kRows, T) : T) + kTile - 1) / kTile;
  const int rg = m0 + 64 * wg;  // this warpgroup's first row
  const int n_mine = rg >= T ? 0 : kCausal ? (min(rg + 64, T) + kTile - 1) / kTile : n_kv;
  auto load_kv = [&](int j) {
    const uint32_t st = sKV + 2 * (j % kSm90Stages) * kTileBytes;
    load_rows_cta<kTile>(st, q + C, ld, j * kTile, T, tid);
    load_rows_cta<kTile>(st + kTileBytes, q + 2 * C, ld, j * kTile, T, tid);
  };
  load_rows_cta<kRows>(sQ, q, ld, m0, T, tid);  // commit group j holds key tile j (group 0 also Q)
  load_kv(0);
  cp_async_commit();
  if (n_kv > 1) load_kv(1);
  cp_async_commit();

  float o[8][4] = {}, s[8][4];
  float(&o32)[32] = wgmma::flat(o);
  float(&s32)[32] = wgmma::flat(s);
  uint32_t p[4][4];
  Rows r;
  const int row0 = rg + 16 * warp;  // this thread's rows: row0 + g, row0 + g + 8
  // Each branch below is one whole wgmma pipeline (fence, issue, commit, wait for all), so that no product
  // is in flight across a branch: the compiler serializes wgmma that is.
  for (int j = 0; j < n_kv; j++) {
    cp_async_wait<1>();  // tile j has landed ...
    wgmma::fence_proxy_async();
    __syncthreads();  // ... for every thread, and tile j - 2's stage is free
    if (j + 2 < n_kv) load_kv(j + 2);
    cp_async_commit();
    const uint32_t sK = sKV + 2 * (j % kSm90Stages) * kTileBytes, sQw = sQ + 64 * wg * 128;
    const uint32_t sVprev = sKV + (2 * ((j + kSm90Stages - 1) % kSm90Stages) + 1) * kTileBytes;
    float corr[2];
    if (j == 0 && n_mine > 0) {  // the first tile: no P V yet, O is zero
      wgmma::fence();
      wgmma::tile_ss(s32, sQw, sK);
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operands(s32);
      scores_to_p<kCausal>(s, r, corr, 0, row0, T, lane);
      pack_p(p, s);
    } else if (j < n_mine) {
      wgmma::fence();
      wgmma::tile_ss(s32, sQw, sK);
      wgmma::commit();
      wgmma::tile_rs(o32, p, sVprev);  // P_{j-1} V_{j-1} runs during the softmax of S_j
      wgmma::commit();
      wgmma::wait<1>();
      wgmma::fence_operands(s32);
      const bool grew = scores_to_p<kCausal>(s, r, corr, j * kTile, row0, T, lane);
      wgmma::wait<0>();
      wgmma::fence_operands(o32);
      if (grew) rescale(o, corr);
      pack_p(p, s);
    } else if (j == n_mine && j > 0) {  // this warpgroup's last P V (causal: its rows end a tile earlier)
      last_pv(o32, p, sVprev);
    }
  }
  if (n_mine > 0 && n_mine == n_kv) last_pv(o32, p, sKV + (2 * ((n_kv - 1) % kSm90Stages) + 1) * kTileBytes);
  if (n_mine > 0)
    store(out + int64_t(b) * T * C + h * kHead, lse + int64_t(bh) * T, smem, 64 * wg + 16 * warp, row0, T, C, o, r,
          lane);
#endif
}
}  // namespace

bool flash_attention_sm90_available() {
#if defined(LOPT_SM90A)
  static const bool ok = [] {
    int dev = 0, major = 0, minor = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    return major == 9 && minor == 0;
  }();
  return ok;
#else
  return false;
#endif
}

void flash_attention_forward_sm90(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, bool causal,
                                  cudaStream_t s) {
  const char* who = "flash_attention_forward_sm90";
  if (!flash_attention_sm90_available())
    user_error(who, ": needs a GPU of compute capability 9.0 and a build for it (make GPU_ARCH=90).");
  check_shape(who, B, T, NH);
  check_aligned(who, out, "out", 16);
  check_aligned(who, qkv, "qkv", 16);
  check_aligned(who, lse, "lse", 4);
  const auto kernel = causal ? flash_fwd_sm90_k<true> : flash_fwd_sm90_k<false>;
  set_smem(kernel, kSmem);
  const unsigned grid = unsigned(B * NH * ((T + kRows - 1) / kRows));
  kernel<<<grid, kCtaThreads, kSmem, s>>>(out, lse, qkv, T, NH, heads_per_group(B, T, NH));
  CUDA_CHECK_LAUNCH();
}

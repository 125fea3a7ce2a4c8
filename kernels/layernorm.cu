// LayerNorm on bf16 rows: forward (fp32 statistics), and a one-pass backward that also produces the
// parameter gradients and, optionally, the column sums of the input gradient. Deterministic (fixed
// reduction orders, no float atomics).
#include "common/cuda_check.h"
#include "kernels/column_sums.cuh"
#include "kernels/device_utils.cuh"
#include "kernels/layernorm.h"

namespace {
// One warp per row, held in registers (kChunks 256-column chunks, 8 columns a lane) from one read: the mean,
// the variance about it, then the output. (Before, the row was read three times, which at GPT-2 1558M took
// 0.027 ms per call against a 0.017 ms floor.)
template <int kChunks>
__global__ void layernorm_fwd_k(bf16* y, float* mean, float* rstd, const bf16* x, const bf16* w, const bf16* b, int N,
                                int C, float eps) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= N) return;
  const bf16* xr = x + int64_t(row) * C;
  Packed8 a[kChunks];
#pragma unroll
  for (int k = 0; k < kChunks; k++)
    if (k * 256 + lane * 8 < C) a[k].load(xr + k * 256 + lane * 8);
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < kChunks; k++)
    if (k * 256 + lane * 8 < C)
      for (int e = 0; e < 8; e++) s += a[k][e];
  const float m = warp_sum(s) / float(C);
  float q = 0.0f;
#pragma unroll
  for (int k = 0; k < kChunks; k++)
    if (k * 256 + lane * 8 < C)
      for (int e = 0; e < 8; e++) q += (a[k][e] - m) * (a[k][e] - m);
  const float r = rsqrtf(warp_sum(q) / float(C) + eps);
#pragma unroll
  for (int k = 0; k < kChunks; k++) {
    const int c = k * 256 + lane * 8;
    if (c >= C) break;
    Vec8 o, ww, bb;
    ww.load(w + c);
    bb.load(b + c);
    for (int e = 0; e < 8; e++) o.v[e] = (a[k][e] - m) * r * ww.v[e] + bb.v[e];
    o.store(y + int64_t(row) * C + c);
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

// Fixed grid of kLnBlocks blocks, each a fixed range of rows. Thread t holds columns [8t, 8t + 8) of every
// row (blockDim: C / 8 rounded up to a warp), so its dw, db (and dsum) partials are 16 (24) registers at any
// width. kRows rows are loaded at once (dy, x and dx together, so one memory latency per batch) and their
// two row sums reduced over the block: each warp's lane sums, then the warps in order through shared
// memory, one barrier per batch (double-buffered, so no second barrier guards its reuse). The block's
// column partials go to partial[block] in row order, and colsum_final_k adds the blocks. Held to 128
// registers (two blocks of 256 per SM), which it fits without spills; 8 rows at a time would spill.
// (Before: a warp per row, lanes holding 8-column chunks across the whole row, which took 16 to 24
// registers per 256 columns: spills and one block per SM at C = 1600, 0.111 ms per call at GPT-2 1558M
// against a 0.035 ms bandwidth floor; measured slower still, a two-pass variant, row statistics then a
// column-tiled pass.)
template <int kRows, bool kSum>
__global__ void __launch_bounds__(kLnMaxThreads, 2)
    layernorm_bwd_k(bf16* dx, float* partial, const bf16* dy, const bf16* x, const bf16* w, const float* mean,
                    const float* rstd, int N, int C, int rows_per_block) {
  __shared__ float red[2][kLnMaxThreads / 32][2 * kRows];
  const int wid = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32, c = threadIdx.x * 8;
  const bool on = c < C;
  float pw[8] = {}, pb[8] = {}, ps[kSum ? 8 : 1] = {};
  Vec8 ww{};
  if (on) ww.load(w + c);
  const int r0 = blockIdx.x * rows_per_block, r1 = min(N, r0 + rows_per_block);
  // dx += rstd * (g w - mean_c(g w) - xhat mean_c(g w xhat)), xhat = (x - mean) rstd
  for (int rb = r0, buf = 0; rb < r1; rb += kRows, buf ^= 1) {
    Packed8 g[kRows], xx[kRows], d[kRows];
    float m[kRows], r[kRows], s[2 * kRows];
#pragma unroll
    for (int k = 0; k < kRows; k++) {
      const bool row = rb + k < r1;
      m[k] = row ? mean[rb + k] : 0.0f;
      r[k] = row ? rstd[rb + k] : 0.0f;
      g[k].u = xx[k].u = d[k].u = uint4{};
      if (row && on) {
        const int64_t o = int64_t(rb + k) * C + c;
        g[k].load(dy + o);
        xx[k].load(x + o);
        d[k].load(dx + o);
      }
    }
#pragma unroll
    for (int k = 0; k < kRows; k++) {
      float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
      for (int e = 0; e < 8; e++) {
        const float gw = g[k][e] * ww.v[e];
        s1 += gw;
        s2 += gw * ((xx[k][e] - m[k]) * r[k]);
      }
      s[2 * k] = warp_sum(s1);
      s[2 * k + 1] = warp_sum(s2);
    }
    if (lane == 0)
#pragma unroll
      for (int j = 0; j < 2 * kRows; j++) red[buf][wid][j] = s[j];
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 2 * kRows; j++) {
      float t = 0.0f;
      for (int q = 0; q < warps; q++) t += red[buf][q][j];
      s[j] = t / float(C);
    }
#pragma unroll
    for (int k = 0; k < kRows; k++) {
      if (!on || rb + k >= r1) continue;
      Vec8 out;
#pragma unroll
      for (int e = 0; e < 8; e++) {
        const float xh = (xx[k][e] - m[k]) * r[k];
        out.v[e] = d[k][e] + r[k] * (g[k][e] * ww.v[e] - s[2 * k] - xh * s[2 * k + 1]);
        pw[e] += g[k][e] * xh;
        pb[e] += g[k][e];
        if (kSum) ps[kSum ? e : 0] += out.v[e];
      }
      out.store(dx + int64_t(rb + k) * C + c);
    }
  }
  if (!on) return;
  float* out = partial + int64_t(blockIdx.x) * (kSum ? 3 : 2) * C + c;  // [db | dw | dsum], as colsum_final_k reads
  for (int e = 0; e < 8; e++) {
    out[e] = pb[e];
    out[C + e] = pw[e];
    if (kSum) out[2 * C + e] = ps[kSum ? e : 0];
  }
}

}  // namespace

void layernorm_forward(bf16* y, float* mean, float* rstd, const bf16* x, const bf16* w, const bf16* b, int N, int C,
                       float eps, cudaStream_t s) {
  if (C > 256 * kLnMaxChunks) user_error("LayerNorm width ", C, " is above the supported ", 256 * kLnMaxChunks, ".");
  switch ((C + 255) / 256) {
#define LN_FWD(k)                                                                       \
  case k:                                                                               \
    layernorm_fwd_k<k><<<blocks(N, 8), 256, 0, s>>>(y, mean, rstd, x, w, b, N, C, eps); \
    break;
    LN_FWD(1) LN_FWD(2) LN_FWD(3) LN_FWD(4) LN_FWD(5) LN_FWD(6) LN_FWD(7) LN_FWD(8)
#undef LN_FWD
  }
  CUDA_CHECK_LAUNCH();
}

void layernorm_backward(bf16* dx, float* dw, float* db, const bf16* dy, const bf16* x, const bf16* w, const float* mean,
                        const float* rstd, int N, int C, float* scratch, cudaStream_t s, float* dsum) {
  if (C > 256 * kLnMaxChunks) user_error("LayerNorm width ", C, " is above the supported ", 256 * kLnMaxChunks, ".");
  const int per = (N + kLnBlocks - 1) / kLnBlocks, threads = (C / 8 + 31) / 32 * 32;
  if (dsum)
    layernorm_bwd_k<kLnRows, true><<<kLnBlocks, threads, 0, s>>>(dx, scratch, dy, x, w, mean, rstd, N, C, per);
  else
    layernorm_bwd_k<kLnRows, false><<<kLnBlocks, threads, 0, s>>>(dx, scratch, dy, x, w, mean, rstd, N, C, per);
  CUDA_CHECK_LAUNCH();
  colsum_final_k<<<blocks(C, 32), 32 * kFinalWarps, 0, s>>>(Outs{{db, dw, dsum}}, dsum ? 3 : 2, scratch, C, kLnBlocks);
  CUDA_CHECK_LAUNCH();
}

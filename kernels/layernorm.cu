// LayerNorm on bf16 rows: forward (fp32 statistics), and a one-pass backward that also produces the
// parameter gradients and, optionally, the column sums of the input gradient. Deterministic (fixed
// reduction orders, no float atomics).
#include "common/cuda_check.h"
#include "kernels/column_sums.cuh"
#include "kernels/device_utils.cuh"
#include "kernels/layernorm.h"

namespace {
// One warp per row; the row is read twice (mean, then variance about it) and once more to write.
__global__ void layernorm_fwd_k(bf16* y, float* mean, float* rstd, const bf16* x, const bf16* w, const bf16* b, int N,
                                int C, float eps) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= N) return;
  const bf16* xr = x + int64_t(row) * C;
  float s = 0.0f;
  for (int c = lane * 8; c < C; c += 256) {
    Vec8 a;
    a.load(xr + c);
    for (float v : a.v) s += v;
  }
  const float m = warp_sum(s) / float(C);
  float q = 0.0f;
  for (int c = lane * 8; c < C; c += 256) {
    Vec8 a;
    a.load(xr + c);
    for (float v : a.v) q += (v - m) * (v - m);
  }
  const float r = rsqrtf(warp_sum(q) / float(C) + eps);
  for (int c = lane * 8; c < C; c += 256) {
    Vec8 a, ww, bb;
    a.load(xr + c);
    ww.load(w + c);
    bb.load(b + c);
    for (int k = 0; k < 8; k++) a.v[k] = (a.v[k] - m) * r * ww.v[k] + bb.v[k];
    a.store(y + int64_t(row) * C + c);
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

// Fixed grid of kLnBlocks blocks, each a fixed range of rows; a warp per row at a time, lanes holding
// 8-column vectors. Each lane keeps its columns' dw and db partials in registers across its rows; the
// block's 8 warps are then summed in order into partial[block], and colsum_final_k adds the blocks.
// (One warp per 256-column chunk with a barrier every 4 rows, fewer registers, measured slower:
// 9.8 vs 6.3 ms of LayerNorm backward per 124M step.)
// kChunks = ceil(C / 256) sets the registers a lane holds: 16 per chunk (24 with dsum). Up to 4 chunks
// the kernel is held to 128 registers, two blocks per SM: at C = 1024 that costs 72 bytes of spills and
// gains 27% (0.205 -> 0.149 ms per call at 355M on the H100); with more chunks the spills grow.
// (A two-pass variant, row statistics then a column-tiled pass with 8 columns per thread, measured
// slower: 0.305 vs 0.200 ms at 355M.)
template <int kChunks, bool kSum>
__global__ void __launch_bounds__(256, kChunks <= 4 ? 2 : 1)
    layernorm_bwd_k(bf16* dx, float* partial, const bf16* dy, const bf16* x, const bf16* w, const float* mean,
                    const float* rstd, int N, int C, int rows_per_block) {
  __shared__ float red[8][256];
  const int wid = threadIdx.x / 32, lane = threadIdx.x % 32;
  float pw[kChunks][8] = {}, pb[kChunks][8] = {}, ps[kSum ? kChunks : 1][8] = {};
  const int r0 = blockIdx.x * rows_per_block, r1 = min(N, r0 + rows_per_block);
  // dx += rstd * (g w - mean_c(g w) - xhat mean_c(g w xhat)), xhat = (x - mean) rstd: the first pass over
  // the row gathers the two row means (s1, s2) and the dw, db partials; the second writes dx.
  for (int row = r0 + wid; row < r1; row += 8) {
    const int64_t o = int64_t(row) * C;
    const float m = mean[row], r = rstd[row];
    float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
    for (int k = 0; k < kChunks; k++) {
      const int c = k * 256 + lane * 8;
      if (c >= C) break;
      Vec8 g, xx, ww;
      g.load(dy + o + c);
      xx.load(x + o + c);
      ww.load(w + c);
      for (int e = 0; e < 8; e++) {
        const float xh = (xx.v[e] - m) * r, gw = g.v[e] * ww.v[e];
        s1 += gw;
        s2 += gw * xh;
        pw[k][e] += g.v[e] * xh;
        pb[k][e] += g.v[e];
      }
    }
    s1 = warp_sum(s1) / float(C);
    s2 = warp_sum(s2) / float(C);
#pragma unroll
    for (int k = 0; k < kChunks; k++) {
      const int c = k * 256 + lane * 8;
      if (c >= C) break;
      Vec8 g, xx, ww, d;
      g.load(dy + o + c);
      xx.load(x + o + c);
      ww.load(w + c);
      d.load(dx + o + c);
      for (int e = 0; e < 8; e++) d.v[e] += r * (g.v[e] * ww.v[e] - s1 - (xx.v[e] - m) * r * s2);
      d.store(dx + o + c);
      if (kSum)
        for (int e = 0; e < 8; e++) ps[kSum ? k : 0][e] += d.v[e];
    }
  }
  float* out = partial + int64_t(blockIdx.x) * (kSum ? 3 : 2) * C;  // [db | dw | dsum], as colsum_final_k reads
#pragma unroll
  for (int k = 0; k < kChunks; k++) {
    if (k * 256 >= C) break;
    for (int half = 0; half < (kSum ? 3 : 2); half++) {
      for (int e = 0; e < 8; e++)
        red[wid][lane * 8 + e] = half == 0 ? pb[k][e] : half == 1 ? pw[k][e] : ps[kSum ? k : 0][e];
      __syncthreads();
      const int c = k * 256 + threadIdx.x;
      if (c < C) {
        float t = 0.0f;
        for (int q = 0; q < 8; q++) t += red[q][threadIdx.x];
        out[half * C + c] = t;
      }
      __syncthreads();
    }
  }
}

}  // namespace

void layernorm_forward(bf16* y, float* mean, float* rstd, const bf16* x, const bf16* w, const bf16* b, int N, int C,
                       float eps, cudaStream_t s) {
  layernorm_fwd_k<<<blocks(N, 8), 256, 0, s>>>(y, mean, rstd, x, w, b, N, C, eps);
  CUDA_CHECK_LAUNCH();
}

void layernorm_backward(bf16* dx, float* dw, float* db, const bf16* dy, const bf16* x, const bf16* w, const float* mean,
                        const float* rstd, int N, int C, float* scratch, cudaStream_t s, float* dsum) {
  if (C > 256 * kLnMaxChunks) user_error("LayerNorm width ", C, " is above the supported ", 256 * kLnMaxChunks, ".");
  const int per = (N + kLnBlocks - 1) / kLnBlocks;
  switch ((C + 255) / 256 * 2 + (dsum != nullptr)) {
#define LN_BWD(k, sum)                                                                               \
  case 2 * k + sum:                                                                                  \
    layernorm_bwd_k<k, sum><<<kLnBlocks, 256, 0, s>>>(dx, scratch, dy, x, w, mean, rstd, N, C, per); \
    break;
#define LN_BWD2(k) LN_BWD(k, 0) LN_BWD(k, 1)
    LN_BWD2(1) LN_BWD2(2) LN_BWD2(3) LN_BWD2(4) LN_BWD2(5) LN_BWD2(6) LN_BWD2(7)
#undef LN_BWD2
#undef LN_BWD
  }
  CUDA_CHECK_LAUNCH();
  colsum_final_k<<<blocks(C, 32), 32 * kFinalWarps, 0, s>>>(Outs{{db, dw, dsum}}, dsum ? 3 : 2, scratch, C, kLnBlocks);
  CUDA_CHECK_LAUNCH();
}

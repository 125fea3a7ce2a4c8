// The two-stage, fixed-order column sums that the LayerNorm backward and the bias gradients share:
// kernels write per-split partial rows (partial[split][j * C + c]), colsum_final_k adds the splits in
// order. Internal to kernels/layernorm.cu and kernels/column_sums.cu.
#pragma once
#include <algorithm>

#include "kernels/bf16_vec.cuh"

namespace {
// The LayerNorm backward's fixed grid: its blocks write kLnBlocks partial rows of up to 3 vectors. A block
// has a thread per 8 columns and loads kLnRows rows at a time. The forward holds a row in 256-column chunks.
constexpr int kLnBlocks = 512, kLnMaxThreads = 256, kLnRows = 4, kLnMaxChunks = 8;  // C <= 2048 (GPT-2 XL: 1600)
// Column sums in two fixed-order stages: block (x, y) sums rows of split y for 256 columns (two per
// thread) into partial[y]; then one thread per column adds the splits in order.
constexpr int kColsPerBlock = 256, kMaxSplits = 128;
int splits_for(int N) { return std::max(1, std::min(kMaxSplits, N / 64)); }

// outs[j][c] += sum over splits y of partial[y][j * C + c], for j < nout (up to 3 column-sum vectors per
// partial row). 32 columns per block (coalesced reads); each of 32 warps adds splits w, w + 32, ... in
// order, four loads in flight at a time, then warp 0 adds the 32 warp sums in order. (With 8 warps and
// one load at a time this stage was latency-bound: ~40 us for 512 splits, a fifth of a LayerNorm
// backward at 355M.)
struct Outs {
  float* p[3];
};
constexpr int kFinalWarps = 32;
__global__ void __launch_bounds__(32 * kFinalWarps)
    colsum_final_k(Outs outs, int nout, const float* partial, int C, int splits) {
  __shared__ float red[3][kFinalWarps][33];
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, c = blockIdx.x * 32 + lane;
  const int64_t width = int64_t(nout) * C;
  float acc[3] = {0.0f, 0.0f, 0.0f};
  if (c < C)
    for (int y = w; y < splits; y += 4 * kFinalWarps) {
      float v[4][3];
#pragma unroll
      for (int u = 0; u < 4; u++)
#pragma unroll
        for (int j = 0; j < 3; j++) {
          const int yy = y + u * kFinalWarps;
          v[u][j] = (j < nout && yy < splits) ? partial[int64_t(yy) * width + int64_t(j) * C + c] : 0.0f;
        }
#pragma unroll
      for (int u = 0; u < 4; u++)
#pragma unroll
        for (int j = 0; j < 3; j++) acc[j] += v[u][j];
    }
  for (int j = 0; j < 3; j++) red[j][w][lane] = acc[j];
  __syncthreads();
  if (w == 0 && c < C)
    for (int j = 0; j < nout; j++) {
      float t = 0.0f;
      for (int k = 0; k < kFinalWarps; k++) t += red[j][k][lane];
      outs.p[j][c] += t;
    }
}

}  // namespace

// What Adafactor's pass A and the learned optimizers' pass A (optim/lopt/lo_core.cu) share over a tile of
// rows x up to 1024 columns: each warp keeps per-column sums of its rows in shared memory, and the block
// adds them up per column in warp order, so every run sums in the same order (bit-reproducible).
#pragma once

// out[c] = cols[0][c] + cols[1][c] + ... + cols[kWarps - 1][c] for c < n. blockDim = 32 kWarps; call it
// after a __syncthreads that follows the warps' writes to cols.
template <int kWarps, int kCols>
__device__ __forceinline__ void sum_warp_columns(const float (&cols)[kWarps][kCols], int n, float* out) {
  for (int c = threadIdx.x; c < n; c += 32 * kWarps) {
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; w++) s += cols[w][c];
    out[c] = s;
  }
}

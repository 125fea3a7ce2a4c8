// Column sums of bf16 rows into fp32 vectors (bias gradients), optionally through the GELU backward.
// Two stages (kernels/column_sums.cuh): split y of the rows -> partial[y] (splits * cols floats), then the
// splits added in order. Memory: dy is read once (and, with GELU, pre read and d written once); the partial
// rows are small next to it (at most 128 splits, about one per 64 rows).
#include "common/cuda_check.h"
#include "kernels/column_sums.cuh"
#include "kernels/column_sums.h"
#include "kernels/device_utils.cuh"
#include "kernels/gelu.cuh"

namespace {
// partial[y][c] = sum of dy[r, c] over split y's rows r, in row order: block (x, y) covers 256 columns, each
// thread a bf16 pair (one 4-byte load per row).
__global__ void colsum_partial_k(float* partial, const bf16* dy, int ld, int N, int C, int rows_per_split) {
  const int c = blockIdx.x * kColsPerBlock + 2 * threadIdx.x;
  if (c >= C) return;
  const int r0 = blockIdx.y * rows_per_split, r1 = min(N, r0 + rows_per_split);
  float s0 = 0.0f, s1 = 0.0f;
  for (int r = r0; r < r1; r++) {
    const float2 g = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(dy + int64_t(r) * ld + c));
    s0 += g.x;
    s1 += g.y;
  }
  float* p = partial + int64_t(blockIdx.y) * C;
  p[c] = s0;
  p[c + 1] = s1;
}

// The same column sums of d after d *= gelu'(pre) in place (the GELU backward). kRows rows' loads are
// issued before the first store, because the compiler may not move a load of d above a store to d by itself.
template <Gelu kKind>
__global__ void gelu_colsum_partial_k(float* partial, bf16* d, const bf16* pre, int ld, int N, int C,
                                      int rows_per_split) {
  const int c = blockIdx.x * kColsPerBlock + 2 * threadIdx.x;
  if (c >= C) return;
  const int r0 = blockIdx.y * rows_per_split, r1 = min(N, r0 + rows_per_split);
  constexpr int kRows = 8;
  float s0 = 0.0f, s1 = 0.0f;
  for (int rb = r0; rb < r1; rb += kRows) {
    __nv_bfloat162 dv[kRows], pv[kRows];
#pragma unroll
    for (int k = 0; k < kRows; k++)
      if (rb + k < r1) {
        const int64_t o = int64_t(rb + k) * ld + c;
        dv[k] = *reinterpret_cast<const __nv_bfloat162*>(d + o);
        pv[k] = *reinterpret_cast<const __nv_bfloat162*>(pre + o);
      }
#pragma unroll
    for (int k = 0; k < kRows; k++) {
      if (rb + k >= r1) break;
      const float2 g = __bfloat1622float2(dv[k]), u = __bfloat1622float2(pv[k]);
      const __nv_bfloat162 out = __floats2bfloat162_rn(g.x * gelu_grad<kKind>(u.x), g.y * gelu_grad<kKind>(u.y));
      *reinterpret_cast<__nv_bfloat162*>(d + int64_t(rb + k) * ld + c) = out;
      const float2 o2 = __bfloat1622float2(out);  // the bias gradient sums what the matmuls will read
      s0 += o2.x;
      s1 += o2.y;
    }
  }
  float* p = partial + int64_t(blockIdx.y) * C;
  p[c] = s0;
  p[c + 1] = s1;
}

}  // namespace

size_t column_sums_scratch_floats(int C) { return size_t(std::max(kLnBlocks, kMaxSplits)) * 3 * size_t(C); }

void bias_backward(float* db, const bf16* dy, int ld, int N, int cols, float* scratch, cudaStream_t s) {
  CHECK(cols % 2 == 0 && ld % 2 == 0);  // bf16 pairs
  const int splits = splits_for(N), per = (N + splits - 1) / splits;
  colsum_partial_k<<<dim3(blocks(cols, kColsPerBlock), unsigned(splits)), kColsPerBlock / 2, 0, s>>>(scratch, dy, ld, N,
                                                                                                     cols, per);
  CUDA_CHECK_LAUNCH();
  colsum_final_k<<<blocks(cols, 32), 32 * kFinalWarps, 0, s>>>(Outs{{db, nullptr, nullptr}}, 1, scratch, cols, splits);
  CUDA_CHECK_LAUNCH();
}

void gelu_bias_backward(float* db, bf16* d, const bf16* pre, int ld, int N, int cols, float* scratch, cudaStream_t s,
                        Gelu kind) {
  CHECK(cols % 2 == 0 && ld % 2 == 0);  // bf16 pairs
  const int splits = splits_for(N), per = (N + splits - 1) / splits;
  const dim3 grid(blocks(cols, kColsPerBlock), unsigned(splits));
  if (kind == Gelu::kTanh) {
    gelu_colsum_partial_k<Gelu::kTanh><<<grid, kColsPerBlock / 2, 0, s>>>(scratch, d, pre, ld, N, cols, per);
  } else {
    gelu_colsum_partial_k<Gelu::kErf><<<grid, kColsPerBlock / 2, 0, s>>>(scratch, d, pre, ld, N, cols, per);
  }
  CUDA_CHECK_LAUNCH();
  colsum_final_k<<<blocks(cols, 32), 32 * kFinalWarps, 0, s>>>(Outs{{db, nullptr, nullptr}}, 1, scratch, cols, splits);
  CUDA_CHECK_LAUNCH();
}

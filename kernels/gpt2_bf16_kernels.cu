#include <algorithm>
#include <cmath>

#include "common/cuda_check.h"
#include "kernels/gpt2_bf16_kernels.h"
#include "kernels/device_utils.cuh"

namespace {
// d/du of the tanh-form GELU, 0.5 u (1 + tanh(k (u + 0.044715 u^3))).
__device__ __forceinline__ float gelu_grad(float u) {
  const float k = 0.7978845608028654f, th = tanhf(k * (u + 0.044715f * u * u * u));
  return 0.5f * (1.0f + th) + 0.5f * u * (1.0f - th * th) * k * (1.0f + 3.0f * 0.044715f * u * u);
}

// 8 bf16 <-> 8 floats through one 16-byte access.
struct Vec8 {
  float v[8];
  __device__ __forceinline__ void load(const bf16* p) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
    for (int k = 0; k < 4; k++) {
      const float2 f = __bfloat1622float2(h[k]);
      v[2 * k] = f.x, v[2 * k + 1] = f.y;
    }
  }
  __device__ __forceinline__ void store(bf16* p) const {
    uint4 u;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
    for (int k = 0; k < 4; k++) h[k] = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
    *reinterpret_cast<uint4*>(p) = u;
  }
};

// One warp per row; the row is read twice (mean, then variance about it) and once more to write.
__global__ void layernorm_fwd_k(bf16* y, float* mean, float* rstd, const bf16* x, const bf16* w, const bf16* b, int N, int C) {
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
  const float r = rsqrtf(warp_sum(q) / float(C) + 1e-5f);
  for (int c = lane * 8; c < C; c += 256) {
    Vec8 a, ww, bb;
    a.load(xr + c), ww.load(w + c), bb.load(b + c);
    for (int k = 0; k < 8; k++) a.v[k] = (a.v[k] - m) * r * ww.v[k] + bb.v[k];
    a.store(y + int64_t(row) * C + c);
  }
  if (lane == 0) mean[row] = m, rstd[row] = r;
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
constexpr int kLnBlocks = 512, kLnMaxChunks = 7;  // C <= 7 * 256 = 1792 (GPT-2 XL has 1600)
template <int kChunks, bool kSum>
__global__ void __launch_bounds__(256, kChunks <= 4 ? 2 : 1) layernorm_bwd_k(bf16* dx, float* partial, const bf16* dy, const bf16* x, const bf16* w,
                                                       const float* mean, const float* rstd, int N, int C, int rows_per_block) {
  __shared__ float red[8][256];
  const int wid = threadIdx.x / 32, lane = threadIdx.x % 32;
  float pw[kChunks][8] = {}, pb[kChunks][8] = {}, ps[kSum ? kChunks : 1][8] = {};
  const int r0 = blockIdx.x * rows_per_block, r1 = min(N, r0 + rows_per_block);
  for (int row = r0 + wid; row < r1; row += 8) {
    const int64_t o = int64_t(row) * C;
    const float m = mean[row], r = rstd[row];
    float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
    for (int k = 0; k < kChunks; k++) {
      const int c = k * 256 + lane * 8;
      if (c >= C) break;
      Vec8 g, xx, ww;
      g.load(dy + o + c), xx.load(x + o + c), ww.load(w + c);
      for (int e = 0; e < 8; e++) {
        const float xh = (xx.v[e] - m) * r, gw = g.v[e] * ww.v[e];
        s1 += gw, s2 += gw * xh;
        pw[k][e] += g.v[e] * xh, pb[k][e] += g.v[e];
      }
    }
    s1 = warp_sum(s1) / float(C);
    s2 = warp_sum(s2) / float(C);
#pragma unroll
    for (int k = 0; k < kChunks; k++) {
      const int c = k * 256 + lane * 8;
      if (c >= C) break;
      Vec8 g, xx, ww, d;
      g.load(dy + o + c), xx.load(x + o + c), ww.load(w + c), d.load(dx + o + c);
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
      for (int e = 0; e < 8; e++) red[wid][lane * 8 + e] = half == 0 ? pb[k][e] : half == 1 ? pw[k][e] : ps[kSum ? k : 0][e];
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

// Column sums in two fixed-order stages: block (x, y) sums rows of split y for 256 columns (two per
// thread) into partial[y]; then one thread per column adds the splits in order.
constexpr int kColsPerBlock = 256, kMaxSplits = 128;
int splits_for(int N) { return std::max(1, std::min(kMaxSplits, N / 64)); }

__global__ void colsum_partial_k(float* partial, const bf16* dy, int ld, int N, int C, int rows_per_split) {
  const int c = blockIdx.x * kColsPerBlock + 2 * threadIdx.x;
  if (c >= C) return;
  const int r0 = blockIdx.y * rows_per_split, r1 = min(N, r0 + rows_per_split);
  float s0 = 0.0f, s1 = 0.0f;
  for (int r = r0; r < r1; r++) {
    const float2 g = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(dy + int64_t(r) * ld + c));
    s0 += g.x, s1 += g.y;
  }
  float* p = partial + int64_t(blockIdx.y) * C;
  p[c] = s0, p[c + 1] = s1;
}

// The same column sums of d after d *= gelu'(pre) in place (the GELU backward, tanh form). kRows rows'
// loads are issued before the first store, because the compiler may not move a load
// of d above a store to d by itself.
__global__ void gelu_colsum_partial_k(float* partial, bf16* d, const bf16* pre, int ld, int N, int C, int rows_per_split) {
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
        dv[k] = *reinterpret_cast<const __nv_bfloat162*>(d + o), pv[k] = *reinterpret_cast<const __nv_bfloat162*>(pre + o);
      }
#pragma unroll
    for (int k = 0; k < kRows; k++) {
      if (rb + k >= r1) break;
      const float2 g = __bfloat1622float2(dv[k]), u = __bfloat1622float2(pv[k]);
      const __nv_bfloat162 out = __floats2bfloat162_rn(g.x * gelu_grad(u.x), g.y * gelu_grad(u.y));
      *reinterpret_cast<__nv_bfloat162*>(d + int64_t(rb + k) * ld + c) = out;
      const float2 o2 = __bfloat1622float2(out);  // the bias gradient sums what the matmuls will read
      s0 += o2.x, s1 += o2.y;
    }
  }
  float* p = partial + int64_t(blockIdx.y) * C;
  p[c] = s0, p[c + 1] = s1;
}

// outs[j][c] += sum over splits y of partial[y][j * C + c], for j < nout (up to 3 column-sum vectors per
// partial row). 32 columns per block (coalesced reads); each of 32 warps adds splits w, w + 32, ... in
// order, four loads in flight at a time, then warp 0 adds the 32 warp sums in order. (With 8 warps and
// one load at a time this stage was latency-bound: ~40 us for 512 splits, a fifth of a LayerNorm
// backward at 355M.)
struct Outs {
  float* p[3];
};
constexpr int kFinalWarps = 32;
__global__ void __launch_bounds__(32 * kFinalWarps) colsum_final_k(Outs outs, int nout, const float* partial, int C, int splits) {
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

// One block per row: an online (max, sum) per thread over its columns, merged across the block in a
// fixed order; then the gradient overwrites the row. (Staging the row in shared memory to read it
// once, or keeping it in registers, measured slower on the H100: 7.2 and 9.2 vs 6.0 ms per 65536 rows.)
__global__ void __launch_bounds__(1024) crossentropy_k(bf16* z, int ld, float* loss, const int* targets, int V, float scale) {
  const int64_t n = blockIdx.x;
  bf16* zr = z + n * ld;
  __shared__ float sm[32], ss[32], lse_s, zt_s;
  float m = -INFINITY, s = 0.0f;
  for (int v = threadIdx.x * 8; v < V; v += blockDim.x * 8) {
    Vec8 a;
    if (v + 8 <= V) {
      a.load(zr + v);
    } else {
      for (int k = 0; k < 8; k++) a.v[k] = v + k < V ? __bfloat162float(zr[v + k]) : -INFINITY;
    }
    float mx = m;
    for (float x : a.v) mx = fmaxf(mx, x);
    s *= expf(m - mx);
    for (float x : a.v) s += expf(x - mx);
    m = mx;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o), mx = fmaxf(m, m2);
    s = (mx == -INFINITY) ? 0.0f : s * expf(m - mx) + s2 * expf(m2 - mx);
    m = mx;
  }
  if (threadIdx.x % 32 == 0) sm[threadIdx.x / 32] = m, ss[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float M = sm[0], S = ss[0];
    for (int w = 1; w < int(blockDim.x / 32); w++) {
      const float mx = fmaxf(M, sm[w]);
      S = S * expf(M - mx) + ss[w] * expf(sm[w] - mx);
      M = mx;
    }
    lse_s = M + logf(S);
    zt_s = __bfloat162float(zr[targets[n]]);
    loss[n] = lse_s - zt_s;
  }
  __syncthreads();
  const float lse = lse_s;
  const int tgt = targets[n];
  for (int v = threadIdx.x * 8; v < V; v += blockDim.x * 8) {
    if (v + 8 <= V) {
      Vec8 a;
      a.load(zr + v);
      for (int k = 0; k < 8; k++) a.v[k] = (expf(a.v[k] - lse) - (v + k == tgt ? 1.0f : 0.0f)) * scale;
      a.store(zr + v);
    } else {
      for (int k = v; k < V; k++) zr[k] = __float2bfloat16_rn((expf(__bfloat162float(zr[k]) - lse) - (k == tgt ? 1.0f : 0.0f)) * scale);
    }
  }
  for (int v = V + threadIdx.x; v < ld; v += blockDim.x) zr[v] = __float2bfloat16_rn(0.0f);  // padding: no gradient
}
}  // namespace

void layernorm_forward(bf16* y, float* mean, float* rstd, const bf16* x, const bf16* w, const bf16* b, int N, int C, cudaStream_t s) {
  layernorm_fwd_k<<<blocks(N, 8), 256, 0, s>>>(y, mean, rstd, x, w, b, N, C);
  CUDA_CHECK_LAUNCH();
}

size_t column_sums_scratch_floats(int C) { return size_t(std::max(kLnBlocks, kMaxSplits)) * 3 * size_t(C); }

void layernorm_backward(bf16* dx, float* dw, float* db, const bf16* dy, const bf16* x, const bf16* w, const float* mean,
                        const float* rstd, int N, int C, float* scratch, cudaStream_t s, float* dsum) {
  if (C > 256 * kLnMaxChunks) user_error("LayerNorm width ", C, " is above the supported ", 256 * kLnMaxChunks, ".");
  const int per = (N + kLnBlocks - 1) / kLnBlocks;
  switch ((C + 255) / 256 * 2 + (dsum != nullptr)) {
#define LN_BWD(k, sum) \
  case 2 * k + sum: layernorm_bwd_k<k, sum><<<kLnBlocks, 256, 0, s>>>(dx, scratch, dy, x, w, mean, rstd, N, C, per); break;
#define LN_BWD2(k) LN_BWD(k, 0) LN_BWD(k, 1)
    LN_BWD2(1) LN_BWD2(2) LN_BWD2(3) LN_BWD2(4) LN_BWD2(5) LN_BWD2(6) LN_BWD2(7)
#undef LN_BWD2
#undef LN_BWD
  }
  CUDA_CHECK_LAUNCH();
  colsum_final_k<<<blocks(C, 32), 32 * kFinalWarps, 0, s>>>(Outs{{db, dw, dsum}}, dsum ? 3 : 2, scratch, C, kLnBlocks);
  CUDA_CHECK_LAUNCH();
}

void bias_backward(float* db, const bf16* dy, int ld, int N, int cols, float* scratch, cudaStream_t s) {
  const int splits = splits_for(N), per = (N + splits - 1) / splits;
  colsum_partial_k<<<dim3(blocks(cols, kColsPerBlock), unsigned(splits)), kColsPerBlock / 2, 0, s>>>(scratch, dy, ld, N, cols, per);
  CUDA_CHECK_LAUNCH();
  colsum_final_k<<<blocks(cols, 32), 32 * kFinalWarps, 0, s>>>(Outs{{db, nullptr, nullptr}}, 1, scratch, cols, splits);
  CUDA_CHECK_LAUNCH();
}

void gelu_bias_backward(float* db, bf16* d, const bf16* pre, int ld, int N, int cols, float* scratch, cudaStream_t s) {
  const int splits = splits_for(N), per = (N + splits - 1) / splits;
  gelu_colsum_partial_k<<<dim3(blocks(cols, kColsPerBlock), unsigned(splits)), kColsPerBlock / 2, 0, s>>>(scratch, d, pre, ld, N, cols, per);
  CUDA_CHECK_LAUNCH();
  colsum_final_k<<<blocks(cols, 32), 32 * kFinalWarps, 0, s>>>(Outs{{db, nullptr, nullptr}}, 1, scratch, cols, splits);
  CUDA_CHECK_LAUNCH();
}

void crossentropy_forward_backward(bf16* z, int ld, float* loss, const int* targets, int N, int V, float scale, cudaStream_t s) {
  crossentropy_k<<<unsigned(N), 1024, 0, s>>>(z, ld, loss, targets, V, scale);
  CUDA_CHECK_LAUNCH();
}

// Device helpers shared by the learned optimizers' passes: the loops over a work item's elements, the
// fixed-order block and tensor reductions (one element's update: lo_element.cuh).
#pragma once
#include "optim/lopt/lo_core.h"
#include "optim/lopt/lo_record16.h"

// The pointers of pass B's arguments `a` (LoPassB) as __restrict__ locals of the kernel, under the field
// names (lo_core.h: nvcc ignores __restrict__ on struct members, so a kernel copies them first).
#define LO_PASS_B_POINTERS(a)                   \
  const LoWork* __restrict__ works = (a).works; \
  const LoTensor* __restrict__ ts = (a).ts;     \
  const float* __restrict__ g = (a).g;          \
  const float* __restrict__ p = (a).p;          \
  float4* __restrict__ state = (a).state;       \
  float4* __restrict__ diag = (a).diag;         \
  const float4* __restrict__ rrec = (a).rrec;   \
  const float4* __restrict__ crec = (a).crec;   \
  const float4* __restrict__ rfac = (a).rfac;   \
  const float4* __restrict__ cfac = (a).cfac;   \
  double* __restrict__ partial = (a).partial;   \
  const auto* __restrict__ sc = (a).sc

// Calls body(e, g, p, record) for every element e of the chunk, two elements per iteration with their
// loads issued together (more bytes in flight per thread for the memory-bound pass B). kReadP false: p is
// not read and body gets 0 (VeLO's pass B, once its pass C has summed p^2).
template <int kThreads, bool kReadP = true, class Rec, class F>
__device__ __forceinline__ void lo_for_each_pair(const Chunk& c, const float* __restrict__ g,
                                                 const float* __restrict__ p, const Rec* __restrict__ state, F&& body) {
  int e = threadIdx.x;
  for (; e + kThreads < c.n; e += 2 * kThreads) {
    const float g0 = g[c.p_begin + e], g1 = g[c.p_begin + e + kThreads];
    const float p0 = kReadP ? p[c.p_begin + e] : 0.0f, p1 = kReadP ? p[c.p_begin + e + kThreads] : 0.0f;
    const float4 s0 = lo_rec_load(state, c.s_begin + e), s1 = lo_rec_load(state, c.s_begin + e + kThreads);
    body(e, g0, p0, s0);
    body(e + kThreads, g1, p1, s1);
  }
  if (e < c.n) body(e, g[c.p_begin + e], kReadP ? p[c.p_begin + e] : 0.0f, lo_rec_load(state, c.s_begin + e));
}

// Sums acc[0..N) over the block in a fixed order and writes them (double) to out; blockDim 256.
template <int N>
__device__ __forceinline__ void lo_block_sums(const float* acc, double* out) {
  __shared__ float part[8][N];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int c = 0; c < N; c++) {
    float x = acc[c];
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    if (lane == 0) part[warp][c] = x;
  }
  __syncthreads();
  for (int c = threadIdx.x; c < N; c += blockDim.x) {
    double s = 0;
    for (int w = 0; w < 8; w++) s += part[w][c];
    out[c] = s;
  }
}

// Per-tensor sums of the per-chunk partials (N channels each, chunks [begin, end)), in a fixed order:
// 1024 threads = 64 channel lanes x 16 strides, loads coalesced across channels. Valid in `out` (N
// doubles, shared) after the call; blockDim must be 1024 and N <= 64.
template <int N>
__device__ __forceinline__ void lo_tensor_sums(const double* __restrict__ partial, int begin, int end, double* out) {
  __shared__ double part[16][65];
  const int c = threadIdx.x % 64, j = threadIdx.x / 64;
  double s = 0;
  if (c < N) {  // eight independent sums, sixteen loads in flight (big tensors have ~10^3 items: latency)
    double s8[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int ch = begin + j;
    for (; ch + 240 < end; ch += 256) {  // two rounds of the loop below, their loads first: the same sums
      double v[16];
#pragma unroll
      for (int u = 0; u < 16; u++) v[u] = partial[int64_t(ch + 16 * u) * N + c];
#pragma unroll
      for (int u = 0; u < 16; u++) s8[u % 8] += v[u];
    }
    for (; ch + 112 < end; ch += 128)
#pragma unroll
      for (int u = 0; u < 8; u++) s8[u] += partial[int64_t(ch + 16 * u) * N + c];
    for (; ch < end; ch += 16) s8[0] += partial[int64_t(ch) * N + c];
    s = ((s8[0] + s8[1]) + (s8[2] + s8[3])) + ((s8[4] + s8[5]) + (s8[6] + s8[7]));
  }
  part[j][c] = s;
  __syncthreads();
  if (threadIdx.x < N) {
    double t = 0;
    for (int k = 0; k < 16; k++) t += part[k][threadIdx.x];
    out[threadIdx.x] = t;
  }
  __syncthreads();
}

// The row-indexed (A) and column-indexed (B) Adafactor factors of a tile2d tensor (lo_b_is_r).
struct LoSides {
  const float4* fac_a;
  const float4* fac_b;
};
__device__ __forceinline__ LoSides lo_sides(const LoTensor& t, const float4* rfac, const float4* cfac) {
  return lo_b_is_r(t) ? LoSides{cfac + t.c_off, rfac + t.r_off} : LoSides{rfac + t.r_off, cfac + t.c_off};
}

// Tile of passes B and C, one column per thread: calls body(row, at, g, p, record) down the column
// (at = element index in the tensor), kUnroll rows at a time with all their loads issued first so that
// enough bytes are in flight. Threads past the tensor's last column do nothing. kReadP: as lo_for_each_pair.
template <int kUnroll, bool kReadP = true, class Rec, class F>
__device__ __forceinline__ void lo_tile_column(const LoWork& w, const LoTensor& t, const float* __restrict__ g,
                                               const float* __restrict__ p, const Rec* __restrict__ state, F&& body) {
  const int64_t col = w.col0 + int(threadIdx.x);
  if (col >= t.nb) return;
  const int64_t at0 = w.row0 * t.nb + col;  // the column's first element in this tile
  const float* G = g + t.p_off + at0;
  const float* P = p + t.p_off + at0;
  const Rec* S = state + t.s_off + at0;
  const int nb = int(t.nb);  // kTileRows * nb < 2^31 (tile2d tensors have fewer than 2^31 / 32 columns)
  int r = 0;
  for (; r + kUnroll <= w.n; r += kUnroll) {
    float gv[kUnroll], pv[kUnroll];
    float4 sv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
      const int o = (r + u) * nb;
      gv[u] = G[o];
      pv[u] = kReadP ? P[o] : 0.0f;
      sv[u] = lo_rec_load(S, o);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; u++) body(w.row0 + r + u, at0 + int64_t(r + u) * nb, gv[u], pv[u], sv[u]);
  }
  for (; r < w.n; r++) {
    const int o = r * nb;
    body(w.row0 + r, at0 + o, G[o], kReadP ? P[o] : 0.0f, lo_rec_load(S, o));
  }
}

// Sums of squares of a factored tensor's row/column features over all its elements, from the R and C
// entries (an R entry is broadcast to numel / r_len elements, a C entry to numel / c_len):
// out = {sum R_k^2, sum C_k^2, sum rsqrt(R_k + 1e-8)^2, sum rsqrt(C_k + 1e-8)^2} for k = 0..2, in a fixed
// order. `out` (12 doubles, shared) is valid after the call; blockDim 1024.
__device__ __forceinline__ void lo_side_sums(const LoTensor& t, const float4* __restrict__ rrec,
                                             const float4* __restrict__ crec, double* out) {
  double s[12];
#pragma unroll
  for (int c = 0; c < 12; c++) s[c] = 0;
  for (int side = 0; side < 2; side++) {
    const float4* rec = side ? crec + t.c_off : rrec + t.r_off;
    const int64_t len = side ? t.c_len : t.r_len;
    for (int64_t j0 = threadIdx.x; j0 < len; j0 += 4 * blockDim.x) {  // four entries in flight
      float4 e[4];
#pragma unroll
      for (int u = 0; u < 4; u++) {
        const int64_t j = j0 + u * blockDim.x;
        e[u] = j < len ? rec[j] : make_float4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < 4; u++) {
        if (j0 + u * blockDim.x >= len) break;
        const float v[3] = {e[u].x, e[u].y, e[u].z};
#pragma unroll
        for (int k = 0; k < 3; k++) {
          const float rs = rsqrtf(v[k] + 1e-8f);
          s[3 * side + k] += double(v[k]) * v[k];
          s[6 + 3 * side + k] += double(rs) * rs;
        }
      }
    }
  }
  __shared__ double part[32][12];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int c = 0; c < 12; c++) {
    double x = s[c];
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    if (lane == 0) part[warp][c] = x;
  }
  __syncthreads();
  if (threadIdx.x < 12) {
    double tot = 0;
    for (int w = 0; w < int(blockDim.x / 32); w++) tot += part[w][threadIdx.x];
    const bool is_c = (threadIdx.x / 3) % 2 == 1;
    out[threadIdx.x] = tot * double(t.numel / (is_c ? t.c_len : t.r_len));
  }
  __syncthreads();
}

// Per element and step (72 B/param, small_fc_lopt.md 8.2): pass A reads g (4 B); pass B reads g, p and
// {m0,m1,m2,v}, writes the record (40 B) and sums the feature squares; pass C reads g, p and the record
// again, runs the MLP and writes p (28 B). The 11 time features are folded into the first-layer bias
// once per step and each tensor's 28 normalisers into its block's copy of the first layer.
// 2-D factored tensors (nearly all parameters) run passes B and C in tiles, one column per thread
// (lo_core.h): 16 of the 28 features vary per element; the 12 built from R or C alone get their sums
// of squares from the R and C vectors (F2) and, in fast mode, their share of layer 1 per row / column.
//   exact: fp32 on CUDA cores, per element over flat chunks; weights in shared memory read 16 bytes at a
//          time (broadcast), inputs and hidden units staged per thread in shared memory so the loops stay
//          rolled (a fully unrolled 39-32-32-2 MLP does not fit the instruction cache, and its 9.6 KB of
//          weights thrash the constant cache).
//   fast:  tensor cores (mma.sync: layer 1 bf16, layers 2-3 fp16, fp32 accumulate), see sf_pass_c_fast;
//          tensors that are not tile2d (vectors, N-D; a tiny share) take the exact kernel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstddef>

#include "optim/lopt/lo_device.cuh"
#include "optim/lopt/small_fc_lopt.h"
#include "optim/ref/ref_lopt.h"
#include "optim/step_scalars.cuh"

namespace {
constexpr int kThreads = 256, kChunk = 4096, kF = 28;
// Per-step folded weights in `mlp_`: W0[:, :28] transposed (28 x 32) | b0 + W0[:, 28:] tau (32) |
// W1 transposed (32 x 32) | b1 (32) | W2 (2 x 32) | b2 (2)
constexpr int kW0 = 0, kB0 = 28 * 32, kW1 = kB0 + 32, kB1 = kW1 + 1024, kW2 = kB1 + 32, kB2 = kW2 + 64;
constexpr int kMlpFloats = kB2 + 2;

struct SfScalars {
  float grad_scale, lr;
};

// Counter, schedule, and this step's folded weights (one block).
__global__ void sf_begin(int64_t* step, double lr, LrSchedule sched, const float* gscale, const float* w, float* mlp,
                         float* scalars) {
  const int64_t t = *step;
  __shared__ float tau[11];
  if (threadIdx.x < 11) {
    const float T[11] = {1, 3, 10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000};
    tau[threadIdx.x] = tanhf(float(t) / T[threadIdx.x] - 1.0f);
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < 28 * 32; idx += blockDim.x) {
    const int k = idx / 32, o = idx % 32;
    mlp[kW0 + idx] = w[o * 39 + k];
  }
  if (threadIdx.x < 32) {
    const int o = threadIdx.x;
    float b = w[32 * 39 + o];
    for (int j = 0; j < 11; j++) b += w[o * 39 + 28 + j] * tau[j];
    mlp[kB0 + o] = b;
    mlp[kB1 + o] = w[32 * 39 + 32 + 1024 + o];
  }
  const float* w1 = w + 32 * 39 + 32;
  for (int idx = threadIdx.x; idx < 1024; idx += blockDim.x) mlp[kW1 + idx] = w1[(idx % 32) * 32 + idx / 32];
  for (int idx = threadIdx.x; idx < 66; idx += blockDim.x) mlp[kW2 + idx] = w[32 * 39 + 32 + 1024 + 32 + idx];
  __syncthreads();
  if (threadIdx.x == 0) {
    scalars[0] = read_grad_scale(gscale);
    scalars[1] = float(lr * sched.factor(t));
    *step = t + 1;
  }
}

// The 28 normalisable features (small_fc_lopt.md 3.5).
__device__ __forceinline__ void sf_features(const LoElem& e, float* x) {
  const float rho = rsqrtf(e.v + 1e-6f);
  x[0] = e.g;
  x[1] = e.p;
  x[2] = e.m[0], x[3] = e.m[1], x[4] = e.m[2];
  x[5] = e.v;
  x[6] = e.m[0] * rho, x[7] = e.m[1] * rho, x[8] = e.m[2] * rho;
  x[9] = rho;
#pragma unroll
  for (int k = 0; k < 3; k++) {
    x[10 + k] = e.g * e.sg[k];
    x[13 + k] = e.row[k];
    x[16 + k] = e.col[k];
    x[19 + k] = rsqrtf(e.row[k] + 1e-8f);
    x[22 + k] = rsqrtf(e.col[k] + 1e-8f);
    x[25 + k] = e.m[k] * e.sm[k];
  }
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Channel of the j-th of the 16 features that vary along both axes of a 2-D tensor: 0-12 and 25-27.
__host__ __device__ constexpr int sf_elem_ch(int j) { return j < 13 ? j : j + 12; }

// Those 16, from the gradient, the old parameter, the updated record {m0, m1, m2, v}, rho =
// rsqrt(v + 1e-6) and the Adafactor factor sg = rf * cf (small_fc_lopt.md 3.5; as sf_features).
__device__ __forceinline__ void sf_elem16(float g, float p, float4 st, float rho, const float* sg, float* x) {
  x[0] = g, x[1] = p;
  x[2] = st.x, x[3] = st.y, x[4] = st.z, x[5] = st.w;
  x[6] = st.x * rho, x[7] = st.y * rho, x[8] = st.z * rho;
  x[9] = rho;
  x[10] = g * sg[0], x[11] = g * sg[1], x[12] = g * sg[2];
  x[13] = st.x * sg[0], x[14] = st.y * sg[1], x[15] = st.z * sg[2];
}

// Pass B: moments, and per block the sums of squares of the features. Channels 13-24 of factored
// tensors are left to F2 (lo_side_sums).
__global__ void __launch_bounds__(kLoThreads) sf_pass_b(const LoWork* __restrict__ works, const LoTensor* __restrict__ ts,
                                                        const float* __restrict__ g, const float* __restrict__ p,
                                                        float4* __restrict__ state, float4* __restrict__ diag,
                                                        const float4* __restrict__ rrec, const float4* __restrict__ crec,
                                                        const float4* __restrict__ rfac, const float4* __restrict__ cfac,
                                                        double* __restrict__ partial, const float* __restrict__ sc, LoDecays d) {
  const LoWork w = works[blockIdx.x];
  const LoTensor t = ts[w.tensor];
  const float gs = sc[0];
  float acc[kF];
#pragma unroll
  for (int k = 0; k < kF; k++) acc[k] = 0.0f;
  if (w.tile) {
    const LoSides sd = lo_sides(t, rfac, cfac);
    const int64_t col = w.col0 + int(threadIdx.x);
    const float4 fb = col < t.nb ? sd.fac_b[col] : make_float4(0, 0, 0, 0);
    lo_tile_column<4>(w, t, g, p, state, [&](int64_t row, int64_t at, float gv, float pv, float4 st) {
      const float4 fa = sd.fac_a[row];
      const float sg[3] = {fa.x * fb.x, fa.y * fb.y, fa.z * fb.z};
      const float gg = gv * gs;
      st = lo_update_moments(st, gg, d);
      state[t.s_off + at] = st;
      float x[16];
      sf_elem16(gg, pv, st, rsqrtf(st.w + 1e-6f), sg, x);
#pragma unroll
      for (int j = 0; j < 16; j++) acc[sf_elem_ch(j)] += x[j] * x[j];
    });
  } else {
    const Chunk c{t.p_off + w.row0, t.s_off + w.row0, w.n, w.tensor};
    auto body = [&](int e, float gv, float pv, float4 st) {
      const int64_t i = w.row0 + e;
      LoElem el;
      el.g = gv * gs;
      el.p = pv;
      st = lo_update_moments(st, el.g, d);
      state[c.s_begin + e] = st;
      el.m[0] = st.x, el.m[1] = st.y, el.m[2] = st.z, el.v = st.w;
      if (!t.factored) diag[t.v_off + i] = lo_update_diag(diag[t.v_off + i], el.g, d);
      lo_gather<false>(t, i, rrec, crec, rfac, cfac, diag, el);
      float x[kF];
      sf_features(el, x);
#pragma unroll
      for (int k = 0; k < kF; k++)
        if (!t.factored || k < 13 || k > 24) acc[k] += x[k] * x[k];
    };
    lo_for_each_pair<kLoThreads>(c, g, p, state, body);
  }
  lo_block_sums<kF>(acc, partial + int64_t(blockIdx.x) * kF);
}

__global__ void __launch_bounds__(1024) sf_norms(const LoTensor* __restrict__ ts, const double* __restrict__ partial,
                                                 const float4* __restrict__ rrec, const float4* __restrict__ crec,
                                                 float* __restrict__ norm) {
  const LoTensor t = ts[blockIdx.x];
  __shared__ double S[kF], side[12];
  lo_tensor_sums<kF>(partial, t.work_begin, t.work_end, S);
  if (t.factored) {
    lo_side_sums(t, rrec, crec, side);
    if (threadIdx.x < 3) {
      const int k = threadIdx.x;
      S[13 + k] += side[k], S[16 + k] += side[3 + k], S[19 + k] += side[6 + k], S[22 + k] += side[9 + k];
    }
    __syncthreads();
  }
  if (threadIdx.x < kF) norm[blockIdx.x * 32 + threadIdx.x] = rsqrtf(1e-5f + float(S[threadIdx.x] / double(t.numel)));
}

// Fast mode, per step and tile2d tensor: the A side's (row) share of layer 1 including this step's bias
// b0', laid out as the accumulator fragments that start layer 1 (64 floats per row: float4 q * 4 + nt is
// {h[o], h[o + 1], h[o], h[o + 1]}, o = 8 nt + 2 q, so a lane loads its mma C operands as they are), and
// the B side's (column) 6 features {val_k, rsqrt(val_k + 1e-8)} as bf16, 2 zeros of padding.
// A side: a warp writes one row (coalesced), 8 rows at a time; B side: a thread per column.
__global__ void __launch_bounds__(256) sf_side(const LoSideItem* __restrict__ items, const LoTensor* __restrict__ ts,
                                               const float4* __restrict__ rrec, const float4* __restrict__ crec,
                                               const float* __restrict__ norm, const float* __restrict__ mlp,
                                               float* __restrict__ side_a, uint4* __restrict__ side_b) {
  const LoSideItem it = items[blockIdx.x];
  const LoTensor t = ts[it.tensor];
  const bool use_r = (it.side == 1) == lo_b_is_r(t);  // is this side's vector R?
  const int ch0 = use_r ? 13 : 16, ch1 = use_r ? 19 : 22;  // channels of val_k and of rsqrt(val_k + 1e-8)
  const float4* rec = use_r ? rrec + t.r_off : crec + t.c_off;
  const int64_t len = it.side ? t.nb : t.na;
  auto features = [&](int64_t e, float* f) {
    const float4 v = rec[e];
    f[0] = v.x, f[1] = v.y, f[2] = v.z;
    f[3] = rsqrtf(v.x + 1e-8f), f[4] = rsqrtf(v.y + 1e-8f), f[5] = rsqrtf(v.z + 1e-8f);
  };
  if (it.side == 1) {
    const int64_t e = it.first + threadIdx.x;
    if (e >= len) return;
    float f[6];
    features(e, f);
    side_b[t.side_b_off + e] = make_uint4(pack_bf16(f[0], f[1]), pack_bf16(f[2], f[3]), pack_bf16(f[4], f[5]), 0u);
    return;
  }
  // Thread pos of a warp writes float2 pos of the row: hidden units {o, o + 1}, o = 8 nt + 2 qq.
  const int pos = threadIdx.x % 32, qq = pos / 8, nt = (pos % 8) / 2, o = 8 * nt + 2 * qq;
  float wv[2][6];
  for (int j = 0; j < 6; j++) {
    const int ch = j < 3 ? ch0 + j : ch1 + j - 3;
    for (int u = 0; u < 2; u++) wv[u][j] = mlp[kW0 + ch * 32 + o + u] * norm[it.tensor * 32 + ch];
  }
  const float b0 = mlp[kB0 + o], b1 = mlp[kB0 + o + 1];
  for (int64_t e = it.first + threadIdx.x / 32; e < min(it.first + 256, len); e += 8) {
    float f[6];
    features(e, f);
    float a0 = b0, a1 = b1;
    for (int j = 0; j < 6; j++) a0 = fmaf(wv[0][j], f[j], a0), a1 = fmaf(wv[1][j], f[j], a1);
    reinterpret_cast<float2*>(side_a + (t.side_a_off + e) * 64)[pos] = make_float2(a0, a1);
  }
}

// The element's features and the parts of its update that do not depend on the MLP.
struct SfElem {
  float p, x[kF];
};
__device__ __forceinline__ void sf_load(const Chunk& c, const LoTensor& t, int e, const float* __restrict__ g,
                                        const float* __restrict__ p, const float4* __restrict__ state,
                                        const float4* __restrict__ diag, const float4* __restrict__ rrec,
                                        const float4* __restrict__ crec, const float4* __restrict__ rfac,
                                        const float4* __restrict__ cfac, float gs, SfElem& out) {
  LoElem el;
  el.g = g[c.p_begin + e] * gs;
  el.p = p[c.p_begin + e];
  const float4 st = state[c.s_begin + e];
  el.m[0] = st.x, el.m[1] = st.y, el.m[2] = st.z, el.v = st.w;
  lo_gather<false>(t, c.p_begin - t.p_off + e, rrec, crec, rfac, cfac, diag, el);
  out.p = el.p;
  sf_features(el, out.x);
}

__device__ __forceinline__ void sf_store(float* __restrict__ p, __nv_bfloat16* __restrict__ pb, int64_t at, float p0, float dir,
                                         float mag, float lr, float wd, float exp_mult, float step_mult) {
  const float u = dir * expf(mag * exp_mult) * step_mult;
  float pn = p0 - lr * u;
  if (wd > 0) pn -= wd * lr * pn;
  p[at] = pn;
  if (pb) pb[at] = __float2bfloat16_rn(pn);
}

// h[0..32) += sum_k w[k][0..32) * x[k * kThreads]: weights 16 bytes at a time, the input loop rolled.
__device__ __forceinline__ void sf_dense32(float* h, const float4* w, const float* x, int n_in) {
#pragma unroll 2
  for (int k = 0; k < n_in; k++) {
    const float xk = x[k * kThreads];
#pragma unroll
    for (int q = 0; q < 8; q++) {
      const float4 wq = w[k * 8 + q];
      h[4 * q] = fmaf(wq.x, xk, h[4 * q]);
      h[4 * q + 1] = fmaf(wq.y, xk, h[4 * q + 1]);
      h[4 * q + 2] = fmaf(wq.z, xk, h[4 * q + 2]);
      h[4 * q + 3] = fmaf(wq.w, xk, h[4 * q + 3]);
    }
  }
}

// Exact: fp32 MLP on CUDA cores.
__global__ void __launch_bounds__(kThreads, 2) sf_pass_c_exact(const Chunk* __restrict__ chunks, const LoTensor* __restrict__ ts,
                                                            const float* __restrict__ g, float* __restrict__ p,
                                                            __nv_bfloat16* __restrict__ pb, const float4* __restrict__ state,
                                                            const float4* __restrict__ diag, const float4* __restrict__ rrec,
                                                            const float4* __restrict__ crec, const float4* __restrict__ rfac,
                                                            const float4* __restrict__ cfac, const float* __restrict__ norm,
                                                            const float* __restrict__ mlp, const float* __restrict__ sc,
                                                            float exp_mult, float step_mult, float wd) {
  __shared__ float4 w0[28 * 8], w1[32 * 8];  // row k: the 32 weights leaving input (hidden unit) k
  __shared__ float b0[32], b1[32], w2[66];
  __shared__ float xs[32][kThreads];         // per thread: inputs, then hidden units
  const Chunk c = chunks[blockIdx.x];
  const LoTensor t = ts[c.tensor];
  for (int idx = threadIdx.x; idx < 28 * 32; idx += kThreads)
    reinterpret_cast<float*>(w0)[idx] = mlp[kW0 + idx] * norm[c.tensor * 32 + idx / 32];
  for (int idx = threadIdx.x; idx < 1024; idx += kThreads) reinterpret_cast<float*>(w1)[idx] = mlp[kW1 + idx];
  if (threadIdx.x < 32) b0[threadIdx.x] = mlp[kB0 + threadIdx.x], b1[threadIdx.x] = mlp[kB1 + threadIdx.x];
  if (threadIdx.x < 66) w2[threadIdx.x] = mlp[kW2 + threadIdx.x];
  __syncthreads();
  const float gs = sc[0], lr = sc[1] * t.scale, wdf = t.decay ? wd : 0.0f;
  float* x = &xs[0][threadIdx.x];  // x[k * kThreads]
  for (int e = threadIdx.x; e < c.n; e += kThreads) {
    SfElem el;
    sf_load(c, t, e, g, p, state, diag, rrec, crec, rfac, cfac, gs, el);
#pragma unroll
    for (int k = 0; k < kF; k++) x[k * kThreads] = el.x[k];
    float h[32];
#pragma unroll
    for (int o = 0; o < 32; o++) h[o] = b0[o];
    sf_dense32(h, w0, x, kF);
#pragma unroll
    for (int o = 0; o < 32; o++) x[o * kThreads] = fmaxf(h[o], 0.0f), h[o] = b1[o];
    sf_dense32(h, w1, x, 32);
    float dir = w2[64], mag = w2[65];
#pragma unroll
    for (int k = 0; k < 32; k++) {
      const float a = fmaxf(h[k], 0.0f);
      dir = fmaf(w2[k], a, dir);
      mag = fmaf(w2[32 + k], a, mag);
    }
    sf_store(p, pb, c.p_begin + e, el.p, dir, mag, lr, wdf, exp_mult, step_mult);
  }
}

// ---- fast pass C: the MLP on tensor cores -----------------------------------------------------------------
// A warp runs down one 32-column strip of a tile, one row (32 elements) per step, as two m16 tiles:
//   layer 1: H = X16 W0e (m16n8k16, the 16 per-element features) + Xb W0s (m16n8k8, the B side's 6
//            features: constant down the strip, so their A fragments stay in registers) + the A side's
//            share and b0' as the accumulator's initial value (fp32, loaded per row as it is used).
//            bf16: raw features span far more than fp16's range (the normalisers sit in W0);
//   layer 2: relu(H) packed to fp16 is already the A operand of the next mma (the accumulator layout of
//            m16n8 equals the A layout of m16k16), so hidden units never leave registers. fp16 (hidden
//            units and W1, W2 are of order 1) has 8x less rounding than bf16: about half the error;
//   layer 3: N = 8 of which 2 are used (direction, magnitude), fp16 likewise.
// Features are computed with one element per lane and reach the mma layout through 32 bytes of shared
// memory per element (ldmatrix). g, p, the record and the row's side data are prefetched kStages - 1 rows
// ahead with cp.async, so the loads stay in flight while the tensor cores work without holding registers.
// Per row and warp: 44 mma, ~200 other instructions; the kernel is bound by issue and latency (4 warps a
// scheduler at 128 registers), not by its 28 B/param (H100, GPT-2 355M: ~60% of DRAM bandwidth).
constexpr int kThreadsC = 128, kStages = 4, kLdX = 12;  // kLdX: 48-byte feature rows, no bank conflicts
constexpr int kFragWords = 32, kLdFrag = 36;           // per lane: W0e 8 | W0s 4 | W1 16 | W2 4

__device__ __forceinline__ uint32_t pack_f16(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
// relu, then fp16 saturated to +-65504 (a hidden unit past fp16's range stays finite).
__device__ __forceinline__ uint32_t pack_f16_relu(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.satfinite.relu.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// D = A B + C on m16n8k16 tiles, fp32 accumulate; kF16: fp16 operands, else bf16.
template <bool kF16>
__device__ __forceinline__ float4 mma16816(const uint32_t* a, uint32_t b0, uint32_t b1, float4 c) {
  float4 d;
  if (kF16)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
        : "=f"(d.x), "=f"(d.y), "=f"(d.z), "=f"(d.w)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c.x), "f"(c.y), "f"(c.z), "f"(c.w));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
        : "=f"(d.x), "=f"(d.y), "=f"(d.z), "=f"(d.w)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c.x), "f"(c.y), "f"(c.z), "f"(c.w));
  return d;
}
template <bool kF16>
__device__ __forceinline__ float4 mma1688(uint32_t a0, uint32_t a1, uint32_t b, float4 c) {
  float4 d;
  if (kF16)
    asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};"
        : "=f"(d.x), "=f"(d.y), "=f"(d.z), "=f"(d.w)
        : "r"(a0), "r"(a1), "r"(b), "f"(c.x), "f"(c.y), "f"(c.z), "f"(c.w));
  else
    asm("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};"
        : "=f"(d.x), "=f"(d.y), "=f"(d.z), "=f"(d.w)
        : "r"(a0), "r"(a1), "r"(b), "f"(c.x), "f"(c.y), "f"(c.z), "f"(c.w));
  return d;
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, const void* row) {
  const uint32_t a = uint32_t(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory"); }

// Word w of lane (r = lane / 4, q = lane % 4)'s B fragments: two 16-bit values, lower k first (layer 1
// bf16, layers 2 and 3 fp16). m16n8k16 holds k = {2q, 2q+1} and {2q+8, 2q+9} at n = r, m16n8k8 k = {2q, 2q+1}.
// W0n = W0 with the tensor's normalisers.
__device__ __forceinline__ float sf_w0n(const float* mlp, const float* nrm, int ch, int o) {
  return mlp[kW0 + ch * 32 + o] * nrm[ch];
}
__device__ uint32_t sf_frag_word(int lane, int w, const float* mlp, const float* nrm, bool b_is_r) {
  const int r = lane / 4, q = lane % 4;
  if (w < 8) {  // W0e: nt = w / 2, k = 2q (+8) over the 16 per-element features
    const int o = 8 * (w / 2) + r, k = 2 * q + 8 * (w % 2);
    return pack_bf16(sf_w0n(mlp, nrm, sf_elem_ch(k), o), sf_w0n(mlp, nrm, sf_elem_ch(k + 1), o));
  }
  if (w < 12) {  // W0s: nt = w - 8, k = 2q over the B side's {val0..2, rs0..2, 0, 0}
    const int o = 8 * (w - 8) + r, k = 2 * q;
    auto ch = [&](int s) { return s < 3 ? (b_is_r ? 13 : 16) + s : (b_is_r ? 19 : 22) + s - 3; };
    return k < 6 ? pack_bf16(sf_w0n(mlp, nrm, ch(k), o), sf_w0n(mlp, nrm, ch(k + 1), o)) : 0u;
  }
  if (w < 28) {  // W1: (ks * 4 + nt) * 2 + half; mlp holds W1 transposed: [k][o]
    const int v = w - 12, ks = v / 8, nt = (v / 2) % 4, o = 8 * nt + r, k = 16 * ks + 2 * q + 8 * (v % 2);
    return pack_f16(mlp[kW1 + k * 32 + o], mlp[kW1 + (k + 1) * 32 + o]);
  }
  const int v = w - 28, k = 16 * (v / 2) + 2 * q + 8 * (v % 2);  // W2: n = r is the output (0 dir, 1 mag)
  return r < 2 ? pack_f16(mlp[kW2 + r * 32 + k], mlp[kW2 + r * 32 + k + 1]) : 0u;
}

// cp.async of 4, 8 or 16 bytes from a global to a shared address; pred false: zero-fill, nothing is read.
template <int kBytes>
__device__ __forceinline__ void cp_async_raw(uint32_t dst, size_t src, bool pred) {
  if (kBytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(pred ? 16 : 0) : "memory");
  else if (kBytes == 8)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(dst), "l"(src), "r"(pred ? 8 : 0) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(pred ? 4 : 0) : "memory");
}
// Fast mode's MUFU forms (ftz; the inputs here are never denormal, and the results are rounded to 16 bits).
__device__ __forceinline__ float rsqrt_approx(float x) {
  float y;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// One row (32 elements) of a strip in shared memory, filled by cp.async kStages - 1 rows ahead.
struct SfStage {
  float4 st[32];       // records {m0, m1, m2, v}
  float g[32], p[32];  // gradient, parameter
  float4 ha[16];       // the row's A-side share of layer 1 (accumulator order, see sf_side)
  float4 fa;           // the row's A-side Adafactor factor
};
struct SfWarpSmem {
  SfStage stage[kStages];
  uint32_t x[32][kLdX];  // bf16 pairs of the 16 features, one row per element
  float2 out[32];        // direction, magnitude
};

// 4 warps a block; warp w takes strips w and w + 4 of the tile. Weights (32 fragment words a lane) and
// biases stay in registers for the whole block.
__global__ void __launch_bounds__(kThreadsC, 4) sf_pass_c_fast(const LoWork* __restrict__ works, const LoTensor* __restrict__ ts,
                                                               const float* __restrict__ g, float* __restrict__ p,
                                                               __nv_bfloat16* __restrict__ pb, const float4* __restrict__ state,
                                                               const float4* __restrict__ rfac, const float4* __restrict__ cfac,
                                                               const float* __restrict__ side_a,
                                                               const uint32_t* __restrict__ side_b,
                                                               const float* __restrict__ norm, const float* __restrict__ mlp,
                                                               const float* __restrict__ sc, float exp_mult, float step_mult,
                                                               float wd) {
  __shared__ __align__(16) uint32_t frag[32][kLdFrag];
  __shared__ __align__(16) SfWarpSmem sw[kThreadsC / 32];
  const LoWork w = works[blockIdx.x];
  if (!w.tile) return;  // flat work: sf_pass_c_exact over flat_chunks
  const LoTensor t = ts[w.tensor];
  for (int idx = threadIdx.x; idx < 32 * kFragWords; idx += kThreadsC)
    frag[idx / kFragWords][idx % kFragWords] =
        sf_frag_word(idx / kFragWords, idx % kFragWords, mlp, norm + w.tensor * 32, lo_b_is_r(t));
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 4, q = lane % 4;
  uint32_t wf[kFragWords];
#pragma unroll
  for (int k = 0; k < kFragWords / 4; k++) {
    const uint4 v = reinterpret_cast<const uint4*>(frag[lane])[k];
    wf[4 * k] = v.x, wf[4 * k + 1] = v.y, wf[4 * k + 2] = v.z, wf[4 * k + 3] = v.w;
  }
  // Layer 2's bias enters as one more k8 mma, ones (k = 0) times b1 (fp16): a C operand of {b, b', b, b'}
  // would cost register copies on every row, the tensor pipe has room.
  const uint32_t ones = q == 0 ? pack_f16(1.0f, 0.0f) : 0u;
  uint32_t b1f[4];
#pragma unroll
  for (int nt = 0; nt < 4; nt++) b1f[nt] = q == 0 ? pack_f16(mlp[kB1 + 8 * nt + r], 0.0f) : 0u;
  const float b2d = q == 0 ? mlp[kB2] : 0.0f, b2m = q == 0 ? mlp[kB2 + 1] : 0.0f;
  const float gs = sc[0], lr = sc[1] * t.scale, wdf = t.decay ? wd : 0.0f;
  const float mag2 = exp_mult * 1.44269504f;  // exp(m * exp_mult) = exp2(m * mag2)
  const float4 b2c = make_float4(b2d, b2m, b2d, b2m);
  const LoSides sd = lo_sides(t, rfac, cfac);
  SfWarpSmem& ws = sw[warp];
  const uint32_t stage0 = uint32_t(__cvta_generic_to_shared(&ws.stage[0]));
  const int nb = int(t.nb);

  for (int strip = warp; strip < kTileCols / 32; strip += kThreadsC / 32) {
    const int64_t col0 = w.col0 + 32 * strip, col = col0 + lane;
    if (col0 >= t.nb) break;
    const bool live = col < t.nb;
    // Down the strip: the column's B-side factor (lane = element) and the B-side features' A fragments.
    const float4 fb = live ? sd.fac_b[col] : make_float4(0, 0, 0, 0);
    uint32_t xb[2][2];
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int64_t c = col0 + 16 * mt + 8 * h + r;
        xb[mt][h] = c < t.nb ? side_b[(t.side_b_off + c) * 4 + q] : 0u;
      }
    // Row i of the strip: element at0 + i * nb (dead lanes read a live column and store nothing).
    const int64_t at0 = w.row0 * t.nb + (live ? col : col0);
    // Sources of the next row to prefetch, advanced one row per call.
    size_t src_g = __cvta_generic_to_global(g + t.p_off + at0), src_p = __cvta_generic_to_global(p + t.p_off + at0);
    size_t src_s = __cvta_generic_to_global(state + t.s_off + at0);
    size_t src_h = __cvta_generic_to_global(side_a + (t.side_a_off + w.row0) * 64 + 2 * lane);
    size_t src_f = __cvta_generic_to_global(sd.fac_a + w.row0);
    const size_t row_bytes = size_t(nb) * 4;
    int next = 0;
    auto prefetch = [&]() {  // the next row into stage next % kStages
      if (next < w.n) {
        const uint32_t d = stage0 + uint32_t(next % kStages) * uint32_t(sizeof(SfStage));
        cp_async_raw<4>(d + offsetof(SfStage, g) + 4 * lane, src_g, live);
        cp_async_raw<4>(d + offsetof(SfStage, p) + 4 * lane, src_p, live);
        cp_async_raw<16>(d + offsetof(SfStage, st) + 16 * lane, src_s, live);
        cp_async_raw<8>(d + offsetof(SfStage, ha) + 8 * lane, src_h, true);
        if (lane == 0) cp_async_raw<16>(d + offsetof(SfStage, fa), src_f, true);
        src_g += row_bytes, src_p += row_bytes, src_s += 4 * row_bytes, src_h += 256, src_f += 16;
      }
      next++;
      cp_async_commit();
    };
    float* pdst = p + t.p_off + at0;
    __nv_bfloat16* bdst = pb ? pb + t.p_off + at0 : nullptr;
    __syncwarp();  // the previous strip's last reads of the stages are done
#pragma unroll
    for (int i = 0; i < kStages - 1; i++) prefetch();
    for (int i = 0; i < w.n; i++) {
      prefetch();
      cp_async_wait<kStages - 1>();
      __syncwarp();
      const SfStage& st = ws.stage[i % kStages];
      const float gv = st.g[lane] * gs, pv = st.p[lane];
      const float4 rec = st.st[lane], fa = st.fa;
      const float4 hc[4] = {st.ha[4 * q], st.ha[4 * q + 1], st.ha[4 * q + 2], st.ha[4 * q + 3]};
      {  // this lane's element: 16 features -> bf16 row of the staging tile
        const float sg[3] = {fa.x * fb.x, fa.y * fb.y, fa.z * fb.z};
        float x[16];
        sf_elem16(gv, pv, rec, rsqrt_approx(rec.w + 1e-6f), sg, x);
        uint4* xr = reinterpret_cast<uint4*>(ws.x[lane]);
        xr[0] = make_uint4(pack_bf16(x[0], x[1]), pack_bf16(x[2], x[3]), pack_bf16(x[4], x[5]), pack_bf16(x[6], x[7]));
        xr[1] = make_uint4(pack_bf16(x[8], x[9]), pack_bf16(x[10], x[11]), pack_bf16(x[12], x[13]), pack_bf16(x[14], x[15]));
      }
      __syncwarp();
      uint32_t a[2][4];
      ldmatrix_x4(a[0], &ws.x[lane % 16][(lane / 16) * 4]);
      ldmatrix_x4(a[1], &ws.x[16 + lane % 16][(lane / 16) * 4]);
#pragma unroll
      for (int mt = 0; mt < 2; mt++) {
        float4 h[4];
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
          h[nt] = mma16816<false>(a[mt], wf[2 * nt], wf[2 * nt + 1], hc[nt]);
          h[nt] = mma1688<false>(xb[mt][0], xb[mt][1], wf[8 + nt], h[nt]);
        }
        uint32_t a2[2][4];
#pragma unroll
        for (int ks = 0; ks < 2; ks++) {
          a2[ks][0] = pack_f16_relu(h[2 * ks].x, h[2 * ks].y);
          a2[ks][1] = pack_f16_relu(h[2 * ks].z, h[2 * ks].w);
          a2[ks][2] = pack_f16_relu(h[2 * ks + 1].x, h[2 * ks + 1].y);
          a2[ks][3] = pack_f16_relu(h[2 * ks + 1].z, h[2 * ks + 1].w);
        }
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
          h[nt] = mma1688<true>(ones, ones, b1f[nt], make_float4(0, 0, 0, 0));
          h[nt] = mma16816<true>(a2[0], wf[12 + 2 * nt], wf[12 + 2 * nt + 1], h[nt]);
          h[nt] = mma16816<true>(a2[1], wf[20 + 2 * nt], wf[20 + 2 * nt + 1], h[nt]);
        }
#pragma unroll
        for (int ks = 0; ks < 2; ks++) {
          a2[ks][0] = pack_f16_relu(h[2 * ks].x, h[2 * ks].y);
          a2[ks][1] = pack_f16_relu(h[2 * ks].z, h[2 * ks].w);
          a2[ks][2] = pack_f16_relu(h[2 * ks + 1].x, h[2 * ks + 1].y);
          a2[ks][3] = pack_f16_relu(h[2 * ks + 1].z, h[2 * ks + 1].w);
        }
        float4 dm = mma16816<true>(a2[0], wf[28], wf[29], b2c);
        dm = mma16816<true>(a2[1], wf[30], wf[31], dm);
        if (q == 0) ws.out[16 * mt + r] = make_float2(dm.x, dm.y), ws.out[16 * mt + 8 + r] = make_float2(dm.z, dm.w);
      }
      __syncwarp();
      const float2 o = ws.out[lane];
      if (live) {  // p -= lr * dir * exp(exp_mult * mag) * step_mult, then decoupled weight decay
        float pn = pv - lr * (o.x * exp2_approx(o.y * mag2) * step_mult);
        if (wdf > 0) pn -= wdf * lr * pn;
        pdst[i * nb] = pn;
        if (bdst) bdst[i * nb] = __float2bfloat16_rn(pn);
      }
    }
    cp_async_wait<0>();
  }
}
}  // namespace

SmallFcLopt::SmallFcLopt(Arena& arena, const OptimOptions& opts, const SmallFcWeights& w)
    : Optimizer(arena, opts), core_(arena, parse_tie_rule(opts.small_fc.tie), opts.small_fc.mup, kChunk) {
  SmallFcDecays sd = small_fc_decays();
  for (int k = 0; k < 3; k++) dec_.m[k] = sd.m[k], dec_.f[k] = sd.f[k];
  dec_.v = sd.v;
  std::vector<float> all;
  for (const auto* v : {&w.w0, &w.b0, &w.w1, &w.b1, &w.w2, &w.b2}) all.insert(all.end(), v->begin(), v->end());
  CHECK(all.size() == 2402);
  weights_.alloc(all.size(), "small_fc_lopt weights");
  weights_.upload(all);
  mlp_.alloc(kMlpFloats, "small_fc_lopt folded weights");
  partial_.alloc(core_.work.size() * kF, "small_fc_lopt partial sums");
  norm_.alloc(size_t(core_.n_tensors) * 32, "small_fc_lopt normalisers");
  scalars_.alloc(2, "small_fc_lopt scalars");
  if (opts.small_fc.fast) {
    side_a_.alloc(size_t(core_.side_a_len) * 64, "small_fc_lopt row-side layer-1 shares");
    side_b_.alloc(size_t(core_.side_b_len), "small_fc_lopt column-side features");
  }
}

void SmallFcLopt::step(const StepInfo& info, cudaStream_t s) {
  const SmallFcOptions& h = opts_.small_fc;
  sf_begin<<<1, 256, 0, s>>>(d_step_.get(), h.lr, opts_.schedule, info.d_grad_scale, weights_.get(), mlp_.get(), scalars_.get());
  CUDA_CHECK_LAUNCH();
  core_.factor_passes(scalars_.get(), 0.0f, dec_, s);
  const unsigned nw = unsigned(core_.work.size());
  sf_pass_b<<<nw, kLoThreads, 0, s>>>(core_.work.get(), core_.tensors.get(), arena_.grads(), arena_.params(), core_.state.get(),
                                      core_.diag.get(), core_.rrec.get(), core_.crec.get(), core_.rfac.get(), core_.cfac.get(),
                                      partial_.get(), scalars_.get(), dec_);
  CUDA_CHECK_LAUNCH();
  sf_norms<<<unsigned(core_.n_tensors), 1024, 0, s>>>(core_.tensors.get(), partial_.get(), core_.rrec.get(), core_.crec.get(),
                                                       norm_.get());
  CUDA_CHECK_LAUNCH();
  // Exact: every tensor per element. Fast: tile2d tensors on tensor cores, the rest (vectors, N-D) exact.
  const Chunk* exact_chunks = h.fast ? core_.flat_chunks.get() : core_.chunks.get();
  const unsigned n_exact = unsigned(h.fast ? core_.flat_chunks.size() : core_.chunks.size());
  if (h.fast && core_.side_items.size()) {
    sf_side<<<unsigned(core_.side_items.size()), 256, 0, s>>>(core_.side_items.get(), core_.tensors.get(), core_.rrec.get(),
                                                             core_.crec.get(), norm_.get(), mlp_.get(), side_a_.get(),
                                                             side_b_.get());
    CUDA_CHECK_LAUNCH();
    sf_pass_c_fast<<<nw, kThreadsC, 0, s>>>(core_.work.get(), core_.tensors.get(), arena_.grads(), arena_.params(),
                                            arena_.params_bf16(), core_.state.get(), core_.rfac.get(), core_.cfac.get(),
                                            side_a_.get(), reinterpret_cast<const uint32_t*>(side_b_.get()), norm_.get(),
                                            mlp_.get(), scalars_.get(), float(h.exp_mult), float(h.step_mult),
                                            float(h.weight_decay));
    CUDA_CHECK_LAUNCH();
  }
  if (n_exact) {
    sf_pass_c_exact<<<n_exact, kThreads, 0, s>>>(exact_chunks, core_.tensors.get(), arena_.grads(), arena_.params(),
                                                 arena_.params_bf16(), core_.state.get(), core_.diag.get(), core_.rrec.get(),
                                                 core_.crec.get(), core_.rfac.get(), core_.cfac.get(), norm_.get(), mlp_.get(),
                                                 scalars_.get(), float(h.exp_mult), float(h.step_mult), float(h.weight_decay));
    CUDA_CHECK_LAUNCH();
  }
}

std::vector<Optimizer::StateBuffer> SmallFcLopt::state_buffers() const {
  return {{"lopt.moments", core_.state.get(), core_.state.bytes()},
          {"lopt.vector_factors", core_.diag.get(), core_.diag.bytes()},
          {"lopt.R", core_.rrec.get(), core_.rrec.bytes()},
          {"lopt.C", core_.crec.get(), core_.crec.bytes()}};
}

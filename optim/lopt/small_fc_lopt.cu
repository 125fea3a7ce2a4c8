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
//          tensors that are not tile2d (vectors, N-D; a tiny share) take the exact MLP in the first blocks
//          of the same launch.
// ELO (celo2.md 8) runs these passes with the template flag kElo: its gradient (SfGrad) and its step
// (sf_store, the end of sf_pass_c_fast) differ; everything else is small_fc_lopt's, instruction for
// instruction, and small_fc_lopt's kernels (kElo false) compile to what they were without the flag.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstddef>

#include "optim/lopt/lo_element.cuh"
#include "optim/lopt/small_fc_lopt.h"
#include "optim/ref/ref_lopt.h"
#include "optim/step_scalars.cuh"

namespace {
constexpr int kThreads = 256, kChunk = 4096;  // exact pass C: a block of 256 threads takes 4096 elements
constexpr int kF = 28;                        // normalised features (the 11 time features are folded)
constexpr int kLead = 13;                     // features before the 12 side ones (lo_element.cuh)
constexpr int kNormLd = 32;                   // floats per tensor in norm_: its 28 normalisers, padded
// The published weights as uploaded (torch nn.Linear, (out, in) row-major): W0 (32 x 39) | b0 (32) |
// W1 (32 x 32) | b1 (32) | W2 (2 x 32) | b2 (2).
constexpr int kSrcW0 = 0, kSrcB0 = 32 * 39, kSrcW1 = kSrcB0 + 32, kSrcB1 = kSrcW1 + 1024, kSrcW2 = kSrcB1 + 32;
// Per-step folded weights in `mlp_`: W0[:, :28] transposed (28 x 32) | b0 + W0[:, 28:] tau (32) |
// W1 transposed (32 x 32) | b1 (32) | W2 (2 x 32) | b2 (2)
constexpr int kW0 = 0, kB0 = 28 * 32, kW1 = kB0 + 32, kB1 = kW1 + 1024, kW2 = kB1 + 32, kB2 = kW2 + 64;
constexpr int kMlpFloats = kB2 + 2;

// Counter, schedule, and this step's folded weights (one block).
__global__ void sf_begin(int64_t* step, double lr, LrSchedule sched, const float* gscale, const float* w, float* mlp,
                         SfScalars* scalars) {
  const int64_t t = *step;
  __shared__ float tau[11];
  if (threadIdx.x < 11) {
    const float T[11] = {1, 3, 10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000};
    tau[threadIdx.x] = tanhf(float(t) / T[threadIdx.x] - 1.0f);
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < 28 * 32; idx += blockDim.x) {
    const int k = idx / 32, o = idx % 32;
    mlp[kW0 + idx] = w[kSrcW0 + o * 39 + k];
  }
  if (threadIdx.x < 32) {
    const int o = threadIdx.x;
    float b = w[kSrcB0 + o];
    for (int j = 0; j < 11; j++) b += w[kSrcW0 + o * 39 + 28 + j] * tau[j];
    mlp[kB0 + o] = b;
    mlp[kB1 + o] = w[kSrcB1 + o];
  }
  for (int idx = threadIdx.x; idx < 1024; idx += blockDim.x) mlp[kW1 + idx] = w[kSrcW1 + (idx % 32) * 32 + idx / 32];
  for (int idx = threadIdx.x; idx < 66; idx += blockDim.x) mlp[kW2 + idx] = w[kSrcW2 + idx];  // W2 and b2
  __syncthreads();
  if (threadIdx.x == 0) {
    scalars->grad_scale = read_grad_scale(gscale);
    scalars->lr = float(lr * sched.factor(t));
    *step = t + 1;
  }
}

// The gradient the element passes see: small_fc_lopt g * scale; ELO nan_to_num((g * scale) * clip)
// (celo2.md 8, E2), as LoCore::factor_passes_nan_to_num.
template <bool kElo>
struct SfGrad {
  float gs, clip;
  __device__ __forceinline__ float operator()(float g) const { return kElo ? lo_nan_to_num(g * gs * clip) : g * gs; }
};
template <bool kElo>
__device__ __forceinline__ SfGrad<kElo> sf_grad(const SfScalars* sc) {
  return {sc->grad_scale, kElo ? sc->clip : 1.0f};
}

// The 28 normalisable features (small_fc_lopt.md 3.5).
__device__ __forceinline__ void sf_features(const LoElem& e, float* x) {
  const float rho = rsqrtf(e.v + 1e-6f);
  x[0] = e.g;
  x[1] = e.p;
  x[2] = e.m[0];
  x[3] = e.m[1];
  x[4] = e.m[2];
  x[5] = e.v;
  x[6] = e.m[0] * rho;
  x[7] = e.m[1] * rho;
  x[8] = e.m[2] * rho;
  x[9] = rho;
  lo_factor_features<10, kLead>(e, x);
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// The 16 features that vary along both axes of a 2-D tensor (channels 0-12 and 25-27), from the gradient, the old
// parameter, the updated record {m0, m1, m2, v}, rho = rsqrt(v + 1e-6) and the Adafactor factor sg = rf * cf
// (small_fc_lopt.md 3.5; as sf_features).
__device__ __forceinline__ void sf_elem16(float g, float p, float4 st, float rho, const float* sg, float* x) {
  x[0] = g;
  x[1] = p;
  x[2] = st.x;
  x[3] = st.y;
  x[4] = st.z;
  x[5] = st.w;
  x[6] = st.x * rho;
  x[7] = st.y * rho;
  x[8] = st.z * rho;
  x[9] = rho;
  x[10] = g * sg[0];
  x[11] = g * sg[1];
  x[12] = g * sg[2];
  x[13] = st.x * sg[0];
  x[14] = st.y * sg[1];
  x[15] = st.z * sg[2];
}

// Pass B: moments, and per block the sums of squares of the features. Channels 13-24 of factored
// tensors are left to F2 (lo_side_sums).
struct SfPassB {
  const LoWork* works;  // one block each
  const LoTensor* ts;
  const float* g;
  const float* p;
  float4* state;  // {m0, m1, m2, v}, updated
  float4* diag;   // vectors' {V0, V1, V2}, updated
  const float4* rrec;
  const float4* crec;
  const float4* rfac;
  const float4* cfac;
  double* partial;  // per work item: kF sums of squares
  const SfScalars* sc;
  LoDecays d;
};
template <bool kElo>
__global__ void __launch_bounds__(kLoThreads) sf_pass_b(const SfPassB a) {
  // __restrict__ copies of the pointers (lo_core.h: kernel arguments)
  const LoWork* __restrict__ works = a.works;
  const LoTensor* __restrict__ ts = a.ts;
  const float* __restrict__ g = a.g;
  const float* __restrict__ p = a.p;
  float4* __restrict__ state = a.state;
  float4* __restrict__ diag = a.diag;
  const float4* __restrict__ rrec = a.rrec;
  const float4* __restrict__ crec = a.crec;
  const float4* __restrict__ rfac = a.rfac;
  const float4* __restrict__ cfac = a.cfac;
  double* __restrict__ partial = a.partial;
  const SfScalars* __restrict__ sc = a.sc;
  const LoDecays& d = a.d;
  const LoWork w = works[blockIdx.x];
  const LoTensor t = ts[w.tensor];
  const SfGrad<kElo> gr = sf_grad<kElo>(sc);
  float acc[kF];
#pragma unroll
  for (int k = 0; k < kF; k++) acc[k] = 0.0f;
  if (w.tile) {
    const LoSides sd = lo_sides(t, rfac, cfac);
    const int64_t col = w.col0 + int(threadIdx.x);
    const float4 fb = col < t.nb ? sd.fac_b[col] : make_float4(0, 0, 0, 0);
    lo_tile_column<4>(w, t, g, p, state, [&](int64_t row, int64_t at, float gv, float pv, float4 st) {
      float sg[3];
      lo_tile_sg(sd.fac_a[row], fb, sg);
      const float gg = gr(gv);
      st = lo_step_record(state, t.s_off + at, st, gg, d);
      float x[16];
      sf_elem16(gg, pv, st, rsqrtf(st.w + 1e-6f), sg, x);
      lo_add_squares_tile<kLead, 16>(x, acc);
    });
  } else {
    const Chunk c{t.p_off + w.row0, t.s_off + w.row0, w.n, w.tensor};
    const LoFactorView fv{rrec, crec, rfac, cfac, diag};
    auto body = [&](int e, float gv, float pv, float4 st) {
      const int64_t i = w.row0 + e;
      LoElem el;
      lo_flat_step<false>(t, i, gr(gv), pv, st, state, c.s_begin + e, diag, fv, d, el);
      float x[kF];
      sf_features(el, x);
      lo_add_squares_flat<kLead, kF>(x, t.factored, acc);
    };
    lo_for_each_pair<kLoThreads>(c, g, p, state, body);
  }
  lo_block_sums<kF>(acc, partial + int64_t(blockIdx.x) * kF);
}

__global__ void __launch_bounds__(1024)
    sf_norms(const LoTensor* __restrict__ ts, const double* __restrict__ partial, const float4* __restrict__ rrec,
             const float4* __restrict__ crec, float* __restrict__ norm) {
  const LoTensor t = ts[blockIdx.x];
  __shared__ double S[kF], side[12], part[32][kF + 1];
  {  // S = sums of the work items' partials in a fixed order: 32 strides x 32 channel lanes (28 used),
     // 8 loads in flight per thread (the embedding has thousands of items: latency, not bandwidth).
     // Not lo_tensor_sums (VeLO's 38 channels: 16 strides x 64 lanes): another tree, other roundings.
    const int c = threadIdx.x % 32, j = threadIdx.x / 32;
    if (c < kF) {
      double s8[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int it = t.work_begin + j;
      for (; it + 7 * 32 < t.work_end; it += 8 * 32)
#pragma unroll
        for (int u = 0; u < 8; u++) s8[u] += partial[int64_t(it + 32 * u) * kF + c];
      for (; it < t.work_end; it += 32) s8[0] += partial[int64_t(it) * kF + c];
      part[j][c] = ((s8[0] + s8[1]) + (s8[2] + s8[3])) + ((s8[4] + s8[5]) + (s8[6] + s8[7]));
    }
    __syncthreads();
    if (threadIdx.x < kF) {
      double tot = 0;
      for (int k = 0; k < 32; k++) tot += part[k][threadIdx.x];
      S[threadIdx.x] = tot;
    }
    __syncthreads();
  }
  if (t.factored) lo_add_side_sums<kLead>(t, rrec, crec, side, S);
  if (threadIdx.x < kF) norm[blockIdx.x * kNormLd + threadIdx.x] = lo_normaliser(S[threadIdx.x], double(t.numel));
}

constexpr int kSideWords = 36;  // fast mode: words per row of the A-side table
// Fast mode, per step and tile2d tensor: the A side's (row) share of layer 1 including this step's bias
// b0', and the B side's (column) 6 features {val_k, rsqrt(val_k + 1e-8)} as bf16 followed by the pair
// (1, 1). Pass C's side mma (m16n8k8) multiplies that pair by the row share split into two bf16 words
// hi + lo (16 bits of mantissa together), so the row share costs no accumulator registers and no fp32
// adds. A row's record is 36 words: word 4 r + nt = {hi, lo} of hidden unit 8 nt + r (what lane
// (r, q = 3) needs as its B operand, one 16-byte load), then the row's Adafactor factor (float4), so
// that pass C fetches a row's side data with one copy. A side: a warp writes one row (coalesced), 8
// rows at a time; B side: a thread per column.
struct SfSide {
  const LoSideItem* items;  // one block each
  const LoTensor* ts;
  const float4* rrec;
  const float4* crec;
  const float4* rfac;
  const float4* cfac;
  const float* norm;  // per tensor: 28 normalisers
  const float* mlp;   // this step's folded weights
  uint32_t* side_a;   // per row: kSideWords words
  uint4* side_b;      // per column: 6 features and (1, 1), bf16
};
__global__ void __launch_bounds__(256) sf_side(const SfSide a) {
  const LoSideItem* __restrict__ items = a.items;
  const LoTensor* __restrict__ ts = a.ts;
  const float4* __restrict__ rrec = a.rrec;
  const float4* __restrict__ crec = a.crec;
  const float4* __restrict__ rfac = a.rfac;
  const float4* __restrict__ cfac = a.cfac;
  const float* __restrict__ norm = a.norm;
  const float* __restrict__ mlp = a.mlp;
  uint32_t* __restrict__ side_a = a.side_a;
  uint4* __restrict__ side_b = a.side_b;
  const LoSideItem it = items[blockIdx.x];
  const LoTensor t = ts[it.tensor];
  const bool use_r = (it.side == 1) == lo_b_is_r(t);       // is this side's vector R?
  const int ch0 = use_r ? 13 : 16, ch1 = use_r ? 19 : 22;  // channels of val_k and of rsqrt(val_k + 1e-8)
  const float4* rec = use_r ? rrec + t.r_off : crec + t.c_off;
  const int64_t len = it.side ? t.nb : t.na;
  if (it.side == 1) {
    const int64_t e = it.first + threadIdx.x;
    if (e >= len) return;
    float f[6];
    lo_entry_features(rec[e], f);
    side_b[t.side_b_off + e] =
        make_uint4(pack_bf16(f[0], f[1]), pack_bf16(f[2], f[3]), pack_bf16(f[4], f[5]), pack_bf16(1.0f, 1.0f));
    return;
  }
  const int pos = threadIdx.x % 32, o = 8 * (pos % 4) + pos / 4;  // word pos of the row: hidden unit o
  float wv[6];
  for (int j = 0; j < 6; j++) {
    const int ch = j < 3 ? ch0 + j : ch1 + j - 3;
    wv[j] = mlp[kW0 + ch * 32 + o] * norm[it.tensor * kNormLd + ch];
  }
  const float b0 = mlp[kB0 + o];
  const float4* fac_a = lo_sides(t, rfac, cfac).fac_a;
  // A warp's 32 rows in 4 rounds of 8, each round's loads issued together (one row at a time would wait
  // out a memory latency per row).
  const int64_t first = it.first + threadIdx.x / 32, end = min(it.first + 256, len);
  for (int64_t e0 = first; e0 < end; e0 += 64) {
    float4 v[8], fa[8];
#pragma unroll
    for (int u = 0; u < 8; u++) {
      const int64_t e = e0 + 8 * u;
      v[u] = e < end ? rec[e] : make_float4(0, 0, 0, 0);
      fa[u] = e < end ? fac_a[e] : make_float4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < 8; u++) {
      const int64_t e = e0 + 8 * u;
      if (e >= end) break;
      float f[6];
      lo_entry_features(v[u], f);
      float a = b0;
      for (int j = 0; j < 6; j++) a = fmaf(wv[j], f[j], a);
      const float hi = __bfloat162float(__float2bfloat16_rn(a));
      uint32_t* row = side_a + (t.side_a_off + e) * kSideWords;
      row[pos] = pack_bf16(hi, a - hi);
      if (pos < 4)
        row[32 + pos] = __float_as_uint(pos == 0 ? fa[u].x : pos == 1 ? fa[u].y : pos == 2 ? fa[u].z : fa[u].w);
    }
  }
}

// The element's features and the parts of its update that do not depend on the MLP.
struct SfElem {
  float p, x[kF];
};
template <bool kElo>
__device__ __forceinline__ void sf_load(const Chunk& c, const LoTensor& t, int e, const float* __restrict__ g,
                                        const float* __restrict__ p, const float4* __restrict__ state,
                                        const float4* __restrict__ diag, const float4* __restrict__ rrec,
                                        const float4* __restrict__ crec, const float4* __restrict__ rfac,
                                        const float4* __restrict__ cfac, const SfGrad<kElo>& gr, SfElem& out) {
  const float gv = gr(g[c.p_begin + e]);
  const float pv = p[c.p_begin + e];
  const float4 st = state[c.s_begin + e];
  LoElem el;
  lo_elem<false>(t, c.p_begin - t.p_off + e, gv, pv, st, LoFactorView{rrec, crec, rfac, cfac, diag}, el);
  out.p = el.p;
  sf_features(el, out.x);
}

// small_fc_lopt: p -= lr dir exp(exp_mult mag) step_mult, then p -= wd lr p (PyLO MuLO); ELO: p -= lr (dir
// exp(exp_mult mag) + wd p), p the value before the step (PyLO ELO; step_mult unused).
template <bool kElo>
__device__ __forceinline__ void sf_store(float* __restrict__ p, __nv_bfloat16* __restrict__ pb, int64_t at, float p0,
                                         float dir, float mag, float lr, float wd, float exp_mult, float step_mult) {
  float pn;
  if (kElo) {
    pn = p0 - lr * (dir * expf(mag * exp_mult) + wd * p0);
  } else {
    const float u = dir * expf(mag * exp_mult) * step_mult;
    pn = p0 - lr * u;
    if (wd > 0) pn -= wd * lr * pn;
  }
  lo_store_param(p, pb, at, pn);
}

// h[0..32) += sum_k w[k][0..32) * x[k * kT]: weights 16 bytes at a time, the input loop rolled.
template <int kT>
__device__ __forceinline__ void sf_dense32(float* h, const float4* w, const float* x, int n_in) {
#pragma unroll 2
  for (int k = 0; k < n_in; k++) {
    const float xk = x[k * kT];
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

// Exact: fp32 MLP on CUDA cores, one chunk per block of kT threads.
template <int kT>
struct SfExactSmem {
  float4 w0[28 * 8], w1[32 * 8];  // row k: the 32 weights leaving input (hidden unit) k
  float b0[32], b1[32], w2[66];
  float xs[32][kT];  // per thread: inputs, then hidden units
};
template <int kT, bool kElo>
__device__ __forceinline__ void sf_exact_chunk(const Chunk& c, const LoTensor* __restrict__ ts,
                                               const float* __restrict__ g, float* __restrict__ p,
                                               __nv_bfloat16* __restrict__ pb, const float4* __restrict__ state,
                                               const float4* __restrict__ diag, const float4* __restrict__ rrec,
                                               const float4* __restrict__ crec, const float4* __restrict__ rfac,
                                               const float4* __restrict__ cfac, const float* __restrict__ norm,
                                               const float* __restrict__ mlp, const SfScalars* __restrict__ sc,
                                               float exp_mult, float step_mult, float wd, SfExactSmem<kT>& sm) {
  const LoTensor t = ts[c.tensor];
  for (int idx = threadIdx.x; idx < 28 * 32; idx += kT)
    reinterpret_cast<float*>(sm.w0)[idx] = mlp[kW0 + idx] * norm[c.tensor * kNormLd + idx / 32];
  for (int idx = threadIdx.x; idx < 1024; idx += kT) reinterpret_cast<float*>(sm.w1)[idx] = mlp[kW1 + idx];
  if (threadIdx.x < 32) {
    sm.b0[threadIdx.x] = mlp[kB0 + threadIdx.x];
    sm.b1[threadIdx.x] = mlp[kB1 + threadIdx.x];
  }
  for (int idx = threadIdx.x; idx < 66; idx += kT) sm.w2[idx] = mlp[kW2 + idx];
  __syncthreads();
  const SfGrad<kElo> gr = sf_grad<kElo>(sc);
  const float lr = sc->lr * t.scale, wdf = t.decay ? wd : 0.0f;
  float* x = &sm.xs[0][threadIdx.x];  // x[k * kT]
  for (int e = threadIdx.x; e < c.n; e += kT) {
    SfElem el;
    sf_load<kElo>(c, t, e, g, p, state, diag, rrec, crec, rfac, cfac, gr, el);
#pragma unroll
    for (int k = 0; k < kF; k++) x[k * kT] = el.x[k];
    float h[32];
#pragma unroll
    for (int o = 0; o < 32; o++) h[o] = sm.b0[o];
    sf_dense32<kT>(h, sm.w0, x, kF);
#pragma unroll
    for (int o = 0; o < 32; o++) {
      x[o * kT] = fmaxf(h[o], 0.0f);
      h[o] = sm.b1[o];
    }
    sf_dense32<kT>(h, sm.w1, x, 32);
    float dir = sm.w2[64], mag = sm.w2[65];
#pragma unroll
    for (int k = 0; k < 32; k++) {
      const float a = fmaxf(h[k], 0.0f);
      dir = fmaf(sm.w2[k], a, dir);
      mag = fmaf(sm.w2[32 + k], a, mag);
    }
    sf_store<kElo>(p, pb, c.p_begin + e, el.p, dir, mag, lr, wdf, exp_mult, step_mult);
  }
}

// Parameters rather than a struct, like sf_pass_c_fast with which it shares sf_exact_chunk (lo_core.h).
template <bool kElo>
__global__ void __launch_bounds__(kThreads, 2)
    sf_pass_c_exact(const Chunk* __restrict__ chunks, const LoTensor* __restrict__ ts, const float* __restrict__ g,
                    float* __restrict__ p, __nv_bfloat16* __restrict__ pb, const float4* __restrict__ state,
                    const float4* __restrict__ diag, const float4* __restrict__ rrec, const float4* __restrict__ crec,
                    const float4* __restrict__ rfac, const float4* __restrict__ cfac, const float* __restrict__ norm,
                    const float* __restrict__ mlp, const SfScalars* __restrict__ sc, float exp_mult, float step_mult,
                    float wd) {
  __shared__ SfExactSmem<kThreads> sm;
  sf_exact_chunk<kThreads, kElo>(chunks[blockIdx.x], ts, g, p, pb, state, diag, rrec, crec, rfac, cfac, norm, mlp, sc,
                                 exp_mult, step_mult, wd, sm);
}

// ---- fast pass C: the MLP on tensor cores -----------------------------------------------------------------
// A warp runs down one 32-column strip of a tile, one row (32 elements) per step, as two m16 tiles:
//   layer 1: H = Xb W0s (m16n8k8: the B side's 6 features, constant down the strip so their A fragments
//            stay in registers, and the pair (1, 1) times the A side's share and b0' as bf16 hi + lo,
//            loaded per row into the B operand of the lanes that hold k = 6, 7) + X16 W0e (m16n8k16, the
//            16 per-element features). bf16: raw features span far more than fp16's range (the
//            normalisers sit in W0);
//   layer 2: relu(H) packed to fp16 is already the A operand of the next mma (the accumulator layout of
//            m16n8 equals the A layout of m16k16), so hidden units never leave registers; b1 is the C
//            operand, held in registers (mma reads C and writes D to different registers). fp16 (hidden
//            units and W1, W2 are of order 1) has 8x less rounding than bf16: about half the error;
//   layer 3: N = 8 columns, {direction, magnitude} 4 times; tile 0's W2 is zero in columns 4-7 and tile
//            1's in columns 0-3, and both tiles accumulate into one fragment, so lane (r, q) ends up with
//            the outputs of elements 16 (q / 2) + 8 (q % 2) + r without a round trip through memory.
// Features are computed with one element per lane and reach the mma layout through 32 bytes of shared
// memory per element (ldmatrix). g, p, the record and the row's side data are prefetched kStages - 1 rows
// ahead with cp.async, so the loads stay in flight while the tensor cores work without holding registers.
// Per row and warp: 36 mma (28 k16, 8 k8), ~170 other instructions. The kernel is bound by issue and the
// tensor pipe together (each near half busy, H100 ncu), not by its 28 B/param.
constexpr int kThreadsC = 128, kMinBlocksC = 2, kStages = 4;
constexpr int kLdX = 12;                      // 48-byte feature rows: ldmatrix without bank conflicts
constexpr int kFragWords = 36, kLdFrag = 44;  // per lane: W0e 8 | W0s 4 | W1 16 | W2 8; 44: no bank conflicts

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
// A hidden layer's four n8 accumulator tiles (16 rows x 32 units), ReLU'd, as the fp16 A fragments of
// the next layer's two k16 steps: the accumulator layout is already the A-fragment layout.
__device__ __forceinline__ void relu_to_a_fragments(const float4 (&h)[4], uint32_t (&a)[2][4]) {
#pragma unroll
  for (int ks = 0; ks < 2; ks++) {
    a[ks][0] = pack_f16_relu(h[2 * ks].x, h[2 * ks].y);
    a[ks][1] = pack_f16_relu(h[2 * ks].z, h[2 * ks].w);
    a[ks][2] = pack_f16_relu(h[2 * ks + 1].x, h[2 * ks + 1].y);
    a[ks][3] = pack_f16_relu(h[2 * ks + 1].z, h[2 * ks + 1].w);
  }
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
// D = A B + C on an m16n8k8 tile, bf16 operands, fp32 accumulate (the side mma of layer 1).
__device__ __forceinline__ float4 mma1688(uint32_t a0, uint32_t a1, uint32_t b, float4 c) {
  float4 d;
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
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

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
    return pack_bf16(sf_w0n(mlp, nrm, lo_elem_ch<kLead>(k), o), sf_w0n(mlp, nrm, lo_elem_ch<kLead>(k + 1), o));
  }
  if (w < 12) {  // W0s: nt = w - 8, k = 2q over the B side's {val0..2, rs0..2}; k = 6, 7 (q = 3): per row
    const int o = 8 * (w - 8) + r, k = 2 * q;
    auto ch = [&](int s) { return s < 3 ? (b_is_r ? 13 : 16) + s : (b_is_r ? 19 : 22) + s - 3; };
    return k < 6 ? pack_bf16(sf_w0n(mlp, nrm, ch(k), o), sf_w0n(mlp, nrm, ch(k + 1), o)) : 0u;
  }
  if (w < 28) {  // W1: (ks * 4 + nt) * 2 + half; mlp holds W1 transposed: [k][o]
    const int v = w - 12, ks = v / 8, nt = (v / 2) % 4, o = 8 * nt + r, k = 16 * ks + 2 * q + 8 * (v % 2);
    return pack_f16(mlp[kW1 + k * 32 + o], mlp[kW1 + (k + 1) * 32 + o]);
  }
  // W2 of m tile mt = v / 4: column n = r is output r % 2 (0 direction, 1 magnitude), zero unless
  // n / 4 == mt; (v % 4) = ks * 2 + half.
  const int v = w - 28, mt = v / 4, k = 16 * ((v % 4) / 2) + 2 * q + 8 * (v % 2), out = r % 2;
  return r / 4 == mt ? pack_f16(mlp[kW2 + out * 32 + k], mlp[kW2 + out * 32 + k + 1]) : 0u;
}

// cp.async of 4 or 16 bytes from a global to a shared address; pred false: zero-fill, nothing is read.
template <int kBytes>
__device__ __forceinline__ void cp_async_raw(uint32_t dst, size_t src, bool pred) {
  static_assert(kBytes == 4 || kBytes == 16, "4 or 16 bytes");
  if (kBytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(pred ? 16 : 0) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(pred ? 4 : 0) : "memory");
}
// cp.async of 16 bytes if issue (a predicated instruction, no branch); fill false: zeros, nothing read.
__device__ __forceinline__ void cp_async_16_if(uint32_t dst, size_t src, bool issue, bool fill) {
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %2, 0; @p cp.async.cg.shared.global [%0], [%1], 16, %3; }" ::"r"(dst),
               "l"(src), "r"(int(issue)), "r"(fill ? 16 : 0)
               : "memory");
}
// Stores of a float / bf16 to global memory if pred (a predicated instruction, no branch).
__device__ __forceinline__ void st_global_if(size_t addr, float v, bool pred) {
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %2, 0; @p st.global.f32 [%0], %1; }" ::"l"(addr), "f"(v), "r"(int(pred))
               : "memory");
}
__device__ __forceinline__ void st_global_bf16_if(size_t addr, float v, bool pred) {
  const __nv_bfloat16 b = __float2bfloat16_rn(v);
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %2, 0; @p st.global.b16 [%0], %1; }" ::"l"(addr),
               "h"(*reinterpret_cast<const unsigned short*>(&b)), "r"(int(pred))
               : "memory");
}
// x, with its derivation hidden from the compiler: row addresses are then one wide multiply-add from it
// (else the compiler folds tensor offsets into each index and rebuilds 64-bit sums per row).
__device__ __forceinline__ size_t opaque(size_t x) {
  size_t y;
  asm("mov.b64 %0, %1;" : "=l"(y) : "l"(x));
  return y;
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
  uint4 ha[8];         // the row's side record (sf_side): A-side share of layer 1 (bf16 hi/lo) ...
  float4 fa;           // ... and the row's A-side Adafactor factor
};
struct SfWarpSmem {
  SfStage stage[kStages];
  uint32_t x[2][32][kLdX];  // bf16 pairs of the 16 features, one row per element; two rows (pipelined)
};

// What a lane carries from one row's feature step to its MLP step: the A fragments of the two m tiles,
// the B operand of the side mma (lanes q = 3: the row's share, else W0s) and the old parameter of the
// element it updates.
struct SfRowIn {
  uint32_t a[2][4];
  uint32_t ws[4];
  float po;
};

// 4 warps a block; warp w takes strips w and w + 4 of the tile. Weights (36 fragment words a lane) and
// biases stay in registers for the whole block. Software-pipelined: the feature step of row i + 1 sits in
// the same straight-line code as the MLP of row i, so the compiler overlaps the one's loads and ALU work
// with the other's tensor-core chain (a warp alone has little independent work in either). The first
// n_exact blocks instead run the exact MLP over the flat chunks (vectors, N-D tensors), overlapping the
// tiles. kMinBlocksC = 2: up to 255 registers, none spilled (on the H100, GPT-2 355M, whole fast steps
// with 2, 3 or 4 blocks an SM were within 0.4%, 2 the fastest). __restrict__ parameters rather than a
// struct: beside inline asm, nvcc reads pointers from a struct without the read-only path (lo_core.h).
template <bool kElo>
__global__ void __launch_bounds__(kThreadsC, kMinBlocksC)
    sf_pass_c_fast(const LoWork* __restrict__ works, const LoTensor* __restrict__ ts, const float* __restrict__ g,
                   float* __restrict__ p, __nv_bfloat16* __restrict__ pb, const float4* __restrict__ state,
                   const float4* __restrict__ rfac, const float4* __restrict__ cfac,
                   const uint32_t* __restrict__ side_a, const uint32_t* __restrict__ side_b,
                   const float* __restrict__ norm, const float* __restrict__ mlp, const SfScalars* __restrict__ sc,
                   float exp_mult, float step_mult, float wd, const Chunk* __restrict__ exact_chunks, int n_exact,
                   const float4* __restrict__ diag, const float4* __restrict__ rrec, const float4* __restrict__ crec) {
  // Shared memory: either an exact chunk's or the tile's.
  constexpr int kFragBytes = 32 * kLdFrag * 4, kTileBytes = kFragBytes + int(sizeof(SfWarpSmem)) * (kThreadsC / 32);
  constexpr int kExactBytes = int(sizeof(SfExactSmem<kThreadsC>));
  __shared__ __align__(16) unsigned char smem[kTileBytes > kExactBytes ? kTileBytes : kExactBytes];
  if (int(blockIdx.x) < n_exact) {  // the first blocks: the tensors that are not tile2d, exact
    sf_exact_chunk<kThreadsC, kElo>(exact_chunks[blockIdx.x], ts, g, p, pb, state, diag, rrec, crec, rfac, cfac, norm,
                                    mlp, sc, exp_mult, step_mult, wd, *reinterpret_cast<SfExactSmem<kThreadsC>*>(smem));
    return;
  }
  auto& frag = *reinterpret_cast<uint32_t(*)[32][kLdFrag]>(smem);
  SfWarpSmem* sw = reinterpret_cast<SfWarpSmem*>(smem + kFragBytes);
  const LoWork w = works[blockIdx.x - n_exact];
  if (!w.tile) return;  // flat work: done by the exact blocks
  const LoTensor t = ts[w.tensor];
  for (int idx = threadIdx.x; idx < 32 * kFragWords; idx += kThreadsC)
    frag[idx / kFragWords][idx % kFragWords] =
        sf_frag_word(idx / kFragWords, idx % kFragWords, mlp, norm + w.tensor * kNormLd, lo_b_is_r(t));
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 4, q = lane % 4;
  SfWarpSmem& ws = sw[warp];
  const uint32_t stage0 = uint32_t(__cvta_generic_to_shared(&ws.stage[0]));
  uint32_t wf[kFragWords];
#pragma unroll
  for (int k = 0; k < kFragWords / 4; k++) {
    const uint4 v = reinterpret_cast<const uint4*>(frag[lane])[k];
    wf[4 * k] = v.x;
    wf[4 * k + 1] = v.y;
    wf[4 * k + 2] = v.z;
    wf[4 * k + 3] = v.w;
  }
  float4 b1c[4];  // layer 2's C operand: b1 at columns 2q, 2q + 1 of n tile nt, rows r and r + 8
#pragma unroll
  for (int nt = 0; nt < 4; nt++) {
    const float lo = mlp[kB1 + 8 * nt + 2 * q], hi = mlp[kB1 + 8 * nt + 2 * q + 1];
    b1c[nt] = make_float4(lo, hi, lo, hi);
  }
  const float4 b2c = make_float4(mlp[kB2], mlp[kB2 + 1], mlp[kB2], mlp[kB2 + 1]);
  const SfGrad<kElo> gr = sf_grad<kElo>(sc);
  const float lr = sc->lr * t.scale, wdf = t.decay ? wd : 0.0f;
  const float mag2 = exp_mult * 1.44269504f;                 // exp(m * exp_mult) = exp2(m * mag2)
  const float lrs = lr * step_mult, keep = 1.0f - wdf * lr;  // p' = (p - lrs * dir * exp(..)) * keep
  const LoSides sd = lo_sides(t, rfac, cfac);
  const uint32_t nb = uint32_t(t.nb);
  const int eo = 16 * (q / 2) + 8 * (q % 2) + r;  // the element whose update this lane writes
  // Global bases of this tensor (opaque: see opaque()).
  const size_t gbase = opaque(__cvta_generic_to_global(g + t.p_off)),
               pbase = opaque(__cvta_generic_to_global(p + t.p_off));
  const size_t sbase = opaque(__cvta_generic_to_global(state + t.s_off));
  const size_t bbase = pb ? opaque(__cvta_generic_to_global(pb + t.p_off)) : 0;

  for (int strip = warp; strip < kTileCols / 32; strip += kThreadsC / 32) {
    const int64_t col0 = w.col0 + 32 * strip, col = col0 + lane;
    if (col0 >= t.nb) break;
    const bool live = col < t.nb, live_o = col0 + eo < t.nb;
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
    // Row i of the strip: element at0 + i * nb of the tensor (dead lanes read a live column and store
    // nothing); element indices of tile2d tensors fit 32 bits.
    const uint32_t base = uint32_t(w.row0 * t.nb + col0), at0 = base + uint32_t(live ? lane : 0);
    const size_t hbase = opaque(__cvta_generic_to_global(side_a + (t.side_a_off + w.row0) * kSideWords)) + 16 * lane;
    const uint32_t dlane = stage0 + 4 * lane;
    const int n = w.n;
    int next = 0;
    auto prefetch = [&]() {  // the next row into its stage; past the last row: zeros, nothing read
      const uint32_t d = dlane + uint32_t(next % kStages) * uint32_t(sizeof(SfStage));
      const uint32_t e = at0 + uint32_t(next) * nb;
      const bool in = next < n;
      cp_async_raw<4>(d + offsetof(SfStage, g), gbase + size_t(e) * 4, live && in);
      cp_async_raw<4>(d + offsetof(SfStage, p), pbase + size_t(e) * 4, live && in);
      cp_async_raw<16>(d + offsetof(SfStage, st) + 12 * lane, sbase + size_t(e) * 16, live && in);
      cp_async_16_if(d + offsetof(SfStage, ha) + 12 * lane, hbase + size_t(next) * (4 * kSideWords),
                     lane < kSideWords / 4, in);
      cp_async_commit();
      next++;
    };
    // Feature step of row i (its stage complete and visible): features -> staging tile xi, side operand, old p.
    auto features = [&](int i, int xi, SfRowIn& in) {
      const SfStage& st = ws.stage[i % kStages];
      const float gv = gr(st.g[lane]), pv = st.p[lane];
      in.po = st.p[eo];
      const float4 rec = st.st[lane], fa = st.fa;
      if (q == 3) {  // k = 6, 7 of the side mma: this row's share of layer 1 (hi, lo)
        const uint4 v = st.ha[r];
        in.ws[0] = v.x;
        in.ws[1] = v.y;
        in.ws[2] = v.z;
        in.ws[3] = v.w;
      }
      float sg[3];
      lo_tile_sg(fa, fb, sg);
      float x[16];
      sf_elem16(gv, pv, rec, rsqrt_approx(rec.w + 1e-6f), sg, x);
      uint4* xr = reinterpret_cast<uint4*>(ws.x[xi][lane]);
      xr[0] = make_uint4(pack_bf16(x[0], x[1]), pack_bf16(x[2], x[3]), pack_bf16(x[4], x[5]), pack_bf16(x[6], x[7]));
      xr[1] =
          make_uint4(pack_bf16(x[8], x[9]), pack_bf16(x[10], x[11]), pack_bf16(x[12], x[13]), pack_bf16(x[14], x[15]));
    };
    auto load_a = [&](int xi, SfRowIn& in) {
      ldmatrix_x4(in.a[0], &ws.x[xi][lane % 16][(lane / 16) * 4]);
      ldmatrix_x4(in.a[1], &ws.x[xi][16 + lane % 16][(lane / 16) * 4]);
    };
    // MLP of row i and its update.
    auto mlp_row = [&](int i, const SfRowIn& in) {
      float4 dm = b2c;
#pragma unroll
      for (int mt = 0; mt < 2; mt++) {
        float4 h[4];
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
          h[nt] = mma1688(xb[mt][0], xb[mt][1], in.ws[nt], make_float4(0, 0, 0, 0));
          h[nt] = mma16816<false>(in.a[mt], wf[2 * nt], wf[2 * nt + 1], h[nt]);
        }
        uint32_t a2[2][4];
        relu_to_a_fragments(h, a2);
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
          h[nt] = mma16816<true>(a2[0], wf[12 + 2 * nt], wf[12 + 2 * nt + 1], b1c[nt]);
          h[nt] = mma16816<true>(a2[1], wf[20 + 2 * nt], wf[20 + 2 * nt + 1], h[nt]);
        }
        relu_to_a_fragments(h, a2);
        dm = mma16816<true>(a2[0], wf[28 + 4 * mt], wf[29 + 4 * mt], dm);
        dm = mma16816<true>(a2[1], wf[30 + 4 * mt], wf[31 + 4 * mt], dm);
      }
      // small_fc_lopt: p -= lr * dir * exp(exp_mult * mag) * step_mult, then decoupled weight decay; ELO:
      // p -= lr * (dir * exp(exp_mult * mag) + wd * p) (sf_store)
      const float dir = q % 2 ? dm.z : dm.x, mag = q % 2 ? dm.w : dm.y;
      const float pn = kElo ? in.po - lr * (dir * exp2_approx(mag * mag2) + wdf * in.po)
                            : (in.po - lrs * (dir * exp2_approx(mag * mag2))) * keep;
      const uint32_t e = base + uint32_t(eo) + uint32_t(i) * nb;
      st_global_if(pbase + size_t(e) * 4, pn, live_o);
      st_global_bf16_if(bbase + size_t(e) * 2, pn, live_o && bbase);
    };
    SfRowIn cur;
#pragma unroll
    for (int k = 0; k < 4; k++) cur.ws[k] = wf[8 + k];
    __syncwarp();  // the previous strip's last reads of the stages are done
#pragma unroll
    for (int i = 0; i < kStages - 1; i++) prefetch();
    prefetch();
    cp_async_wait<kStages - 1>();
    __syncwarp();
    features(0, 0, cur);
    __syncwarp();
    load_a(0, cur);
#pragma unroll 2
    for (int i = 0; i < n; i++) {
      prefetch();  // row i + kStages into row i's stage, read in the previous step
      cp_async_wait<kStages - 1>();
      __syncwarp();  // row i + 1 complete and visible
      SfRowIn nx = cur;
      features(i + 1, (i + 1) & 1, nx);  // past the last row: zeros, harmless
      mlp_row(i, cur);
      __syncwarp();  // row i + 1's staging tile written; row i's read (ldmatrix) long done
      load_a((i + 1) & 1, nx);
      cur = nx;
    }
    cp_async_wait<0>();
  }
}
}  // namespace

// The arguments of passes B and side: the buffers never move, so they are set once.
struct SmallFcLopt::Passes {
  SfPassB b;
  SfSide side;
};

void SmallFcLopt::make_passes() {
  passes_ = std::make_unique<Passes>();
  passes_->b = {core_.work.get(),
                core_.tensors.get(),
                arena_.grads(),
                arena_.params(),
                core_.state.get(),
                core_.diag.get(),
                core_.rrec.get(),
                core_.crec.get(),
                core_.rfac.get(),
                core_.cfac.get(),
                partial_.get(),
                scalars_.get(),
                dec_};
  passes_->side = {core_.side_items.get(),
                   core_.tensors.get(),
                   core_.rrec.get(),
                   core_.crec.get(),
                   core_.rfac.get(),
                   core_.cfac.get(),
                   norm_.get(),
                   mlp_.get(),
                   reinterpret_cast<uint32_t*>(side_a_.get()),
                   side_b_.get()};
}

// The two optimizers' settings in one form (the kernels read these).
SmallFcLopt::Rule SmallFcLopt::rule_of(const OptimOptions& o, bool elo) {
  Rule r;
  if (elo) {  // celo2.md 8: no step_mult (E3), no MuLO scale
    const EloOptions& h = o.elo;
    r.lr = h.lr;
    r.wd = float(h.weight_decay);
    r.exp_mult = float(h.exp_mult);
    r.step_mult = 1.0f;  // unused
    r.fast = h.fast;
    r.tie = parse_tie_rule(h.tie, kEloPyloTie);
    r.mup = false;
    return r;
  }
  const SmallFcOptions& h = o.small_fc;
  r.lr = h.lr;
  r.wd = float(h.weight_decay);
  r.exp_mult = float(h.exp_mult);
  r.step_mult = float(h.step_mult);
  r.fast = h.fast;
  r.tie = parse_tie_rule(h.tie, kSmallFcPyloTie);
  r.mup = h.mup;
  return r;
}

// small_fc_lopt: the meta-learned decays (small_fc_lopt.md 1); ELO: the nominal ones as float32 (celo2.md 8, E1).
LoDecays SmallFcLopt::decays_of(bool elo) {
  LoDecays d;
  if (elo) {
    const float nominal[3] = {0.9f, 0.99f, 0.999f};
    for (int k = 0; k < 3; k++) d.m[k] = d.f[k] = nominal[k];
    d.v = 0.999f;
    return d;
  }
  const SmallFcDecays sd = small_fc_decays();
  for (int k = 0; k < 3; k++) {
    d.m[k] = sd.m[k];
    d.f[k] = sd.f[k];
  }
  d.v = sd.v;
  return d;
}

SmallFcLopt::SmallFcLopt(Arena& arena, const OptimOptions& opts, const SmallFcWeights& w, bool elo,
                         const std::vector<int>& owned)
    : Optimizer(arena, opts, owned),
      elo_(elo),
      rule_(rule_of(opts, elo)),
      core_(arena, owned_, rule_.tie, rule_.mup, kChunk),
      dec_(decays_of(elo)) {
  const char* what = elo ? "elo" : "small_fc_lopt";
  std::vector<float> all;
  for (const auto* v : {&w.w0, &w.b0, &w.w1, &w.b1, &w.w2, &w.b2}) all.insert(all.end(), v->begin(), v->end());
  CHECK(all.size() == 2402);
  weights_.alloc(all.size(), str_cat(what, " weights").c_str());
  weights_.upload(all);
  mlp_.alloc(kMlpFloats, str_cat(what, " folded weights").c_str());
  partial_.alloc(core_.work.size() * kF, str_cat(what, " partial sums").c_str());
  norm_.alloc(size_t(core_.n_tensors) * kNormLd, str_cat(what, " normalisers").c_str());
  scalars_.alloc(1, str_cat(what, " scalars").c_str());
  const SfScalars one{1.0f, 1.0f, 1.0f};  // clip stays 1 unless ELO's global clip writes it
  scalars_.upload(&one, 1);
  if (rule_.fast) {
    side_a_.alloc(size_t(core_.side_a_len) * kSideWords, str_cat(what, " row-side layer-1 shares").c_str());
    side_b_.alloc(size_t(core_.side_b_len), str_cat(what, " column-side features").c_str());
  }
  if (elo && opts.elo.clip_grad) clip_ = std::make_unique<LoGlobalClip>(arena, owned_, opts.elo.clip_norm);
  make_passes();
}

SmallFcLopt::~SmallFcLopt() = default;

void SmallFcLopt::set_cross_rank(CrossRank* c) {
  Optimizer::set_cross_rank(c);
  if (clip_) clip_ = std::make_unique<LoGlobalClip>(arena_, owned_, opts_.elo.clip_norm, c);
}

void SmallFcLopt::step(const StepInfo& info, cudaStream_t s) {
  sf_begin<<<1, 256, 0, s>>>(d_step_.get(), rule_.lr, opts_.schedule, info.d_grad_scale, weights_.get(), mlp_.get(),
                             scalars_.get());
  CUDA_CHECK_LAUNCH();
  if (clip_) clip_->run(info.d_grad_scale, &scalars_.get()->clip, s);
  if (elo_)
    passes<true>(s);
  else
    passes<false>(s);
}

template <bool kElo>
void SmallFcLopt::passes(cudaStream_t s) {
  SfScalars* sc = scalars_.get();
  if (kElo)
    core_.factor_passes_nan_to_num(&sc->grad_scale, &sc->clip, dec_, s);
  else
    core_.factor_passes(&sc->grad_scale, 0.0f, dec_, s);
  const unsigned nw = unsigned(core_.work.size());
  sf_pass_b<kElo><<<nw, kLoThreads, 0, s>>>(passes_->b);
  CUDA_CHECK_LAUNCH();
  sf_norms<<<unsigned(core_.n_tensors), 1024, 0, s>>>(core_.tensors.get(), partial_.get(), core_.rrec.get(),
                                                      core_.crec.get(), norm_.get());
  CUDA_CHECK_LAUNCH();
  // Exact: every tensor per element. Fast: one launch, tile2d tensors on tensor cores and, in its first
  // blocks, the rest (vectors, N-D) exact.
  const bool fast = rule_.fast;
  const Chunk* exact_chunks = fast ? core_.flat_chunks.get() : core_.chunks.get();
  const unsigned n_exact = unsigned(fast ? core_.flat_chunks.size() : core_.chunks.size());
  if (fast && core_.side_items.size()) {
    sf_side<<<unsigned(core_.side_items.size()), 256, 0, s>>>(passes_->side);
    CUDA_CHECK_LAUNCH();
    sf_pass_c_fast<kElo><<<unsigned(n_exact) + nw, kThreadsC, 0, s>>>(
        core_.work.get(), core_.tensors.get(), arena_.grads(), arena_.params(), arena_.params_bf16(), core_.state.get(),
        core_.rfac.get(), core_.cfac.get(), reinterpret_cast<const uint32_t*>(side_a_.get()),
        reinterpret_cast<const uint32_t*>(side_b_.get()), norm_.get(), mlp_.get(), sc, rule_.exp_mult, rule_.step_mult,
        rule_.wd, exact_chunks, int(n_exact), core_.diag.get(), core_.rrec.get(), core_.crec.get());
    CUDA_CHECK_LAUNCH();
    return;
  }
  if (n_exact) {
    sf_pass_c_exact<kElo><<<n_exact, kThreads, 0, s>>>(
        exact_chunks, core_.tensors.get(), arena_.grads(), arena_.params(), arena_.params_bf16(), core_.state.get(),
        core_.diag.get(), core_.rrec.get(), core_.crec.get(), core_.rfac.get(), core_.cfac.get(), norm_.get(),
        mlp_.get(), sc, rule_.exp_mult, rule_.step_mult, rule_.wd);
    CUDA_CHECK_LAUNCH();
  }
}

std::vector<Optimizer::StateBuffer> SmallFcLopt::state_buffers() const {
  return {{"lopt.moments", core_.state.get(), core_.state.bytes()},
          {"lopt.vector_factors", core_.diag.get(), core_.diag.bytes()},
          {"lopt.R", core_.rrec.get(), core_.rrec.bytes()},
          {"lopt.C", core_.crec.get(), core_.crec.bytes()}};
}

// small_fc_lopt's exact pass C (and ELO's): the 39-32-32-2 MLP in fp32 on CUDA cores, one element per
// thread over flat chunks. The weights sit in shared memory and are read 16 bytes at a time (a broadcast);
// each thread stages its inputs and hidden units in shared memory so that the loops stay rolled (a fully
// unrolled 39-32-32-2 MLP does not fit the instruction cache, and its 9.6 KB of weights thrash the constant
// cache). The exact kernel (small_fc_lopt.cu) runs it over every tensor; the fast kernel
// (small_fc_fast.cu) over the tensors that are not tile2d, in its first blocks.
#pragma once
#include "optim/lopt/small_fc_device.cuh"

namespace small_fc {
// The element's features and the parts of its update that do not depend on the MLP.
struct SfElem {
  float p, x[kF];
};
// Rec: the record as stored, float4 or (bf16 records) uint2.
template <bool kElo, class Rec>
__device__ __forceinline__ void sf_load(const Chunk& c, const LoTensor& t, int e, const float* __restrict__ g,
                                        const float* __restrict__ p, const Rec* __restrict__ state,
                                        const float4* __restrict__ diag, const float4* __restrict__ rrec,
                                        const float4* __restrict__ crec, const float4* __restrict__ rfac,
                                        const float4* __restrict__ cfac, const SfGrad<kElo>& gr, SfElem& out) {
  const float gv = gr(g[c.p_begin + e]);
  const float pv = p[c.p_begin + e];
  const float4 st = lo_rec_load(state, c.s_begin + e);
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
template <int kT, bool kElo, class Rec>
__device__ __forceinline__ void sf_exact_chunk(const Chunk& c, const LoTensor* __restrict__ ts,
                                               const float* __restrict__ g, float* __restrict__ p,
                                               __nv_bfloat16* __restrict__ pb, const Rec* __restrict__ state,
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
}  // namespace small_fc

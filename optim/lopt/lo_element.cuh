// One element's share of passes B and C, as far as small_fc_lopt and VeLO do the same thing: each
// function below is the same operations on the same operands in the same order for both (inlined, each
// kernel compiles to the instructions it had with its own copy).
//
// Both lay out their normalised features as [kLead per element | 12 side | 3 momentum x factor]:
//   small_fc_lopt, kLead 13: g, p, m0..2, v, m_k rho, rho, g sg_k                  (small_fc_lopt.md 3.5)
//   VeLO,          kLead 15: g, clip(g, 0.1), p, m0..2, v, m_k s, s, g sg_k, g s   (velo.md 4.7)
// then the side features R_k, C_k, rsqrt(R_k + 1e-8), rsqrt(C_k + 1e-8) and last m_k sm_k (k = 0..2).
// The side features come from R or C alone, so along a 2-D tensor's row or column they are constant:
// pass B leaves their sums of squares to F2 (lo_side_sums) and pass C takes their share of the first
// layer from per-row and per-column tables.
//
// What stays with each optimizer, because it differs:
//  - the gradient both see: small_fc_lopt g * clip scale, VeLO that clamped to [-1000, 1000];
//  - the leading features: VeLO's clip(g, 0.1) and g s move the others, and small_fc_lopt's fast pass C
//    takes rho from an approximate rsqrt;
//  - the vector momentum factor (lo_gather's kVeloDiag) and VeLO's pass-B sums of the old record;
//  - the MLPs (39-32-32-2 with the time features folded into b0, against 30-4-4-3 made per tensor);
//  - the step: small_fc_lopt p - lr ((dir e^(exp_mult mag)) step_mult), VeLO p - lr ((mult dir) e^(1e-3
//    mag)) group their products differently, and the decay reads wd lr p in one, lr wd p in the other,
//    so only the stores after it are shared (lo_store_param);
//  - F2's per-tensor sums of pass B's partials (different fixed reduction trees: see sf_norms).
// velo_side writes lo_entry_features' six features out itself: the same arithmetic, but through the
// helper the compiler lays that kernel out differently.
#pragma once
#include <cuda_bf16.h>

#include "optim/lopt/lo_device.cuh"
#include "optim/lopt/lo_record16.h"

constexpr int kLoSideFeatures = 12;

// Channel of the j-th of the features that vary along both axes of a 2-D tensor (all but the side ones).
template <int kLead>
__host__ __device__ constexpr int lo_elem_ch(int j) {
  return j < kLead ? j : j + kLoSideFeatures;
}

// What both optimizers' features are built from, for one element, from the updated state.
struct LoElem {
  float g, p, m[3], v;
  float row[3], col[3];  // R and C entries (vectors: V, twice)
  float sg[3], sm[3];    // Adafactor factor for the gradient and for the momenta
};

// LoCore's factored accumulators, their factors and the vectors' V, as an element reads them.
struct LoFactorView {
  const float4* rrec;  // {R0, R1, R2, -} per R entry
  const float4* crec;  // {C0, C1, C2, -} per C entry
  const float4* rfac;  // {rf0, rf1, rf2, -}
  const float4* cfac;  // {cf0, cf1, cf2, -}
  const float4* diag;  // {V0, V1, V2, -} per element of vectors
};

// kVeloDiag: VeLO's vector momentum factor V^(-1/2); else μLO's (V + 1e-6)^(-1/2).
template <bool kVeloDiag>
__device__ __forceinline__ void lo_gather(const LoTensor& t, int64_t i, const float4* __restrict__ rrec,
                                          const float4* __restrict__ crec, const float4* __restrict__ rfac,
                                          const float4* __restrict__ cfac, const float4* __restrict__ diag, LoElem& e) {
  if (t.factored) {
    int64_t ri, ci;
    lo_rc_index(t, i, ri, ci);
    const float4 R = rrec[t.r_off + ri], C = crec[t.c_off + ci], rf = rfac[t.r_off + ri], cf = cfac[t.c_off + ci];
    e.row[0] = R.x;
    e.row[1] = R.y;
    e.row[2] = R.z;
    e.col[0] = C.x;
    e.col[1] = C.y;
    e.col[2] = C.z;
    e.sg[0] = e.sm[0] = rf.x * cf.x;
    e.sg[1] = e.sm[1] = rf.y * cf.y;
    e.sg[2] = e.sm[2] = rf.z * cf.z;
  } else {
    const float4 V = diag[t.v_off + i];
    const float vv[3] = {V.x, V.y, V.z};
#pragma unroll
    for (int k = 0; k < 3; k++) {
      e.row[k] = e.col[k] = vv[k];
      e.sg[k] = rsqrtf(fmaxf(vv[k] + 1e-9f, 1e-9f));
      e.sm[k] = kVeloDiag ? rsqrtf(vv[k]) : rsqrtf(vv[k] + 1e-6f);
    }
  }
}

// The updated record {m0, m1, m2, v} into an element's LoElem.
__device__ __forceinline__ void lo_set_moments(LoElem& el, float4 st) {
  el.m[0] = st.x;
  el.m[1] = st.y;
  el.m[2] = st.z;
  el.v = st.w;
}

// Element i's LoElem from its gradient, old parameter and updated record (pass C).
template <bool kVeloDiag>
__device__ __forceinline__ void lo_elem(const LoTensor& t, int64_t i, float g, float p, float4 st,
                                        const LoFactorView& f, LoElem& el) {
  el.g = g;
  el.p = p;
  lo_set_moments(el, st);
  lo_gather<kVeloDiag>(t, i, f.rrec, f.crec, f.rfac, f.cfac, f.diag, el);
}

// Updates {m0, m1, m2, v} and, for vectors, {V0, V1, V2} with gradient g; returns the new record.
__device__ __forceinline__ float4 lo_update_moments(float4 st, float g, const LoDecays& d) {
  st.x = d.m[0] * st.x + (1.0f - d.m[0]) * g;
  st.y = d.m[1] * st.y + (1.0f - d.m[1]) * g;
  st.z = d.m[2] * st.z + (1.0f - d.m[2]) * g;
  st.w = d.v * st.w + (1.0f - d.v) * g * g;
  return st;
}
__device__ __forceinline__ float4 lo_update_diag(float4 V, float g, const LoDecays& d) {
  const float q = g * g + 1e-30f;
  V.x = d.f[0] * V.x + (1.0f - d.f[0]) * q;
  V.y = d.f[1] * V.y + (1.0f - d.f[1]) * q;
  V.z = d.f[2] * V.z + (1.0f - d.f[2]) * q;
  return V;
}

// Pass B's state step: the record updated with gradient g, stored at state[at] and returned as stored
// (bf16 records: rounded with the tensor's key of this step, el the element's index in the tensor).
template <class Rec>
__device__ __forceinline__ float4 lo_step_record(Rec* state, int64_t at, float4 old, float g, const LoDecays& d,
                                                 uint64_t key = 0, int64_t el = 0) {
  return lo_rec_store(state, at, lo_update_moments(old, g, d), key, el);
}

// Pass B on element i of a flat run (vectors, N-D tensors): the record stepped and stored at state[at], for
// vectors V too (f.diag is diag), and the element's LoElem from the new state. The statements keep the
// order the kernels had: with el.g read back after the record's update, the compiler fuses V's update
// into the same multiply-adds as before (another order changes which product it fuses).
template <bool kVeloDiag, class Rec>
__device__ __forceinline__ void lo_flat_step(const LoTensor& t, int64_t i, float g, float p, float4 old, Rec* state,
                                             int64_t at, float4* diag, const LoFactorView& f, const LoDecays& d,
                                             LoElem& el, uint64_t key = 0) {
  el.g = g;
  el.p = p;
  const float4 st = lo_step_record(state, at, old, el.g, d, key, i);
  lo_set_moments(el, st);
  if (!t.factored) diag[t.v_off + i] = lo_update_diag(diag[t.v_off + i], el.g, d);
  lo_gather<kVeloDiag>(t, i, f.rrec, f.crec, f.rfac, f.cfac, f.diag, el);
}

// A tile element's Adafactor factor sg_k = rf_k cf_k from its row's (fa) and its column's (fb) factors.
__device__ __forceinline__ void lo_tile_sg(float4 fa, float4 fb, float* sg) {
  sg[0] = fa.x * fb.x;
  sg[1] = fa.y * fb.y;
  sg[2] = fa.z * fb.z;
}

// The features built from the factors and the R/C entries, at the optimizer's positions: g sg_k at
// kGsg + k, the side features from kLead on, m_k sm_k after them.
template <int kGsg, int kLead>
__device__ __forceinline__ void lo_factor_features(const LoElem& e, float* x) {
#pragma unroll
  for (int k = 0; k < 3; k++) {
    x[kGsg + k] = e.g * e.sg[k];
    x[kLead + k] = e.row[k];
    x[kLead + 3 + k] = e.col[k];
    x[kLead + 6 + k] = rsqrtf(e.row[k] + 1e-8f);
    x[kLead + 9 + k] = rsqrtf(e.col[k] + 1e-8f);
    x[kLead + 12 + k] = e.m[k] * e.sm[k];
  }
}

// The 6 side features of one R or C entry v (a row's or a column's): val_k, then rsqrt(val_k + 1e-8).
__device__ __forceinline__ void lo_entry_features(float4 v, float* f) {
  f[0] = v.x;
  f[1] = v.y;
  f[2] = v.z;
  f[3] = rsqrtf(v.x + 1e-8f);
  f[4] = rsqrtf(v.y + 1e-8f);
  f[5] = rsqrtf(v.z + 1e-8f);
}

// Pass B's sums of squares of one element's kN features: a flat element's (the side ones only where
// the tensor is not factored: F2 adds those from R and C) ...
template <int kLead, int kN>
__device__ __forceinline__ void lo_add_squares_flat(const float* x, bool factored, float* acc) {
#pragma unroll
  for (int k = 0; k < kN; k++)
    if (!factored || k < kLead || k >= kLead + kLoSideFeatures) acc[k] += x[k] * x[k];
}
// ... and a tile element's, whose x holds only those that vary per element (channel lo_elem_ch).
template <int kLead, int kN>
__device__ __forceinline__ void lo_add_squares_tile(const float* x, float* acc) {
#pragma unroll
  for (int j = 0; j < kN; j++) acc[lo_elem_ch<kLead>(j)] += x[j] * x[j];
}

// F2 of a factored tensor: the side features' sums of squares (lo_side_sums, 12 doubles: LoCore's
// join_side_sums) added to the per-element ones in S (shared memory).
template <int kLead>
__device__ __forceinline__ void lo_add_side_sums(const double* __restrict__ side, double* S) {
  if (threadIdx.x < 3) {
    const int k = threadIdx.x;
    S[kLead + k] += side[k];
    S[kLead + 3 + k] += side[3 + k];
    S[kLead + 6 + k] += side[6 + k];
    S[kLead + 9 + k] += side[9 + k];
  }
  __syncthreads();
}

// A feature's normaliser from its sum of squares over the tensor's elements: rsqrt(1e-5 + mean square).
__device__ __forceinline__ float lo_normaliser(double sum_sq, double numel) {
  return rsqrtf(1e-5f + float(sum_sq / numel));
}

// A new parameter value to the fp32 master copy and, where the arena keeps one, to the bf16 copy.
__device__ __forceinline__ void lo_store_param(float* p, __nv_bfloat16* pb, int64_t at, float pn) {
  p[at] = pn;
  if (pb) pb[at] = __float2bfloat16_rn(pn);
}

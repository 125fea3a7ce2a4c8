// VeLO step, per element 72 B (pass A 4, pass B 40, pass C 28), plus the hypernetwork over all tensors:
//   F2 builds each tensor's LSTM input from pass B's sums of the OLD m, v (and p^2) - the LSTM sees the
//   accumulators lagged by one step - then GEMM [linear_1; linear_2], max over tensors, GEMM LSTM,
//   gates, GEMM [rnn_to_controls; step_size], GEMM candidate interpolation (x 100/256).
// GEMMs are FP32 cuBLAS (no TF32); biases ride along as a constant-1 input column.
// 2-D factored tensors run passes B and C in tiles, one column per thread (lo_core.h): 18 of the 30
// features vary per element; the 12 built from R or C alone (15-26) get their sums of squares from the
// R and C vectors (F2) and their share of the first layer once per row / column and step (velo_side),
// so an element's first layer is 18 x 4 multiply-adds on two gathered 4-vectors.
#include <algorithm>
#include <cmath>

#include "optim/lopt/lo_element.cuh"
#include "optim/lopt/velo.h"
#include "optim/ref/ref_velo.h"
#include "optim/step_scalars.cuh"

namespace {
constexpr int kChunk = 4096;         // LoCore's chunk map (small_fc_lopt's exact pass C; VeLO's passes use LoWork)
constexpr int kF = 30, kS = kF + 8;  // 30 features + 8 old-state sums
constexpr int kLead = 15;            // features before the 12 side ones (lo_element.cuh)
constexpr int kUnrollC = 4;          // pass C rows in flight per thread (registers)
constexpr int kNormLd = 32;          // floats per tensor in norm_: 30 normalisers, the param scale, 1 pad
constexpr int kLdX = 32;             // LSTM input row per tensor: 30 features | 1 (the bias column) | 1 pad
// Row lengths of the hypernetwork's GEMM operands. Biases ride along as a constant-1 input column, and
// rows are padded to a multiple of 4 floats (16 bytes) for cuBLAS's vector loads:
//   kLdUH: LSTM input [U (512) | h (512) | 1 | 3 pad]       kLdHX: LSTM output [h_new (512) | 1 | 3 pad]
//   kCS:   output GEMM rows per tensor: 256 controls + lr_mult (unpadded: only cuBLAS reads them back)
constexpr int kLdUH = 1028, kLdHX = 516, kCS = 257;
// A tensor's MLP (theta, 159 floats, interpolated from the 256 candidates): W0 (4 x 30) | b0 (4) |
// W1 (4 x 4) | b1 (4) | W2 (3 x 4: direction, magnitude, unused) | b2 (3).
constexpr int kThB0 = VeloWeights::kB0, kThW1 = VeloWeights::kW1, kThB1 = VeloWeights::kB1;
constexpr int kThW2 = VeloWeights::kW2, kThB2 = VeloWeights::kB2, kTheta = VeloWeights::kMlp;
constexpr int kThetaPad = 160;  // in shared memory: whole float4s (velo_head reads 16 bytes at a time)
static_assert(kThW1 % 4 == 0 && kThW2 % 4 == 0 && kThB2 % 4 == 0, "velo_head reads these 16 bytes at a time");

__global__ void velo_begin(int64_t* step, VeloLossState* lb, const float* loss, int64_t num_steps, double lr,
                           LrSchedule sched, const float* gscale, VeloScalars* scalars) {
  const int64_t t = *step;
  const float L = *loss;
  VeloLossState& b = *lb;
  float cm_prev[10], approx_max = L;
  for (int j = 0; j < 10; j++) cm_prev[j] = b.means[j] / (1.0f - powf(b.decay[j], float(b.it + 1)));
  if (b.it > 0) {
    approx_max = cm_prev[0];
    for (int j = 1; j < 10; j++) approx_max = fmaxf(approx_max, cm_prev[j]);
  }
  const float lc = fminf(2.0f * fabsf(approx_max), L);
  for (int j = 0; j < 10; j++) {
    b.means[j] = b.decay[j] * b.means[j] + (1.0f - b.decay[j]) * lc;
    b.running_min[j] = fminf(b.running_min[j], b.means[j] / (1.0f - powf(b.decay[j], float(b.it + 1))));
  }
  b.it++;
  const float tau[9] = {0.03f, 0.1f, 0.2f, 0.4f, 0.6f, 0.8f, 0.9f, 1.0f, 1.1f};
  const float frac = float(double(t) / double(num_steps));
  for (int j = 0; j < 9; j++) scalars->lstm_shared[j] = tanhf(10.0f * (frac - tau[j]));
  float cm[10];
  for (int j = 0; j < 10; j++) cm[j] = b.means[j] / (1.0f - powf(b.decay[j], float(b.it)));
  for (int j = 0; j < 9; j++) {
    float num = cm[j] - b.running_min[j], den = fmaxf(1e-8f, cm[j + 1] - b.running_min[j]);
    scalars->lstm_shared[9 + j] = b.it <= 2 ? 0.0f : fminf(1.0f, fmaxf(-1.0f, num / den - 1.0f));
  }
  scalars->step.grad_scale = read_grad_scale(gscale);
  scalars->step.lr = float(lr * sched.factor(t));
  *step = t + 1;
}

__device__ __forceinline__ float velo_g(float g, float gs) { return fminf(1000.0f, fmaxf(-1000.0f, g * gs)); }

// The 30 per-element features (velo.md 4.7).
__device__ __forceinline__ void velo_features(const LoElem& e, float* x) {
  const float s = rsqrtf(e.v + 1e-6f);
  x[0] = e.g;
  x[1] = fminf(0.1f, fmaxf(-0.1f, e.g));
  x[2] = e.p;
  x[3] = e.m[0];
  x[4] = e.m[1];
  x[5] = e.m[2];
  x[6] = e.v;
  x[7] = e.m[0] * s;
  x[8] = e.m[1] * s;
  x[9] = e.m[2] * s;
  x[10] = s;
  x[14] = e.g * s;
  lo_factor_features<11, kLead>(e, x);
}

// The 18 features that vary along both axes of a 2-D tensor (channels 0-14 and 27-29) from the clipped
// gradient, the old parameter, the updated record and sg = rf * cf (the same arithmetic as velo_features).
__device__ __forceinline__ void velo_elem18(float g, float p, float4 st, const float* sg, float* x) {
  const float s = rsqrtf(st.w + 1e-6f);
  x[0] = g;
  x[1] = fminf(0.1f, fmaxf(-0.1f, g));
  x[2] = p;
  x[3] = st.x;
  x[4] = st.y;
  x[5] = st.z;
  x[6] = st.w;
  x[7] = st.x * s;
  x[8] = st.y * s;
  x[9] = st.z * s;
  x[10] = s;
  x[11] = g * sg[0];
  x[12] = g * sg[1];
  x[13] = g * sg[2];
  x[14] = g * s;
  x[15] = st.x * sg[0];
  x[16] = st.y * sg[1];
  x[17] = st.z * sg[2];
}

// Pass B: moments, and per block the sums of squares of the features plus the old state's sums (LSTM
// inputs). Channels 15-26 of factored tensors are left to F2 (lo_side_sums).
struct VeloPassB {
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
  double* partial;  // per work item: kS sums
  const VeloScalars* sc;
  LoDecays d;
};
__global__ void __launch_bounds__(kLoThreads) velo_pass_b(const VeloPassB a) {
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
  const VeloScalars* __restrict__ sc = a.sc;
  const LoDecays& d = a.d;
  const LoWork w = works[blockIdx.x];
  const LoTensor t = ts[w.tensor];
  const float gs = sc->step.grad_scale;
  float acc[kS];
#pragma unroll
  for (int k = 0; k < kS; k++) acc[k] = 0.0f;
  auto old_sums = [&](float4 old) {
    acc[kF + 0] += old.x;
    acc[kF + 1] += old.y;
    acc[kF + 2] += old.z;
    acc[kF + 3] += old.x * old.x;
    acc[kF + 4] += old.y * old.y;
    acc[kF + 5] += old.z * old.z;
    acc[kF + 6] += old.w;
    acc[kF + 7] += old.w * old.w;
  };
  if (w.tile) {
    const LoSides sd = lo_sides(t, rfac, cfac);
    const int64_t col = w.col0 + int(threadIdx.x);
    const float4 fb = col < t.nb ? sd.fac_b[col] : make_float4(0, 0, 0, 0);
    lo_tile_column<4>(w, t, g, p, state, [&](int64_t row, int64_t at, float gv, float pv, float4 old) {
      float sg[3];
      lo_tile_sg(sd.fac_a[row], fb, sg);
      const float gg = velo_g(gv, gs);
      old_sums(old);
      const float4 st = lo_step_record(state, t.s_off + at, old, gg, d);
      float x[18];
      velo_elem18(gg, pv, st, sg, x);
      lo_add_squares_tile<kLead, 18>(x, acc);
    });
  } else {
    const Chunk c{t.p_off + w.row0, t.s_off + w.row0, w.n, w.tensor};
    const LoFactorView fv{rrec, crec, rfac, cfac, diag};
    auto body = [&](int e, float gv, float pv, const float4 old) {
      const int64_t i = w.row0 + e;
      const float gg = velo_g(gv, gs);
      old_sums(old);
      LoElem el;
      lo_flat_step<true>(t, i, gg, pv, old, state, c.s_begin + e, diag, fv, d, el);
      float x[kF];
      velo_features(el, x);
      lo_add_squares_flat<kLead, kF>(x, t.factored, acc);
    };
    lo_for_each_pair<kLoThreads>(c, g, p, state, body);
  }
  lo_block_sums<kS>(acc, partial + int64_t(blockIdx.x) * kS);
}

__device__ __forceinline__ float velo_la(double x) {
  return 0.5f * fminf(5.0f, fmaxf(-5.0f, float(log(1e-8 + fabs(10.0 * x)))));
}

// One block of 1024 threads per tensor: normalisers, param scale, and the LSTM input row.
__global__ void __launch_bounds__(1024)
    velo_norms(const LoTensor* __restrict__ ts, const double* __restrict__ partial, const float4* __restrict__ rrec,
               const float4* __restrict__ crec, const VeloScalars* __restrict__ sc, float* __restrict__ norm,
               float* __restrict__ x) {
  const LoTensor t = ts[blockIdx.x];
  __shared__ double S[kS], side[12];
  lo_tensor_sums<kS>(partial, t.work_begin, t.work_end, S);
  if (t.factored) lo_add_side_sums<kLead>(t, rrec, crec, side, S);
  const int k = threadIdx.x;
  const double n = double(t.numel);
  if (k < kF) norm[blockIdx.x * kNormLd + k] = lo_normaliser(S[k], n);
  if (k == kF) norm[blockIdx.x * kNormLd + kF] = sqrtf(float(S[2] / n) + 1e-9f);
  if (k != 0) return;
  float* row = x + blockIdx.x * kLdX;
  for (int j = 0; j < 18; j++) row[j] = sc->lstm_shared[j];
  const double nm = 1.0 / sqrt(fmax(1e-9, S[2] / n));
  const double mean_v = nm * S[kF + 6] / n, ev2 = nm * nm * S[kF + 7] / n;
  row[18] = velo_la(mean_v);
  for (int r = 0; r < 5; r++) row[19 + r] = t.rank_class == r ? 1.0f : 0.0f;
  for (int q = 0; q < 3; q++) {
    const double mu = nm * S[kF + q] / n;
    const double var_m = fmax(0.0, nm * nm * S[kF + 3 + q] / n - mu * mu);
    const double var_v = fmax(0.0, ev2 - 2.0 * mu * mean_v + mu * mu);
    row[24 + q] = velo_la(var_m);
    row[27 + q] = velo_la(var_v);
  }
  row[30] = 1.0f;
  row[31] = 0.0f;
}

// pooled[o] = max over tensors of relu(linear_1): 16 blocks of 32 channels x 32 row strides.
__global__ void __launch_bounds__(1024) velo_pool(int n, const float* __restrict__ mix, float* __restrict__ pooled) {
  __shared__ float part[32][33];
  const int c = threadIdx.x % 32, j = threadIdx.x / 32, o = blockIdx.x * 32 + c;
  float mx = 0.0f;  // = max_i relu(a_i)
  for (int i = j; i < n; i += 32) mx = fmaxf(mx, mix[i * 1024 + o]);
  part[j][c] = mx;
  __syncthreads();
  if (j == 0) {
    for (int k = 1; k < 32; k++) mx = fmaxf(mx, part[k][c]);
    pooled[o] = mx;
  }
}

// [U | h | 1 | 0...] rows for the LSTM GEMM, U = linear_2 + pooled.
__global__ void velo_lstm_in(int n, const float* __restrict__ mix, const float* __restrict__ pooled,
                             const float* __restrict__ h, float* __restrict__ uh) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= n * kLdUH) return;
  const int i = idx / kLdUH, k = idx % kLdUH;
  uh[idx] = k < 512 ? mix[i * 1024 + 512 + k] + pooled[k] : k < 1024 ? h[i * 512 + k - 512] : (k == 1024 ? 1.0f : 0.0f);
}

__device__ __forceinline__ float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

// LSTM cell (gate order i, g, f, o; forget bias +1), then [h_new | 1] for the output GEMM.
__global__ void velo_gates(int n, const float* __restrict__ z, float* __restrict__ h, float* __restrict__ c,
                           float* __restrict__ hx) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= n * 512) return;
  const int i = idx / 512, o = idx % 512;
  const float* zi = z + int64_t(i) * 2048;
  const float cn = sigm(zi[1024 + o] + 1.0f) * c[idx] + sigm(zi[o]) * tanhf(zi[512 + o]);
  const float hn = sigm(zi[1536 + o]) * tanhf(cn);
  c[idx] = cn;
  h[idx] = hn;
  hx[i * kLdHX + o] = hn;
  if (o < kLdHX - 512) hx[i * kLdHX + 512 + o] = o == 0 ? 1.0f : 0.0f;
}

// Per step and tile2d tensor, after the per-tensor MLPs exist: each row's (A side, with the first
// layer's bias) and each column's (B side) share of the first layer, from the 6 features of its R or C
// entry {val_k, rsqrt(val_k + 1e-8)} with the normalisers folded in.
struct VeloSide {
  const LoSideItem* items;  // one block each
  const LoTensor* ts;
  const float4* rrec;
  const float4* crec;
  const float* norm;   // per tensor: 30 normalisers, param scale
  const float* theta;  // per tensor: its MLP
  float4* side_a;      // per row: its share of the first layer, with b0
  float4* side_b;      // per column: its share
};
__global__ void __launch_bounds__(256) velo_side(const VeloSide a) {
  const LoSideItem* __restrict__ items = a.items;
  const LoTensor* __restrict__ ts = a.ts;
  const float4* __restrict__ rrec = a.rrec;
  const float4* __restrict__ crec = a.crec;
  const float* __restrict__ norm = a.norm;
  const float* __restrict__ theta = a.theta;
  float4* __restrict__ side_a = a.side_a;
  float4* __restrict__ side_b = a.side_b;
  const LoSideItem it = items[blockIdx.x];
  const LoTensor t = ts[it.tensor];
  const bool use_r = (it.side == 1) == lo_b_is_r(t);       // is this side's vector R?
  const int ch0 = use_r ? 15 : 18, ch1 = use_r ? 21 : 24;  // channels of val_k and of rsqrt(val_k + 1e-8)
  const float* th = theta + int64_t(it.tensor) * kTheta;
  __shared__ float wsh[6][4];
  if (threadIdx.x < 24) {
    const int j = threadIdx.x / 4, o = threadIdx.x % 4, ch = j < 3 ? ch0 + j : ch1 + j - 3;
    wsh[j][o] = th[o * kF + ch] * norm[it.tensor * kNormLd + ch];
  }
  __syncthreads();
  const int64_t e = it.first + threadIdx.x;
  if (e >= (it.side ? t.nb : t.na)) return;
  const float4 v = use_r ? rrec[t.r_off + e] : crec[t.c_off + e];
  // lo_entry_features, written out: through the helper the compiler lays out this kernel's branches
  // differently (the same arithmetic, other instructions).
  const float f[6] = {v.x, v.y, v.z, rsqrtf(v.x + 1e-8f), rsqrtf(v.y + 1e-8f), rsqrtf(v.z + 1e-8f)};
  float h[4];
#pragma unroll
  for (int o = 0; o < 4; o++) {
    float a = it.side == 0 ? th[kThB0 + o] : 0.0f;
#pragma unroll
    for (int j = 0; j < 6; j++) a = fmaf(wsh[j][o], f[j], a);
    h[o] = a;
  }
  (it.side == 0 ? side_a + t.side_a_off : side_b + t.side_b_off)[e] = make_float4(h[0], h[1], h[2], h[3]);
}

__device__ __forceinline__ float4 lds4(const float4* a) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0,%1,%2,%3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(uint32_t(__cvta_generic_to_shared(a))));
  return v;
}

// Layers 2 and 3 of the per-tensor MLP (th = its 159 weights, 16-byte aligned) for U elements from the
// first layer's pre-activations.
template <int U>
__device__ __forceinline__ void velo_head(const float (*h0)[4], const float4* th, float* dir, float* mag) {
  float h2[U][4];
#pragma unroll
  for (int o = 0; o < 4; o++) {
    const float4 w = lds4(&th[kThW1 / 4 + o]);  // W1 row o
    const float b = reinterpret_cast<const float*>(th)[kThB1 + o];
#pragma unroll
    for (int u = 0; u < U; u++) {
      float a = b;
      a = fmaf(w.x, fmaxf(h0[u][0], 0.0f), a);
      a = fmaf(w.y, fmaxf(h0[u][1], 0.0f), a);
      a = fmaf(w.z, fmaxf(h0[u][2], 0.0f), a);
      a = fmaf(w.w, fmaxf(h0[u][3], 0.0f), a);
      h2[u][o] = fmaxf(a, 0.0f);
    }
  }
  const float4 wd = lds4(&th[kThW2 / 4]), wm = lds4(&th[kThW2 / 4 + 1]), b = lds4(&th[kThB2 / 4]);  // W2 rows 0, 1; b2
#pragma unroll
  for (int u = 0; u < U; u++) {
    float d = b.x, m = b.y;
    d = fmaf(wd.x, h2[u][0], d);
    m = fmaf(wm.x, h2[u][0], m);
    d = fmaf(wd.y, h2[u][1], d);
    m = fmaf(wm.y, h2[u][1], m);
    d = fmaf(wd.z, h2[u][2], d);
    m = fmaf(wm.z, h2[u][2], m);
    d = fmaf(wd.w, h2[u][3], d);
    m = fmaf(wm.w, h2[u][3], m);
    dir[u] = d;
    mag[u] = m;
  }
}

// __restrict__ parameters rather than a struct: beside inline asm (lds4), nvcc reads pointers from a
// struct without the read-only path and compiles the tile loop differently (lo_core.h).
__global__ void __launch_bounds__(kLoThreads, 2)
    velo_pass_c(const LoWork* __restrict__ works, const LoTensor* __restrict__ ts, const float* __restrict__ g,
                float* __restrict__ p, __nv_bfloat16* __restrict__ pb, const float4* __restrict__ state,
                const float4* __restrict__ diag, const float4* __restrict__ rrec, const float4* __restrict__ crec,
                const float4* __restrict__ rfac, const float4* __restrict__ cfac, const float4* __restrict__ side_a,
                const float4* __restrict__ side_b, const float* __restrict__ norm, const float* __restrict__ theta,
                const float* __restrict__ cs, const VeloScalars* __restrict__ sc, float wd) {
  __shared__ __align__(16) float th[kThetaPad];
  __shared__ float4 w0[32];  // flat: 4 rows x 32 (normaliser folded, zero padded)
  __shared__ float4 we[18];  // tile: the 4 first-layer weights of each per-element feature, normaliser folded
  const LoWork w = works[blockIdx.x];
  const LoTensor t = ts[w.tensor];
  const float* tht = theta + int64_t(w.tensor) * kTheta;
  const float* nt = norm + w.tensor * kNormLd;
  for (int k = threadIdx.x; k < kThetaPad; k += kLoThreads) th[k] = k < kTheta ? tht[k] : 0.0f;
  if (threadIdx.x < 128) {
    const int o = threadIdx.x / 32, k = threadIdx.x % 32;
    reinterpret_cast<float*>(w0)[threadIdx.x] = k < kF ? tht[o * kF + k] * nt[k] : 0.0f;
  }
  if (threadIdx.x < 72) {
    const int j = threadIdx.x / 4, o = threadIdx.x % 4, ch = lo_elem_ch<kLead>(j);
    reinterpret_cast<float*>(we)[threadIdx.x] = tht[o * kF + ch] * nt[ch];
  }
  __syncthreads();
  const float gs = sc->step.grad_scale, lr = sc->step.lr, wdf = t.decay ? wd : 0.0f;
  const float mult = cs[int64_t(w.tensor) * kCS + kCS - 1] * 0.001f * nt[kF];  // lr_mult * 1e-3 * rms(p)
  auto update = [&](int64_t at, float pv, float dir, float mag) {
    const float stp = mult * dir * expf(0.001f * mag);
    float pn = pv - lr * stp;
    if (wdf > 0) pn -= lr * wdf * pn;
    lo_store_param(p, pb, t.p_off + at, pn);
  };
  if (w.tile) {
    const LoSides sd = lo_sides(t, rfac, cfac);
    const int64_t col = w.col0 + int(threadIdx.x);
    const bool live = col < t.nb;
    const float4 fb = live ? sd.fac_b[col] : make_float4(0, 0, 0, 0);
    const float4 hb = live ? side_b[t.side_b_off + col] : make_float4(0, 0, 0, 0);
    if (!live) return;
    // kUnrollC rows at a time: their loads in flight together, each weight read once for all of them
    // (lds4: volatile, so the compiler does not hoist the 110 weights into registers and spill).
    const int nb = int(t.nb);
    const int64_t at0 = w.row0 * t.nb + col;
    for (int r = 0; r < w.n; r += kUnrollC) {
      float gv[kUnrollC], pv[kUnrollC], h[kUnrollC][4], x[kUnrollC][18];
      float4 st[kUnrollC];
#pragma unroll
      for (int u = 0; u < kUnrollC; u++) {
        const int64_t at = at0 + int64_t(min(r + u, w.n - 1)) * nb;  // past the tile's end: repeat its last row
        gv[u] = g[t.p_off + at];
        pv[u] = p[t.p_off + at];
        st[u] = state[t.s_off + at];
      }
#pragma unroll
      for (int u = 0; u < kUnrollC; u++) {
        const int64_t row = w.row0 + min(r + u, w.n - 1);
        const float4 fa = sd.fac_a[row], ha = side_a[t.side_a_off + row];
        float sg[3];
        lo_tile_sg(fa, fb, sg);
        velo_elem18(velo_g(gv[u], gs), pv[u], st[u], sg, x[u]);
        h[u][0] = ha.x + hb.x;
        h[u][1] = ha.y + hb.y;
        h[u][2] = ha.z + hb.z;
        h[u][3] = ha.w + hb.w;
      }
#pragma unroll
      for (int j = 0; j < 18; j++) {
        const float4 wj = lds4(&we[j]);
#pragma unroll
        for (int u = 0; u < kUnrollC; u++) {
          h[u][0] = fmaf(wj.x, x[u][j], h[u][0]);
          h[u][1] = fmaf(wj.y, x[u][j], h[u][1]);
          h[u][2] = fmaf(wj.z, x[u][j], h[u][2]);
          h[u][3] = fmaf(wj.w, x[u][j], h[u][3]);
        }
      }
      float dir[kUnrollC], mag[kUnrollC];
      velo_head<kUnrollC>(h, reinterpret_cast<const float4*>(th), dir, mag);
#pragma unroll
      for (int u = 0; u < kUnrollC; u++)
        if (r + u < w.n) update(at0 + int64_t(r + u) * nb, pv[u], dir[u], mag[u]);
    }
  } else {
    for (int e = threadIdx.x; e < w.n; e += kLoThreads) {
      const int64_t i = w.row0 + e;
      const float gv = velo_g(g[t.p_off + i], gs);
      const float pv = p[t.p_off + i];
      const float4 st = state[t.s_off + i];
      LoElem el;
      lo_elem<true>(t, i, gv, pv, st, LoFactorView{rrec, crec, rfac, cfac, diag}, el);
      float x[32];
      velo_features(el, x);
      x[30] = x[31] = 0.0f;
      float h[4];
#pragma unroll
      for (int o = 0; o < 4; o++) {
        float a = th[kThB0 + o];
#pragma unroll
        for (int q = 0; q < 8; q++) {  // 32 weights a row (30 + 2 zero pads), 16 bytes at a time
          const float4 wq = w0[o * 8 + q];
          a = fmaf(wq.x, x[4 * q], a);
          a = fmaf(wq.y, x[4 * q + 1], a);
          if (4 * q + 2 < kF) a = fmaf(wq.z, x[4 * q + 2], a);
          if (4 * q + 3 < kF) a = fmaf(wq.w, x[4 * q + 3], a);
        }
        h[o] = a;
      }
      float dir, mag;
      velo_head<1>(&h, reinterpret_cast<const float4*>(th), &dir, &mag);
      update(i, el.p, dir, mag);
    }
  }
}

// Row-major `out` (rows x m) = `in` (rows x k, ld ldi) * W^T, W row-major (m x k, ld ldw).
void gemm_rows(cublasHandle_t h, int rows, int m, int k, const float* W, int ldw, const float* in, int ldi, float* out,
               int ldo) {
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, rows, k, &alpha, W, ldw, in, ldi, &beta, out, ldo));
}

std::vector<float> with_bias_cols(const std::vector<float>& w, const std::vector<float>& b, int rows, int k, int ld) {
  std::vector<float> out(size_t(rows) * size_t(ld), 0.0f);
  for (int r = 0; r < rows; r++) {
    std::copy_n(&w[size_t(r) * size_t(k)], k, &out[size_t(r) * size_t(ld)]);
    out[size_t(r) * size_t(ld) + size_t(k)] = b[size_t(r)];
  }
  return out;
}
}  // namespace

Velo::Velo(Arena& arena, const OptimOptions& opts, const VeloWeights& w, const std::vector<int>& owned)
    : Optimizer(arena, opts, owned),
      core_(arena, owned_, parse_tie_rule(opts.velo.tie, kVeloPyloTie), false, kChunk),
      n_(core_.n_tensors) {
  const float nom[3] = {0.9f, 0.99f, 0.999f};
  for (int k = 0; k < 3; k++) dec_.m[k] = dec_.f[k] = nom[k];
  dec_.v = 0.999f;
  CUBLAS_CHECK(cublasCreate(&blas_));
  CUBLAS_CHECK(cublasSetMathMode(blas_, CUBLAS_PEDANTIC_MATH));  // full FP32, never TF32
  std::vector<float> mix = with_bias_cols(w.mix2_w, w.mix2_b, 512, 30, kLdX);
  std::vector<float> fin = with_bias_cols(w.final_w, w.final_b, 512, 30, kLdX);
  mix.insert(mix.end(), fin.begin(), fin.end());
  w_mix_.alloc(mix.size(), "VeLO mixing weights");
  w_mix_.upload(mix);
  std::vector<float> lstm = with_bias_cols(w.lstm_w, w.lstm_b, 2048, 1024, kLdUH);
  w_lstm_.alloc(lstm.size(), "VeLO LSTM weights");
  w_lstm_.upload(lstm);
  std::vector<float> ctrl = w.ctrl_w, cb = w.ctrl_b;
  ctrl.insert(ctrl.end(), w.ss_w.begin(), w.ss_w.end());
  cb.push_back(w.ss_b[0]);
  std::vector<float> out = with_bias_cols(ctrl, cb, kCS, 512, kLdHX);
  w_out_.alloc(out.size(), "VeLO output weights");
  w_out_.upload(out);
  cand_.alloc(w.cand.size(), "VeLO candidate MLPs");
  cand_.upload(w.cand);
  std::vector<float> h0, c0;
  for (int i = 0; i < n_; i++) {
    h0.insert(h0.end(), w.init_h.begin(), w.init_h.end());
    c0.insert(c0.end(), w.init_c.begin(), w.init_c.end());
  }
  h_.alloc(h0.size(), "VeLO LSTM h");
  h_.upload(h0);
  c_.alloc(c0.size(), "VeLO LSTM c");
  c_.upload(c0);
  VeloLossBuffer ref(opts.velo.num_steps);
  VeloLossState ls{};
  for (int j = 0; j < 10; j++) {
    ls.decay[j] = ref.decay[j];
    ls.means[j] = 0.0f;
    ls.running_min[j] = ref.running_min[j];
  }
  loss_.alloc(1, "VeLO loss buffer");
  loss_.upload(&ls, 1);
  alloc_rows(n_);
  pooled_.alloc(512, "VeLO pooled mixing");
  partial_.alloc(core_.work.size() * kS, "VeLO partial sums");
  side_a_.alloc(size_t(core_.side_a_len), "VeLO row-side first-layer shares");
  side_b_.alloc(size_t(core_.side_b_len), "VeLO column-side first-layer shares");
  norm_.alloc(size_t(n_) * kNormLd, "VeLO normalisers");
  scalars_.alloc(1, "VeLO scalars");
  make_passes();
}

void Velo::alloc_rows(int rows) {
  rows_ = rows;
  x_.alloc(size_t(rows_) * kLdX, "VeLO LSTM inputs");
  mix_.alloc(size_t(rows_) * 1024, "VeLO mixing");
  uh_.alloc(size_t(rows_) * kLdUH, "VeLO LSTM input");
  z_.alloc(size_t(rows_) * 2048, "VeLO gates");
  hx_.alloc(size_t(rows_) * kLdHX, "VeLO LSTM output");
  cs_.alloc(size_t(rows_) * kCS, "VeLO controls");
  theta_.alloc(size_t(rows_) * kTheta, "VeLO per-tensor MLPs");
  for (DeviceBuffer<float>* b : {&x_, &mix_, &uh_, &z_, &hx_, &cs_, &theta_}) b->zero();  // the rows past n_ stay 0
}

void Velo::set_cross_rank(CrossRank* c) {
  Optimizer::set_cross_rank(c);
  alloc_rows(std::max(n_, arena_.table().size()));  // a rank's share rounds as the whole table does
  make_passes();                                    // they hold the buffers' addresses
}

// The arguments of passes B and side: the buffers never move, so they are set once.
struct Velo::Passes {
  VeloPassB b;
  VeloSide side;
};

void Velo::make_passes() {
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
  passes_->side = {core_.side_items.get(), core_.tensors.get(), core_.rrec.get(), core_.crec.get(), norm_.get(),
                   theta_.get(),           side_a_.get(),       side_b_.get()};
}

Velo::~Velo() {
  if (blas_) cublasDestroy(blas_);
}

void Velo::step(const StepInfo& info, cudaStream_t s) {
  if (!info.d_loss) user_error("VeLO needs the step's training loss (StepInfo::d_loss); none was given.");
  const VeloOptions& h = opts_.velo;
  velo_begin<<<1, 1, 0, s>>>(d_step_.get(), loss_.get(), info.d_loss, h.num_steps, h.lr, opts_.schedule,
                             info.d_grad_scale, scalars_.get());
  CUDA_CHECK_LAUNCH();
  core_.factor_passes(&scalars_.get()->step.grad_scale, 1000.0f, dec_, s);
  const unsigned nw = unsigned(core_.work.size());
  velo_pass_b<<<nw, kLoThreads, 0, s>>>(passes_->b);
  CUDA_CHECK_LAUNCH();
  velo_norms<<<unsigned(n_), 1024, 0, s>>>(core_.tensors.get(), partial_.get(), core_.rrec.get(), core_.crec.get(),
                                           scalars_.get(), norm_.get(), x_.get());
  CUDA_CHECK_LAUNCH();
  CUBLAS_CHECK(cublasSetStream(blas_, s));
  gemm_rows(blas_, rows_, 1024, kLdX, w_mix_.get(), kLdX, x_.get(), kLdX, mix_.get(), 1024);
  velo_pool<<<16, 1024, 0, s>>>(n_, mix_.get(), pooled_.get());
  CUDA_CHECK_LAUNCH();
  if (cross_) cross_->max(pooled_.get(), 512, s);  // the pooling is over every tensor of the table
  velo_lstm_in<<<unsigned((n_ * kLdUH + 255) / 256), 256, 0, s>>>(n_, mix_.get(), pooled_.get(), h_.get(), uh_.get());
  CUDA_CHECK_LAUNCH();
  gemm_rows(blas_, rows_, 2048, kLdUH, w_lstm_.get(), kLdUH, uh_.get(), kLdUH, z_.get(), 2048);
  velo_gates<<<unsigned((n_ * 512 + 255) / 256), 256, 0, s>>>(n_, z_.get(), h_.get(), c_.get(), hx_.get());
  CUDA_CHECK_LAUNCH();
  gemm_rows(blas_, rows_, kCS, kLdHX, w_out_.get(), kLdHX, hx_.get(), kLdHX, cs_.get(), kCS);
  {  // theta (n x 159) = controls (n x 256) * cand (256 x 159) * 100/256
    const float alpha = 100.0f / 256.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, kTheta, rows_, 256, &alpha, cand_.get(), kTheta,
                             cs_.get(), kCS, &beta, theta_.get(), kTheta));
  }
  if (core_.side_items.size()) {
    velo_side<<<unsigned(core_.side_items.size()), 256, 0, s>>>(passes_->side);
    CUDA_CHECK_LAUNCH();
  }
  velo_pass_c<<<nw, kLoThreads, 0, s>>>(
      core_.work.get(), core_.tensors.get(), arena_.grads(), arena_.params(), arena_.params_bf16(), core_.state.get(),
      core_.diag.get(), core_.rrec.get(), core_.crec.get(), core_.rfac.get(), core_.cfac.get(), side_a_.get(),
      side_b_.get(), norm_.get(), theta_.get(), cs_.get(), scalars_.get(), float(h.weight_decay));
  CUDA_CHECK_LAUNCH();
}

std::vector<Optimizer::StateBuffer> Velo::state_buffers() const {
  return {{"lopt.moments", core_.state.get(), core_.state.bytes()},
          {"lopt.vector_factors", core_.diag.get(), core_.diag.bytes()},
          {"lopt.R", core_.rrec.get(), core_.rrec.bytes()},
          {"lopt.C", core_.crec.get(), core_.crec.bytes()},
          {"velo.lstm_h", h_.get(), h_.bytes()},
          {"velo.lstm_c", c_.get(), c_.bytes()},
          {"velo.loss_buffer", loss_.get(), loss_.bytes()}};
}

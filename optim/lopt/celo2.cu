// CELO2 / ELO_CELO2 kernels and their schedule (celo2.h). Semantics and operation order follow the CPU
// reference (optim/ref/ref_celo2*.cpp): g = clamp((g * gs) * clip, +-grad_clip_val); elementwise math in
// fp32; reductions in double over fixed partitions (per-thread, then warp shuffles, then warps in order,
// then items in order), so results do not depend on scheduling.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "optim/lopt/celo2.h"
#include "optim/ref/ref_celo2.h"  // celo2_decays: the same constants as the reference
#include "optim/step_scalars.cuh"

namespace {
constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kRun = 4096;           // elements per item (16 per thread)
constexpr int kCh = 30, kPart = 32;  // features; doubles per item in partial_ (30 channels, pad)
constexpr int kClipChunk = 16384;
// MLP weights as uploaded: W0 (30 x 8, row = channel) | b0 | W1 (8 x 8, [in][out]) | b1 | W2 columns 0-1
// (8 x 2) | b2[0..1].
constexpr int kH = 8, kW0 = 0, kB0 = kCh * kH, kW1 = kB0 + kH, kB1 = kW1 + kH * kH, kW2 = kB1 + kH, kB2 = kW2 + 2 * kH,
              kWeights = kB2 + 2;

__device__ __forceinline__ float keep_nan_clamp(float x, float lo, float hi) {
  return x < lo ? lo : (x > hi ? hi : x);  // torch.clamp: NaN stays NaN
}

// 5.1: the trainer's scale, then the global clip factor, then the +-grad_clip_val clamp.
__device__ __forceinline__ float c2_grad(float g, const C2Scalars& sc, float cv) {
  return keep_nan_clamp(g * sc.gs * sc.clip, -cv, cv);
}

// The direction buffer holds float or bf16 (celo2.h).
__device__ __forceinline__ float dx_load(const float* p) { return *p; }
__device__ __forceinline__ float dx_load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void dx_store(float* p, float x) { *p = x; }
__device__ __forceinline__ void dx_store(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }

__device__ __forceinline__ double warp_sum_d(double x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Sum over the block of one double per thread, in a fixed order; the result is valid in thread 0.
__device__ double block_sum_d(double x) {
  __shared__ double red[kWarps];
  x = warp_sum_d(x);
  __syncthreads();  // red may still be read by a previous call
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = x;
  __syncthreads();
  double s = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < kWarps; w++) s += red[w];
  return s;
}

// Partial sums of (g gs)^2 per chunk, squares in fp32 as PyLO's (ref_global_clip_scale).
__global__ void __launch_bounds__(kThreads)
    c2_clip_partials(const Chunk* __restrict__ chunks, const float* __restrict__ g, const float* __restrict__ gscale,
                     double* __restrict__ partial) {
  const Chunk c = chunks[blockIdx.x];
  const float gs = read_grad_scale(gscale);
  double s = 0;
  for (int e = threadIdx.x; e < c.n; e += kThreads) {
    const float x = g[c.p_begin + e] * gs;
    s += double(x * x);
  }
  s = block_sum_d(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

struct C2Begin {
  double lr, adam_lr_mult, clip_norm, beta1, beta2;
  int clip_grad;
  LrSchedule sched;
};

// Counter, schedule, global clip factor and AdamW's bias corrections (one block).
__global__ void __launch_bounds__(kThreads)
    c2_begin(int64_t* step, const C2Begin a, const float* gscale, const double* __restrict__ clip_partial,
             int n_partial, C2Scalars* out) {
  double s = 0;
  if (a.clip_grad)
    for (int i = threadIdx.x; i < n_partial; i += kThreads) s += clip_partial[i];
  s = block_sum_d(s);
  if (threadIdx.x != 0) return;
  const int64_t t = *step;
  C2Scalars sc;
  sc.gs = read_grad_scale(gscale);
  sc.clip = 1.0f;
  if (a.clip_grad) {
    const double norm = sqrt(double(float(s)));  // PyLO's float32 total
    if (!isnan(norm)) sc.clip = float(a.clip_norm / fmax(norm, a.clip_norm));
  }
  sc.gs_total = sc.gs * sc.clip;
  const double lr = a.lr * a.sched.factor(t);
  sc.lr = float(lr);
  sc.lr_adam = float(a.adam_lr_mult * lr);
  sc.bc1 = float(1.0 - pow(a.beta1, double(t + 1)));
  sc.bc2 = float(1.0 - pow(a.beta2, double(t + 1)));
  *out = sc;
  *step = t + 1;
}

// AdamW side path (5.2) in the reference's order: p -= lr (m / bc1 / (sqrt(v / bc2) + eps) + wd p).
struct C2Adam {
  const Chunk* chunks;
  const float* g;
  float* p;
  __nv_bfloat16* pb;  // bf16 copy or null
  float* m;
  float* v;
  const float* wd;  // per table index
  const C2Scalars* sc;
  float b1, w1, b2, w2, eps, cv;
};
__global__ void __launch_bounds__(kThreads) c2_adamw(const C2Adam a) {
  const Chunk c = a.chunks[blockIdx.x];
  const C2Scalars sc = *a.sc;
  const float wd = a.wd[c.tensor];
  for (int e = threadIdx.x; e < c.n; e += kThreads) {
    const int64_t pi = c.p_begin + e, si = c.s_begin + e;
    const float g = c2_grad(a.g[pi], sc, a.cv);
    const float m = a.m[si] * a.b1 + a.w1 * g;
    const float v = a.v[si] * a.b2 + a.w2 * g * g;
    a.m[si] = m;
    a.v[si] = v;
    const float step = (m / sc.bc1) / (sqrtf(v / sc.bc2) + a.eps);
    const float p = a.p[pi] - sc.lr_adam * (step + wd * a.p[pi]);
    a.p[pi] = p;
    if (a.pb) a.pb[pi] = __float2bfloat16_rn(p);
  }
}

// The 30 raw features of one element (5.6.1) from g, the pre-step p, the updated record {m0, m1, m2, v},
// its R and C entries and their Adafactor factors; as celo2_features.
__device__ __forceinline__ void c2_features(float g, float p, float4 st, float4 R, float4 C, float4 rf, float4 cf,
                                            float4 rsR, float4 rsC, float* x) {
  const float m[3] = {st.x, st.y, st.z}, r[3] = {R.x, R.y, R.z}, c[3] = {C.x, C.y, C.z};
  const float rr[3] = {rsR.x, rsR.y, rsR.z}, rc[3] = {rsC.x, rsC.y, rsC.z};
  const float fr[3] = {rf.x, rf.y, rf.z}, fc[3] = {cf.x, cf.y, cf.z};
  const float v = st.w, rho = 1.0f / sqrtf(v + 1e-8f);
  x[0] = g;
  x[1] = keep_nan_clamp(g, -0.1f, 0.1f);
  x[2] = p;
  x[6] = v;
  x[10] = rho;
  x[14] = g * rho;
#pragma unroll
  for (int k = 0; k < 3; k++) {
    const float fg = fr[k] * fc[k];
    x[3 + k] = m[k];
    x[7 + k] = m[k] * rho;
    x[11 + k] = g * fg;
    x[15 + k] = r[k];
    x[18 + k] = c[k];
    x[21 + k] = rr[k];
    x[24 + k] = rc[k];
    x[27 + k] = m[k] * fg;
  }
}

// What passes B and C read.
struct C2Pass {
  const C2Item* items;
  const C2Mat* mats;
  const LoTensor* ts;
  const float* g;
  float* p;
  __nv_bfloat16* pb;
  float4* state;
  const float4* rrec;
  const float4* crec;
  const float4* rfac;
  const float4* cfac;
  const float4* rsr;  // 1 / sqrt(R + 1e-8), per R entry (c2_rsqrt_rc)
  const float4* rsc;  // the same for C
  const C2Scalars* sc;
  LoDecays d;
  float cv;
};

// Features of element i of tensor t; update: advance the record first (pass B) or read it (pass C).
__device__ __forceinline__ void c2_element(const C2Pass& a, const LoTensor& t, int64_t i, bool update,
                                           const C2Scalars& sc, float* x) {
  const float g = c2_grad(a.g[t.p_off + i], sc, a.cv), p = a.p[t.p_off + i];
  float4 st = a.state[t.s_off + i];
  if (update) {
    const LoDecays& d = a.d;
    st.x = d.m[0] * st.x + (1.0f - d.m[0]) * g;
    st.y = d.m[1] * st.y + (1.0f - d.m[1]) * g;
    st.z = d.m[2] * st.z + (1.0f - d.m[2]) * g;
    st.w = d.v * st.w + (1.0f - d.v) * g * g;
    a.state[t.s_off + i] = st;
  }
  int64_t ri, ci;
  lo_rc_index(t, i, ri, ci);
  ri += t.r_off;
  ci += t.c_off;
  c2_features(g, p, st, a.rrec[ri], a.crec[ci], a.rfac[ri], a.cfac[ci], a.rsr[ri], a.rsc[ci], x);
}

// The features 1 / sqrt(R + 1e-8) and 1 / sqrt(C + 1e-8) once per R and C entry instead of once per
// element: an IEEE reciprocal square root costs passes B and C a dozen instructions each.
__global__ void c2_rsqrt_rc(const float4* __restrict__ rec, int64_t n, float4* __restrict__ out) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float4 r = rec[i];
  out[i] = make_float4(1.0f / sqrtf(r.x + 1e-8f), 1.0f / sqrtf(r.y + 1e-8f), 1.0f / sqrtf(r.z + 1e-8f), 0.0f);
}

// Pass B: moments, and per item the 30 channels' sums of squares and the sum of p^2. Each thread sums its
// kRun / kThreads = 16 elements in fp32 (31 double accumulators would halve the occupancy of this
// memory-bound pass), the block in double.
__global__ void __launch_bounds__(kThreads, 3) c2_pass_b(const C2Pass a, double* __restrict__ partial) {
  const C2Item it = a.items[blockIdx.x];
  const LoTensor t = a.ts[it.slot];
  const C2Scalars sc = *a.sc;
  float acc[kCh];
#pragma unroll
  for (int c = 0; c < kCh; c++) acc[c] = 0;
  for (int e = threadIdx.x; e < it.n; e += kThreads) {
    float x[kCh];
    c2_element(a, t, it.begin + e, true, sc, x);
#pragma unroll
    for (int c = 0; c < kCh; c++) acc[c] = fmaf(x[c], x[c], acc[c]);
  }
  __shared__ double red[kWarps][kPart];
#pragma unroll
  for (int c = 0; c < kCh; c++) {
    const double s = warp_sum_d(double(acc[c]));
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32][c] = s;
  }
  __syncthreads();
  if (threadIdx.x >= kCh) return;
  double s = 0;
  for (int w = 0; w < kWarps; w++) s += red[w][threadIdx.x];
  partial[int64_t(blockIdx.x) * kPart + threadIdx.x] = s;
}

// Per slice (one block of 32): the 30 normalisers rsqrt(1e-9 + mean x_c^2) (5.7), and the sum of p^2
// (channel 2 is p).
__global__ void c2_sigma(const C2Slice* __restrict__ slices, const double* __restrict__ partial,
                         float* __restrict__ sigma, double* __restrict__ psq) {
  const C2Slice sl = slices[blockIdx.x];
  const int c = threadIdx.x;
  if (c >= kCh) return;
  double s = 0;
  for (int k = 0; k < sl.n_items; k++) s += partial[int64_t(sl.first_item + k) * kPart + c];
  if (c == 2) psq[blockIdx.x] = s;
  sigma[int64_t(blockIdx.x) * kPart + c] = 1.0f / sqrtf(1e-9f + float(s / double(sl.elems)));
}

// The MLP's weights in constant memory, every index known at compile time. (From shared memory nvcc hoisted
// all 338 into registers and spilled.) ptxas still loads each into a uniform register (ULDC) for its FMAs, a
// third of pass C's instructions at one element per weight load: c2_mlp2 feeds each load to two elements'
// FMAs and lets neighbouring weights load in pairs. One copy per process: each step copies its optimizer's
// weights in first, on its stream.
__constant__ float c2_mlp_w[kWeights];

// The MLP's two first outputs (5.8) from the normalised inputs, for two elements at once (x and y). Each
// unit's sum is as for one element, s = b[j] then fmaf over the inputs in order; only the order among
// independent sums differs: the two elements interleaved, so that each weight's constant load feeds two
// FMAs, and a layer's units side by side, input by input, so that neighbouring weights (W[c][j], W[c][j+1])
// load in pairs. ReLU keeps NaN.
__device__ __forceinline__ void c2_mlp2(const float* x, const float* y, float& dir_x, float& mag_x, float& dir_y,
                                        float& mag_y) {
  const float* w = c2_mlp_w;
  float h1x[kH], h1y[kH], h2x[kH], h2y[kH];
#pragma unroll
  for (int j = 0; j < kH; j++) h1x[j] = h1y[j] = w[kB0 + j];
#pragma unroll
  for (int c = 0; c < kCh; c++) {
#pragma unroll
    for (int j = 0; j < kH; j++) {
      h1x[j] = fmaf(x[c], w[kW0 + c * kH + j], h1x[j]);
      h1y[j] = fmaf(y[c], w[kW0 + c * kH + j], h1y[j]);
    }
  }
#pragma unroll
  for (int j = 0; j < kH; j++) {
    h1x[j] = h1x[j] < 0.0f ? 0.0f : h1x[j];
    h1y[j] = h1y[j] < 0.0f ? 0.0f : h1y[j];
    h2x[j] = h2y[j] = w[kB1 + j];
  }
#pragma unroll
  for (int k = 0; k < kH; k++) {
#pragma unroll
    for (int j = 0; j < kH; j++) {
      h2x[j] = fmaf(h1x[k], w[kW1 + k * kH + j], h2x[j]);
      h2y[j] = fmaf(h1y[k], w[kW1 + k * kH + j], h2y[j]);
    }
  }
  float o0 = w[kB2], o1 = w[kB2 + 1], q0 = w[kB2], q1 = w[kB2 + 1];
#pragma unroll
  for (int k = 0; k < kH; k++) {
    const float hx = h2x[k] < 0.0f ? 0.0f : h2x[k], hy = h2y[k] < 0.0f ? 0.0f : h2y[k];
    o0 = fmaf(hx, w[kW2 + 2 * k], o0);
    o1 = fmaf(hx, w[kW2 + 2 * k + 1], o1);
    q0 = fmaf(hy, w[kW2 + 2 * k], q0);
    q1 = fmaf(hy, w[kW2 + 2 * k + 1], q1);
  }
  dir_x = o0;
  mag_x = o1;
  dir_y = q0;
  mag_y = q1;
}

struct C2PassC {
  const float* sigma;
  const double* psq;
  double* partial1;  // per item: sum of D^2 (of D in fp32, before any rounding to the buffer's type)
  float exp_mult;
  int param_scale_mult;
};

// Pass C: normalised features, the MLP, D = dir exp(exp_mult mag) (x rms(p) with param_scale_mult) into
// dx, and per item the sum of D^2 (Newton-Schulz's Frobenius norm, or the final RMS without NS).
template <typename T>
__global__ void __launch_bounds__(kThreads, 2) c2_pass_c(const C2Pass a, const C2PassC c, T* __restrict__ dx) {
  __shared__ float ps;
  const C2Item it = a.items[blockIdx.x];
  const LoTensor t = a.ts[it.slot];
  const C2Scalars sc = *a.sc;
  if (threadIdx.x == 0) {
    ps = 1.0f;
    if (c.param_scale_mult) {  // rms over the whole tensor, as the reference's rms(p, n)
      const C2Mat m = a.mats[it.slot];
      double s = 0;
      for (int k = 0; k < m.n_slices; k++) s += c.psq[m.first_slice + k];
      ps = sqrtf(float(s / double(t.numel)) + 1e-9f);
    }
  }
  __syncthreads();
  float sg[kCh];
#pragma unroll
  for (int k = 0; k < kCh; k++) sg[k] = c.sigma[int64_t(it.slice) * kPart + k];
  double acc = 0;
  // Two elements per iteration, e and e + kThreads, so that each MLP weight is loaded once for both. When
  // the second is past the item's end the first is computed twice and the copy dropped. D^2 is added in
  // the order of the one-element loop (e, e + kThreads, e + 2 kThreads, ...).
  for (int e = threadIdx.x; e < it.n; e += 2 * kThreads) {
    const bool two = e + kThreads < it.n;
    const int f = two ? e + kThreads : e;
    float x[kCh], y[kCh];
    c2_element(a, t, it.begin + e, false, sc, x);
    c2_element(a, t, it.begin + f, false, sc, y);
#pragma unroll
    for (int k = 0; k < kCh; k++) {
      x[k] *= sg[k];
      y[k] *= sg[k];
    }
    float dir[2], mag[2];
    c2_mlp2(x, y, dir[0], mag[0], dir[1], mag[1]);
#pragma unroll
    for (int u = 0; u < 2; u++) {
      if (u == 1 && !two) break;
      const float em = expf(mag[u] * c.exp_mult);
      const float D = c.param_scale_mult ? dir[u] * (ps * em) : dir[u] * em;
      dx_store(dx + it.dx + (u ? f : e), D);
      acc += double(D) * D;
    }
  }
  acc = block_sum_d(acc);
  if (threadIdx.x == 0) c.partial1[blockIdx.x] = acc;
}

// Per item: sum of squares of dx (Newton-Schulz's output).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    c2_sumsq(const C2Item* __restrict__ items, const T* __restrict__ dx, double* __restrict__ partial1) {
  const C2Item it = items[blockIdx.x];
  double acc = 0;
  for (int e = threadIdx.x; e < it.n; e += kThreads) {
    const double o = dx_load(dx + it.dx + e);
    acc += o * o;
  }
  acc = block_sum_d(acc);
  if (threadIdx.x == 0) partial1[blockIdx.x] = acc;
}

// Per slice (one thread each): ns: ||D||_F + ns_eps (5.9.1); else rmsmult / sqrt(1e-9 + mean O^2) (5.9).
__global__ void c2_slice_scalar(const C2Slice* __restrict__ slices, int n, const double* __restrict__ partial1, bool ns,
                                double ns_eps, double rmsmult, double* __restrict__ out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const C2Slice sl = slices[i];
  double s = 0;
  for (int k = 0; k < sl.n_items; k++) s += partial1[sl.first_item + k];
  out[i] = ns ? sqrt(s) + ns_eps : rmsmult / sqrt(1e-9 + s / double(sl.elems));
}

// Newton-Schulz input, in place: each slice divided by ||D||_F + eps.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    c2_ns_in(const C2Item* __restrict__ items, const double* __restrict__ dnorm, T* __restrict__ dx) {
  const C2Item it = items[blockIdx.x];
  const double d = dnorm[it.slice];
  for (int e = threadIdx.x; e < it.n; e += kThreads)
    dx_store(dx + it.dx + e, float(double(dx_load(dx + it.dx + e)) / d));
}

// 5.9: u = O x (rmsmult / rms(O)) and p -= lr (u + wd p), p on the right before the step.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    c2_apply(const C2Pass a, const T* __restrict__ dx, const double* __restrict__ rscale) {
  const C2Item it = a.items[blockIdx.x];
  const LoTensor t = a.ts[it.slot];
  const float wd = a.mats[it.slot].wd, lr = a.sc->lr;
  const double r = rscale[it.slice];
  for (int e = threadIdx.x; e < it.n; e += kThreads) {
    const int64_t i = it.begin + e;
    const float u = float(double(dx_load(dx + it.dx + e)) * r);
    const float p0 = a.p[t.p_off + i];
    const float p = p0 - lr * (u + wd * p0);
    a.p[t.p_off + i] = p;
    if (a.pb) a.pb[t.p_off + i] = __float2bfloat16_rn(p);
  }
}

}  // namespace

Celo2::Celo2(Arena& arena, const OptimOptions& opts, const Celo2Weights& w, bool elo, const std::vector<int>& owned)
    : Optimizer(arena, opts, owned), elo_(elo), h_(elo ? opts.elo_celo2 : opts.celo2) {
  const ParamTable& tab = arena.table();
  std::vector<int> learned, adam;
  for (int i : owned_) {
    if (celo2_uses_adamw(tab[i], h_)) {
      adam.push_back(i);
      continue;
    }
    if (tab[i].ndim() < 2)
      user_error(name(), ": vectors through the MLP (", name(),
                 ".adamw_1d=false) exist only in the CPU reference; tensor '", tab[i].name, "' has ", tab[i].ndim(),
                 " dimensions.");
    learned.push_back(i);
  }
  const LoRefDecays rd = celo2_decays();
  for (int k = 0; k < 3; k++) {
    dec_.m[k] = rd.m[k];
    dec_.f[k] = rd.f[k];
  }
  dec_.v = rd.v;
  CHECK(w.out >= 2 && w.w0.size() == size_t(kCh * kH) && w.w1.size() == size_t(kH * kH));
  std::vector<float> pw(kWeights);
  std::copy(w.w0.begin(), w.w0.end(), pw.begin() + kW0);
  std::copy(w.b0.begin(), w.b0.end(), pw.begin() + kB0);
  std::copy(w.w1.begin(), w.w1.end(), pw.begin() + kW1);
  std::copy(w.b1.begin(), w.b1.end(), pw.begin() + kB1);
  for (int k = 0; k < kH; k++)
    for (int q = 0; q < 2; q++) pw[size_t(kW2 + 2 * k + q)] = w.w2[size_t(k * w.out + q)];
  pw[kB2] = w.b2[0];
  pw[kB2 + 1] = w.b2[1];
  weights_.alloc(pw.size(), "celo2 weights");
  weights_.upload(pw);
  scalars_.alloc(1, "celo2 scalars");
  plan_learned(learned);
  plan_adam(adam);
  if (h_.clip_grad) plan_clip();
}

void Celo2::plan_clip() {
  const ParamTable& tab = arena_.table();
  std::vector<int64_t> soff;
  plan_state_offsets(tab, owned_, &soff);
  const std::vector<Chunk> c =
      cross_ ? plan_table_chunks(tab, owned_, kClipChunk) : plan_chunks(tab, owned_, soff, kClipChunk);
  clip_chunks_.alloc(c.size(), "celo2 clip chunks");
  clip_chunks_.upload(c);
  clip_partial_.alloc(std::max<size_t>(c.size(), 1), "celo2 clip partials");
}

void Celo2::set_cross_rank(CrossRank* c) {
  Optimizer::set_cross_rank(c);
  if (h_.clip_grad) plan_clip();
}

// Items run over each slice in the tensor's order; the direction buffer groups slices by shape, each group
// back to back at NewtonSchulz's stride, so that one batched GEMM serves a whole group.
void Celo2::plan_learned(const std::vector<int>& learned) {
  if (learned.empty()) return;
  const ParamTable& tab = arena_.table();
  core_ = std::make_unique<LoCore>(arena_, learned, parse_tie_rule(h_.tie, kCelo2PyloTie), false, kRun);
  using Shape = std::pair<int64_t, int64_t>;
  std::map<Shape, int> count;
  for (int k = 0; k < int(learned.size()); k++) {
    const TensorInfo& ti = tab[learned[size_t(k)]];
    C2Mat m{};
    m.rows = ti.shape[size_t(ti.ndim() - 2)];
    m.cols = ti.shape[size_t(ti.ndim() - 1)];
    m.slices = ti.numel / (m.rows * m.cols);
    m.wd = ti.decay ? float(h_.weight_decay) : 0.0f;
    count[{m.rows, m.cols}] += int(m.slices);
    host_mats_.push_back(m);
  }
  std::map<Shape, int64_t> next;  // next free slot of each group in the direction buffer
  std::vector<NsGroup> groups;
  int64_t dx_elems = 0;
  for (const auto& [shape, n] : count) {
    const int64_t stride = ns_matrix_stride(shape.first, shape.second);
    groups.push_back({shape.first, shape.second, dx_elems, stride, n});
    next[shape] = dx_elems;
    dx_elems += stride * n;
  }
  std::vector<C2Slice> slices;
  std::vector<C2Item> items;
  for (int k = 0; k < int(host_mats_.size()); k++) {
    C2Mat& m = host_mats_[size_t(k)];
    const int64_t rc = m.rows * m.cols;
    m.first_slice = int32_t(slices.size());
    m.n_slices = int32_t(m.slices);
    for (int64_t b = 0; b < m.slices; b++) {
      int64_t& dx = next[{m.rows, m.cols}];
      C2Slice sl{k, int32_t(items.size()), 0, rc};
      for (int64_t e = 0; e < rc; e += kRun)
        items.push_back({k, int32_t(slices.size()), b * rc + e, dx + e, int32_t(std::min<int64_t>(kRun, rc - e))});
      dx += ns_matrix_stride(m.rows, m.cols);
      sl.n_items = int32_t(items.size()) - sl.first_item;
      slices.push_back(sl);
    }
  }
  n_slices_ = int(slices.size());
  n_items_ = int(items.size());
  mats_.alloc(host_mats_.size(), "celo2 matrices");
  mats_.upload(host_mats_);
  slices_.alloc(slices.size(), "celo2 slices");
  slices_.upload(slices);
  items_.alloc(items.size(), "celo2 work items");
  items_.upload(items);
  partial_.alloc(items.size() * kPart, "celo2 channel sums");
  partial1_.alloc(items.size(), "celo2 sums of squares");
  sigma_.alloc(slices.size() * kPart, "celo2 normalisers");
  psq_.alloc(slices.size(), "celo2 sums of p^2");
  dnorm_.alloc(slices.size(), "celo2 Frobenius norms");
  rscale_.alloc(slices.size(), "celo2 RMS scales");
  rsr_.alloc(core_->rrec.size(), "celo2 1/sqrt(R)");
  rsc_.alloc(core_->crec.size(), "celo2 1/sqrt(C)");
  const NsPrecision prec = parse_ns_precision(h_.ns, name() + ".ns");
  dx_bf16_ = h_.orthogonalize && prec == NsPrecision::Bf16;
  dx_.alloc(size_t(dx_elems) * (dx_bf16_ ? 2 : 4), "celo2 direction");
  if (h_.orthogonalize)  // the scratch cap is Muon's default: larger = fewer, bigger batched GEMMs
    ns_ = std::make_unique<NewtonSchulz>(groups, h_.ns_steps, h_.ns_a, h_.ns_b, h_.ns_c, size_t(1) << 30, prec);
}

void Celo2::plan_adam(const std::vector<int>& adam) {
  const ParamTable& tab = arena_.table();
  std::vector<float> wd(size_t(tab.size()), 0.0f);
  for (int i : adam) wd[size_t(i)] = tab[i].decay ? float(h_.adam_wd()) : 0.0f;
  adam_wd_.alloc(wd.size(), "celo2 AdamW weight decay");
  adam_wd_.upload(wd);
  if (adam.empty()) return;
  std::vector<int64_t> soff;
  adam_elems_ = plan_state_offsets(tab, adam, &soff);
  const std::vector<Chunk> c = plan_chunks(tab, adam, soff, kRun);
  adam_chunks_.alloc(c.size(), "celo2 AdamW chunks");
  adam_chunks_.upload(c);
  adam_m_.alloc(size_t(adam_elems_), "celo2 AdamW m");
  adam_m_.zero();
  adam_v_.alloc(size_t(adam_elems_), "celo2 AdamW v");
  adam_v_.zero();
}

void Celo2::step(const StepInfo& info, cudaStream_t s) {
  if (h_.clip_grad && clip_chunks_.size()) {
    c2_clip_partials<<<unsigned(clip_chunks_.size()), kThreads, 0, s>>>(clip_chunks_.get(), arena_.grads(),
                                                                        info.d_grad_scale, clip_partial_.get());
    CUDA_CHECK_LAUNCH();
    if (cross_) cross_->sum(clip_partial_.get(), clip_chunks_.size(), s);
  }
  // ELO_CELO2's AdamW reads PyLO's float32 decay tensors back: beta1 = 0.9f, beta2 = 0.95f, eps 1e-8.
  const double b1 = elo_ ? double(dec_.m[0]) : h_.adam_beta1, b2 = elo_ ? double(dec_.v) : h_.adam_beta2;
  const C2Begin bg{h_.lr, h_.adam_lr_mult, h_.clip_norm, b1, b2, h_.clip_grad ? 1 : 0, opts_.schedule};
  c2_begin<<<1, kThreads, 0, s>>>(d_step_.get(), bg, info.d_grad_scale, clip_partial_.get(), int(clip_chunks_.size()),
                                  scalars_.get());
  CUDA_CHECK_LAUNCH();
  if (adam_chunks_.size()) {
    C2Adam a{adam_chunks_.get(),
             arena_.grads(),
             arena_.params(),
             arena_.params_bf16(),
             adam_m_.get(),
             adam_v_.get(),
             adam_wd_.get(),
             scalars_.get(),
             float(b1),
             0,
             float(b2),
             0,
             0,
             float(h_.grad_clip_val)};
    a.w1 = elo_ ? 1.0f - dec_.m[0] : float(1.0 - h_.adam_beta1);
    a.w2 = elo_ ? 1.0f - dec_.v : float(1.0 - h_.adam_beta2);
    a.eps = elo_ ? 1e-8f : float(h_.adam_eps);
    c2_adamw<<<unsigned(adam_chunks_.size()), kThreads, 0, s>>>(a);
    CUDA_CHECK_LAUNCH();
  }
  if (core_) learned_step(s);
}

void Celo2::learned_step(cudaStream_t s) {
  core_->factor_passes(&scalars_.get()->gs_total, float(h_.grad_clip_val), dec_, s);
  for (auto [rec, out] : {std::pair{&core_->rrec, &rsr_}, std::pair{&core_->crec, &rsc_}}) {
    const int64_t n = int64_t(rec->size());
    c2_rsqrt_rc<<<unsigned((n + 255) / 256), 256, 0, s>>>(rec->get(), n, out->get());
    CUDA_CHECK_LAUNCH();
  }
  if (dx_bf16_)
    direction_passes(reinterpret_cast<__nv_bfloat16*>(dx_.get()), s);
  else
    direction_passes(reinterpret_cast<float*>(dx_.get()), s);
}

// Passes B and C, Newton-Schulz and the apply pass, with the direction buffer's element type T.
template <typename T>
void Celo2::direction_passes(T* dx, cudaStream_t s) {
  const C2Pass a{items_.get(),           mats_.get(),        core_->tensors.get(), arena_.grads(),    arena_.params(),
                 arena_.params_bf16(),   core_->state.get(), core_->rrec.get(),    core_->crec.get(), core_->rfac.get(),
                 core_->cfac.get(),      rsr_.get(),         rsc_.get(),           scalars_.get(),    dec_,
                 float(h_.grad_clip_val)};
  const unsigned ni = unsigned(n_items_), ns = unsigned(n_slices_);
  c2_pass_b<<<ni, kThreads, 0, s>>>(a, partial_.get());
  CUDA_CHECK_LAUNCH();
  c2_sigma<<<ns, 32, 0, s>>>(slices_.get(), partial_.get(), sigma_.get(), psq_.get());
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaMemcpyToSymbolAsync(c2_mlp_w, weights_.get(), sizeof c2_mlp_w, 0, cudaMemcpyDeviceToDevice, s));
  C2PassC c{};
  c.sigma = sigma_.get();
  c.psq = psq_.get();
  c.partial1 = partial1_.get();
  c.exp_mult = float(h_.exp_mult);
  c.param_scale_mult = h_.param_scale_mult ? 1 : 0;
  c2_pass_c<<<ni, kThreads, 0, s>>>(a, c, dx);
  CUDA_CHECK_LAUNCH();
  const unsigned sb = unsigned((n_slices_ + 127) / 128);
  if (ns_) {
    c2_slice_scalar<<<sb, 128, 0, s>>>(slices_.get(), n_slices_, partial1_.get(), true, h_.ns_eps, 0.0, dnorm_.get());
    CUDA_CHECK_LAUNCH();
    c2_ns_in<<<ni, kThreads, 0, s>>>(items_.get(), dnorm_.get(), dx);
    CUDA_CHECK_LAUNCH();
    ns_->run(dx, s);
    c2_sumsq<<<ni, kThreads, 0, s>>>(items_.get(), dx, partial1_.get());
    CUDA_CHECK_LAUNCH();
  }
  c2_slice_scalar<<<sb, 128, 0, s>>>(slices_.get(), n_slices_, partial1_.get(), false, 0.0, h_.rmsmult, rscale_.get());
  CUDA_CHECK_LAUNCH();
  c2_apply<<<ni, kThreads, 0, s>>>(a, dx, rscale_.get());
  CUDA_CHECK_LAUNCH();
}

std::vector<Optimizer::StateBuffer> Celo2::state_buffers() const {
  std::vector<StateBuffer> b;
  if (core_) {
    b.push_back({"celo2.moments", core_->state.get(), core_->state.bytes()});
    b.push_back({"celo2.R", core_->rrec.get(), core_->rrec.bytes()});
    b.push_back({"celo2.C", core_->crec.get(), core_->crec.bytes()});
  }
  if (adam_elems_) {
    b.push_back({"celo2.adam_m", adam_m_.get(), adam_m_.bytes()});
    b.push_back({"celo2.adam_v", adam_v_.get(), adam_v_.bytes()});
  }
  return b;
}

// Per element and step (72 B/param, small_fc_lopt.md 8.2): pass A reads g (4 B); pass B reads g, p and
// {m0,m1,m2,v}, writes the record (40 B) and sums the 28 feature squares; pass C reads g, p and the
// record again, runs the MLP and writes p (28 B). The 11 time features are folded into the first-layer
// bias once per step and each tensor's 28 normalisers into its block's copy of the first layer.
//   exact: fp32 on CUDA cores; weights in shared memory read 16 bytes at a time (broadcast), inputs and
//          hidden units staged per thread in shared memory so the loops stay rolled (a fully unrolled
//          39-32-32-2 MLP does not fit the instruction cache, and its 9.6 KB of weights thrash the
//          constant cache).
//   fast:  bf16 tensor cores (wmma 16x16x16, fp32 accumulate), 32 elements per warp and layer.
#include <mma.h>

#include <cmath>

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

__global__ void __launch_bounds__(kThreads) sf_pass_b(const Chunk* __restrict__ chunks, const LoTensor* __restrict__ ts,
                                                      const float* __restrict__ g, const float* __restrict__ p,
                                                      float4* __restrict__ state, float4* __restrict__ diag,
                                                      const float4* __restrict__ rrec, const float4* __restrict__ crec,
                                                      const float4* __restrict__ rfac, const float4* __restrict__ cfac,
                                                      double* __restrict__ partial, const float* __restrict__ sc, LoDecays d) {
  const Chunk c = chunks[blockIdx.x];
  const LoTensor t = ts[c.tensor];
  const float gs = sc[0];
  const int64_t i0 = c.p_begin - t.p_off;
  float acc[kF];
#pragma unroll
  for (int k = 0; k < kF; k++) acc[k] = 0.0f;
  auto body = [&](int e, float gv, float pv, float4 st) {
    const int64_t i = i0 + e;
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
    for (int k = 0; k < kF; k++) acc[k] += x[k] * x[k];
  };
  lo_for_each_pair<kThreads>(c, g, p, state, body);
  lo_block_sums<kF>(acc, partial + int64_t(blockIdx.x) * kF);
}

__global__ void __launch_bounds__(1024) sf_norms(const LoTensor* __restrict__ ts, const double* __restrict__ partial,
                                                 float* __restrict__ norm) {
  const LoTensor t = ts[blockIdx.x];
  __shared__ double S[kF];
  lo_tensor_sums<kF>(partial, t.chunk_begin, t.chunk_end, S);
  if (threadIdx.x < kF) norm[blockIdx.x * 32 + threadIdx.x] = rsqrtf(1e-5f + float(S[threadIdx.x] / double(t.numel)));
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

__device__ __forceinline__ void store_row_bf16(__nv_bfloat16* dst, const float* v) {  // 32 values, 16 B stores
#pragma unroll
  for (int q = 0; q < 4; q++) {
    __nv_bfloat162 a = __floats2bfloat162_rn(v[8 * q], v[8 * q + 1]), b = __floats2bfloat162_rn(v[8 * q + 2], v[8 * q + 3]);
    __nv_bfloat162 c = __floats2bfloat162_rn(v[8 * q + 4], v[8 * q + 5]), d = __floats2bfloat162_rn(v[8 * q + 6], v[8 * q + 7]);
    uint4 u;
    u.x = *reinterpret_cast<uint32_t*>(&a), u.y = *reinterpret_cast<uint32_t*>(&b);
    u.z = *reinterpret_cast<uint32_t*>(&c), u.w = *reinterpret_cast<uint32_t*>(&d);
    reinterpret_cast<uint4*>(dst)[q] = u;
  }
}
__device__ __forceinline__ void load_row(const float* src, float* v) {  // 32 values, 16 B loads
#pragma unroll
  for (int q = 0; q < 8; q++) {
    const float4 f = reinterpret_cast<const float4*>(src)[q];
    v[4 * q] = f.x, v[4 * q + 1] = f.y, v[4 * q + 2] = f.z, v[4 * q + 3] = f.w;
  }
}

// Fast: both 32-wide layers on bf16 tensor cores. A warp takes 32 elements at a time (lane = element):
// features go to a 32 x 32 bf16 tile, H = X W (2 x 2 tiles of 16 x 16, K = 32) lands in fp32, bias and
// ReLU per lane, again for layer 2; the 32 -> 2 output stays fp32 on CUDA cores.
// Row strides chosen so that each lane's 16-byte row accesses hit distinct banks within a quarter warp.
constexpr int kFastThreads = 128, kFastWarps = kFastThreads / 32, kLdX = 40, kLdH = 36;
__global__ void __launch_bounds__(kFastThreads) sf_pass_c_fast(const Chunk* __restrict__ chunks, const LoTensor* __restrict__ ts,
                                                               const float* __restrict__ g, float* __restrict__ p,
                                                               __nv_bfloat16* __restrict__ pb, const float4* __restrict__ state,
                                                               const float4* __restrict__ diag, const float4* __restrict__ rrec,
                                                               const float4* __restrict__ crec, const float4* __restrict__ rfac,
                                                               const float4* __restrict__ cfac, const float* __restrict__ norm,
                                                               const float* __restrict__ mlp, const float* __restrict__ sc,
                                                               float exp_mult, float step_mult, float wd) {
  using namespace nvcuda;
  __shared__ __align__(32) __nv_bfloat16 w0[32 * 32], w1[32 * 32];  // [k][o], k padded 28 -> 32 with zeros
  __shared__ float b0[32], b1[32], w2[66];
  __shared__ __align__(32) __nv_bfloat16 xt[kFastWarps][32 * kLdX];  // [element][k]
  __shared__ __align__(32) float ht[kFastWarps][32 * kLdH];         // [element][o]
  const Chunk c = chunks[blockIdx.x];
  const LoTensor t = ts[c.tensor];
  for (int idx = threadIdx.x; idx < 1024; idx += kFastThreads) {
    const int k = idx / 32;
    w0[idx] = __float2bfloat16_rn(k < kF ? mlp[kW0 + idx] * norm[c.tensor * 32 + k] : 0.0f);
    w1[idx] = __float2bfloat16_rn(mlp[kW1 + idx]);
  }
  if (threadIdx.x < 32) b0[threadIdx.x] = mlp[kB0 + threadIdx.x], b1[threadIdx.x] = mlp[kB1 + threadIdx.x];
  if (threadIdx.x < 66) w2[threadIdx.x] = mlp[kW2 + threadIdx.x];
  __syncthreads();
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb0[2][2], fb1[2][2];
  for (int kk = 0; kk < 2; kk++)
    for (int nn = 0; nn < 2; nn++) {
      wmma::load_matrix_sync(fb0[kk][nn], w0 + kk * 16 * 32 + nn * 16, 32);
      wmma::load_matrix_sync(fb1[kk][nn], w1 + kk * 16 * 32 + nn * 16, 32);
    }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __nv_bfloat16* X = xt[warp];
  float* H = ht[warp];
  const float gs = sc[0], lr = sc[1] * t.scale, wdf = t.decay ? wd : 0.0f;
  auto layer = [&](wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major>(&fb)[2][2]) {
    for (int mm = 0; mm < 2; mm++)
      for (int nn = 0; nn < 2; nn++) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::fill_fragment(acc, 0.0f);
        for (int kk = 0; kk < 2; kk++) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
          wmma::load_matrix_sync(fa, X + mm * 16 * kLdX + kk * 16, kLdX);
          wmma::mma_sync(acc, fa, fb[kk][nn], acc);
        }
        wmma::store_matrix_sync(H + mm * 16 * kLdH + nn * 16, acc, kLdH, wmma::mem_row_major);
      }
    __syncwarp();
  };
  for (int base = warp * 32; base < c.n; base += kFastThreads) {
    const int e = base + lane;
    const bool live = e < c.n;
    SfElem el;
    if (live) sf_load(c, t, e, g, p, state, diag, rrec, crec, rfac, cfac, gs, el);
    float row[32];
#pragma unroll
    for (int k = 0; k < 32; k++) row[k] = live && k < kF ? el.x[k] : 0.0f;
    store_row_bf16(X + lane * kLdX, row);
    __syncwarp();
    layer(fb0);
    load_row(H + lane * kLdH, row);
#pragma unroll
    for (int o = 0; o < 32; o++) row[o] = fmaxf(row[o] + b0[o], 0.0f);
    store_row_bf16(X + lane * kLdX, row);
    __syncwarp();
    layer(fb1);
    load_row(H + lane * kLdH, row);
    float dir = w2[64], mag = w2[65];
#pragma unroll
    for (int k = 0; k < 32; k++) {
      const float a = fmaxf(row[k] + b1[k], 0.0f);
      dir = fmaf(w2[k], a, dir);
      mag = fmaf(w2[32 + k], a, mag);
    }
    __syncwarp();
    if (live) sf_store(p, pb, c.p_begin + e, el.p, dir, mag, lr, wdf, exp_mult, step_mult);
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
  partial_.alloc(core_.chunks.size() * kF, "small_fc_lopt partial sums");
  norm_.alloc(size_t(core_.n_tensors) * 32, "small_fc_lopt normalisers");
  scalars_.alloc(2, "small_fc_lopt scalars");
}

void SmallFcLopt::step(const StepInfo& info, cudaStream_t s) {
  const SmallFcOptions& h = opts_.small_fc;
  sf_begin<<<1, 256, 0, s>>>(d_step_.get(), h.lr, opts_.schedule, info.d_grad_scale, weights_.get(), mlp_.get(), scalars_.get());
  CUDA_CHECK_LAUNCH();
  core_.factor_passes(scalars_.get(), 0.0f, dec_, s);
  const unsigned nc = unsigned(core_.chunks.size());
  sf_pass_b<<<nc, kThreads, 0, s>>>(core_.chunks.get(), core_.tensors.get(), arena_.grads(), arena_.params(), core_.state.get(),
                                    core_.diag.get(), core_.rrec.get(), core_.crec.get(), core_.rfac.get(), core_.cfac.get(),
                                    partial_.get(), scalars_.get(), dec_);
  CUDA_CHECK_LAUNCH();
  sf_norms<<<unsigned(core_.n_tensors), 1024, 0, s>>>(core_.tensors.get(), partial_.get(), norm_.get());
  CUDA_CHECK_LAUNCH();
  auto pass_c = h.fast ? sf_pass_c_fast : sf_pass_c_exact;
  pass_c<<<nc, h.fast ? kFastThreads : kThreads, 0, s>>>(
      core_.chunks.get(), core_.tensors.get(), arena_.grads(), arena_.params(), arena_.params_bf16(), core_.state.get(),
      core_.diag.get(), core_.rrec.get(), core_.crec.get(), core_.rfac.get(), core_.cfac.get(), norm_.get(), mlp_.get(),
      scalars_.get(), float(h.exp_mult), float(h.step_mult), float(h.weight_decay));
  CUDA_CHECK_LAUNCH();
}

std::vector<Optimizer::StateBuffer> SmallFcLopt::state_buffers() const {
  return {{"lopt.moments", core_.state.get(), core_.state.bytes()},
          {"lopt.vector_factors", core_.diag.get(), core_.diag.bytes()},
          {"lopt.R", core_.rrec.get(), core_.rrec.bytes()},
          {"lopt.C", core_.crec.get(), core_.crec.bytes()}};
}

// VeLO's pass C: per element, the tensor's 30-4-4-3 MLP (theta, interpolated from the candidates by the
// LSTM each step) on the 30 normalised features, and the step p -= lr (lr_mult dir exp(mag / 1000)
// rms(p) / 1000), then the decoupled weight decay p -= lr wd p. 2-D factored tensors go in tiles, one
// column per thread: the 12 features built from R or C alone enter the first layer through per-row and
// per-column tables (velo_side, once per step), so an element's first layer is 18 x 4 multiply-adds on
// two gathered 4-vectors. Pass C also sums each work item's new p^2 (psq) for the next step's pass B.
#include "kernels/device_utils.cuh"
#include "optim/lopt/velo_device.cuh"

using namespace velo;

namespace {
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
// struct without the read-only path and compiles the tile loop differently (lo_core.h). One function of
// ~110 lines (the per-tensor weights into shared memory, then a tile's or a flat run's elements): ptxas's
// output follows the compiler's value numbering, which moving the two branches into functions changes (as
// it did for the attention kernels, scripts/compare_kernels.sh); the kernel keeps the code measured.
template <class Rec>  // the record: float4, or uint2 with velo.bf16_record
__global__ void __launch_bounds__(kLoThreads, 2)
    velo_pass_c(const LoWork* __restrict__ works, const LoTensor* __restrict__ ts, const float* __restrict__ g,
                float* __restrict__ p, __nv_bfloat16* __restrict__ pb, const Rec* __restrict__ state,
                const float4* __restrict__ diag, const float4* __restrict__ rrec, const float4* __restrict__ crec,
                const float4* __restrict__ rfac, const float4* __restrict__ cfac, const float4* __restrict__ side_a,
                const float4* __restrict__ side_b, const float* __restrict__ norm, const float* __restrict__ theta,
                const float* __restrict__ cs, const VeloScalars* __restrict__ sc, float wd, double* __restrict__ psq) {
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
  float p2 = 0.0f;  // sum of the new p^2 over this thread's elements, in pass B's order (psq)
  auto update = [&](int64_t at, float pv, float dir, float mag) {
    const float stp = mult * dir * expf(0.001f * mag);
    float pn = pv - lr * stp;
    if (wdf > 0) pn -= lr * wdf * pn;
    lo_store_param(p, pb, t.p_off + at, pn);
    p2 += pn * pn;
  };
  if (w.tile) {
    const LoSides sd = lo_sides(t, rfac, cfac);
    const int64_t col = w.col0 + int(threadIdx.x);
    const bool live = col < t.nb;
    const float4 fb = live ? sd.fac_b[col] : make_float4(0, 0, 0, 0);
    const float4 hb = live ? side_b[t.side_b_off + col] : make_float4(0, 0, 0, 0);
    const int rows = live ? w.n : 0;  // threads past the last column stay for psq's block sum
    // kUnrollC rows at a time: their loads in flight together, each weight read once for all of them
    // (lds4: volatile, so the compiler does not hoist the 110 weights into registers and spill).
    const int nb = int(t.nb);
    const int64_t at0 = w.row0 * t.nb + col;
    for (int r = 0; r < rows; r += kUnrollC) {
      // The next rows' g, p and records on their way to L2 while these compute: the registers hold only
      // kUnrollC rows of loads (2 blocks an SM), which left DRAM 67% busy (ncu, H100).
#pragma unroll
      for (int u = kUnrollC; u < 2 * kUnrollC; u++)
        if (r + u < w.n) {
          const int64_t at = at0 + int64_t(r + u) * nb;
          prefetch_l2(g + t.p_off + at);
          prefetch_l2(p + t.p_off + at);
          prefetch_l2(state + t.s_off + at);
        }
      float gv[kUnrollC], pv[kUnrollC], h[kUnrollC][4], x[kUnrollC][18];
      float4 st[kUnrollC];
#pragma unroll
      for (int u = 0; u < kUnrollC; u++) {
        const int64_t at = at0 + int64_t(min(r + u, w.n - 1)) * nb;  // past the tile's end: repeat its last row
        gv[u] = g[t.p_off + at];
        pv[u] = p[t.p_off + at];
        st[u] = lo_rec_load(state, t.s_off + at);
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
      const float4 st = lo_rec_load(state, t.s_off + i);
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
  lo_block_sums<1>(&p2, psq + blockIdx.x);
}
}  // namespace

// The side tables (tile2d tensors), then pass C.
void Velo::pass_c(cudaStream_t s) {
  if (core_.side_items.size()) {
    const VeloSide side{core_.side_items.get(), core_.tensors.get(), core_.rrec.get(), core_.crec.get(), norm_.get(),
                        theta_.get(),           side_a_.get(),       side_b_.get()};
    velo_side<<<unsigned(core_.side_items.size()), 256, 0, s>>>(side);
    CUDA_CHECK_LAUNCH();
  }
  auto launch = [&](auto* state) {
    velo_pass_c<<<unsigned(core_.work.size()), kLoThreads, 0, s>>>(
        core_.work.get(), core_.tensors.get(), arena_.grads(), arena_.params(), arena_.params_bf16(), state,
        core_.diag.get(), core_.rrec.get(), core_.crec.get(), core_.rfac.get(), core_.cfac.get(), side_a_.get(),
        side_b_.get(), norm_.get(), theta_.get(), cs_.get(), scalars_.get(), float(opts_.velo.weight_decay),
        psq_.get());
    CUDA_CHECK_LAUNCH();
  };
  if (core_.bf16_records)
    launch(reinterpret_cast<const uint2*>(core_.state.get()));
  else
    launch(static_cast<const float4*>(core_.state.get()));
}

// CELO2's learned path (celo2.h), for matrices: the 30 features of each element from the accumulators,
// normalised per slice (the last two axes), the 30-8-8-3 MLP's direction D = dir exp(exp_mult mag), Newton-
// Schulz on D (optim/newton_schulz.h), the second RMS normalisation and p -= lr (rmsmult O + wd p).
// Reductions in double over fixed partitions, as in celo2.cu.
#include <cmath>

#include "optim/lopt/celo2_device.cuh"
#include "optim/lopt/celo2_fast.h"

namespace {
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
  const float4* side_r;  // tile2d tensors: per R entry, the 8 first-layer sums of its channels (c2_side)
  const float4* side_c;  // the same per C entry
};

// Features of element i of tensor t, whose R and C entries are ri and ci (record indices, lo_rc_index plus
// the tensor's offsets); update: advance the record first (pass B) or read it (pass C). kReadP false: p is
// not read and channel 2 is 0 (pass B taking the sum of p^2 from the last apply). kSided: channels 15-26 are
// left unset and R, C and their 1 / sqrt are not read (c2_side_sums). k16: the record in bf16, stored
// rounded with the tensor's key of this step (lo_record16.h).
template <bool kReadP = true, bool kSided = false, bool k16 = false>
__device__ __forceinline__ void c2_element_rc(const C2Pass& a, const LoTensor& t, int64_t i, int64_t ri, int64_t ci,
                                              bool update, const C2Scalars& sc, float* x, uint64_t key = 0) {
  const float g = c2_grad(a.g[t.p_off + i], sc, a.cv), p = kReadP ? a.p[t.p_off + i] : 0.0f;
  float4 st = c2_rec<k16>(a.state, t.s_off + i);
  if (update) {
    const LoDecays& d = a.d;
    st.x = d.m[0] * st.x + (1.0f - d.m[0]) * g;
    st.y = d.m[1] * st.y + (1.0f - d.m[1]) * g;
    st.z = d.m[2] * st.z + (1.0f - d.m[2]) * g;
    st.w = d.v * st.w + (1.0f - d.v) * g * g;
    st = lo_rec_store(reinterpret_cast<LoRec<k16>*>(a.state), t.s_off + i, st, key, i);
  }
  if (kSided) {
    const float4 none = make_float4(0, 0, 0, 0);
    c2_features<true>(g, p, st, none, none, a.rfac[ri], a.cfac[ci], none, none, x);
  } else {
    c2_features(g, p, st, a.rrec[ri], a.crec[ci], a.rfac[ri], a.cfac[ci], a.rsr[ri], a.rsc[ci], x);
  }
}

// The same, the record indices from i.
template <bool kReadP = true, bool kSided = false, bool k16 = false>
__device__ __forceinline__ void c2_element(const C2Pass& a, const LoTensor& t, int64_t i, bool update,
                                           const C2Scalars& sc, float* x, uint64_t key = 0) {
  int64_t ri, ci;
  lo_rc_index(t, i, ri, ci);
  c2_element_rc<kReadP, kSided, k16>(a, t, i, ri + t.r_off, ci + t.c_off, update, sc, x, key);
}

// The features 1 / sqrt(R + 1e-8) and 1 / sqrt(C + 1e-8) once per R and C entry instead of once per
// element: an IEEE reciprocal square root costs passes B and C a dozen instructions each.
__global__ void c2_rsqrt_rc(const float4* __restrict__ rec, int64_t n, float4* __restrict__ out) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float4 r = rec[i];
  out[i] = make_float4(1.0f / sqrtf(r.x + 1e-8f), 1.0f / sqrtf(r.y + 1e-8f), 1.0f / sqrtf(r.z + 1e-8f), 0.0f);
}

// One thread's share of pass B over an item: the moments, and each channel's sum of squares in fp32 onto acc.
// kSided (the tile2d tensors: 2-D, rows na x columns nb): channels 15-26 stay 0, and the thread's row and
// column are divided out once and then stepped by kThreads columns, instead of lo_rc_index's division per
// element (the same indices).
template <bool kReadP, bool kSided, bool k16>
__device__ __forceinline__ void c2_pass_b_item(const C2Pass& a, const LoTensor& t, const C2Item& it,
                                               const C2Scalars& sc, float* acc) {
  const uint64_t key = k16 ? lo_r16_tensor_key(uint64_t(sc.count), uint32_t(t.table)) : 0;
  int64_t row = (it.begin + threadIdx.x) / t.nb, col = (it.begin + threadIdx.x) - row * t.nb;
  for (int e = threadIdx.x; e < it.n; e += kThreads) {
    float x[kCh];
    if (kSided) {  // lo_rc_index of a 2-D tensor: R drops d0, so R is indexed by the column when d0 is axis A
      const int64_t ri = t.d0_is_a ? col : row, ci = t.d0_is_a ? row : col;
      c2_element_rc<kReadP, true, k16>(a, t, it.begin + e, ri + t.r_off, ci + t.c_off, true, sc, x, key);
      for (col += kThreads; col >= t.nb; col -= t.nb) row++;
    } else {
      c2_element<kReadP, false, k16>(a, t, it.begin + e, true, sc, x, key);
    }
#pragma unroll
    for (int c = 0; c < kCh; c++)
      if (!kSided || !c2_side_channel(c)) acc[c] = fmaf(x[c], x[c], acc[c]);
  }
}

// Pass B: moments, and per item the 30 channels' sums of squares and the sum of p^2. Each thread sums its
// kRun / kThreads = 16 elements in fp32 (31 double accumulators would halve the occupancy of this
// memory-bound pass), the block in double (c2_block_sums). The tile2d tensors' channels 15-26 are left to
// c2_side_sums (0 here). kReadP false: no p is read, and channel 2's sum (p is channel 2) is p2[item], which
// the last apply took over the same elements in the same order as it wrote them: the same bits, 4 bytes an
// element less. k16: the records in bf16.
template <bool kReadP, bool k16>
__global__ void __launch_bounds__(kThreads, 3)
    c2_pass_b(const C2Pass a, double* __restrict__ partial, const double* __restrict__ p2) {
  const C2Item it = a.items[blockIdx.x];
  const LoTensor t = a.ts[it.slot];
  const C2Scalars sc = *a.sc;
  float acc[kCh];
#pragma unroll
  for (int c = 0; c < kCh; c++) acc[c] = 0;
  if (t.tile2d)
    c2_pass_b_item<kReadP, true, k16>(a, t, it, sc, acc);
  else
    c2_pass_b_item<kReadP, false, k16>(a, t, it, sc, acc);
  c2_block_sums<kCh>(acc, partial + int64_t(blockIdx.x) * kPart);
  if (kReadP) return;
  __syncthreads();  // after thread 2's store of channel 2
  if (threadIdx.x == 0) partial[int64_t(blockIdx.x) * kPart + 2] = p2[blockIdx.x];
}

// Channels 15-26 of a tile2d tensor (R_k, C_k, 1 / sqrt(R_k + 1e-8), 1 / sqrt(C_k + 1e-8)) are constant
// along a row or a column, so their sums of squares over the slice come from the R and C entries, each
// counted once per element that reads it (numel / r_len, numel / c_len): one block of 256 per slice, each
// thread's entries in double, then block_sum_d's tree; into side[slice * 12 + c - 15]. Other slices: nothing.
__global__ void __launch_bounds__(kThreads)
    c2_side_sums(const C2Slice* __restrict__ slices, const LoTensor* __restrict__ ts, const float4* __restrict__ rrec,
                 const float4* __restrict__ crec, const float4* __restrict__ rsr, const float4* __restrict__ rsc,
                 double* __restrict__ side) {
  const LoTensor t = ts[slices[blockIdx.x].slot];
  if (!t.tile2d) return;
  // One side's entries: its three values and their 1 / sqrt, squared and summed in double.
  auto squares = [](const float4* rec, const float4* rs, int64_t len, double(&out)[6]) {
    for (int64_t e = threadIdx.x; e < len; e += kThreads) {
      const float4 v = rec[e], q = rs[e];
      const double x[6] = {v.x, v.y, v.z, q.x, q.y, q.z};
#pragma unroll
      for (int k = 0; k < 6; k++) out[k] += x[k] * x[k];
    }
  };
  double r[6] = {0, 0, 0, 0, 0, 0}, c[6] = {0, 0, 0, 0, 0, 0};
  squares(rrec + t.r_off, rsr + t.r_off, t.r_len, r);
  squares(crec + t.c_off, rsc + t.c_off, t.c_len, c);
  const double nr = double(t.numel / t.r_len), nc = double(t.numel / t.c_len);
  // channel order 15-26: R_0..2, C_0..2, rsR_0..2, rsC_0..2
  const double sums[12] = {r[0], r[1], r[2], c[0], c[1], c[2], r[3], r[4], r[5], c[3], c[4], c[5]};
  for (int k = 0; k < 12; k++) {
    const double total = block_sum_d(sums[k]);
    if (threadIdx.x == 0) side[int64_t(blockIdx.x) * 12 + k] = total * (k % 6 < 3 ? nr : nc);
  }
}

// Per slice (one block of 32): the 30 normalisers rsqrt(1e-9 + mean x_c^2) (5.7), and the sum of p^2
// (channel 2 is p). A tile2d tensor's channels 15-26 from c2_side_sums.
__global__ void c2_sigma(const C2Slice* __restrict__ slices, const LoTensor* __restrict__ ts,
                         const double* __restrict__ partial, const double* __restrict__ side, float* __restrict__ sigma,
                         double* __restrict__ psq) {
  const C2Slice sl = slices[blockIdx.x];
  const int c = threadIdx.x;
  if (c >= kCh) return;
  double s = 0;
  if (c2_side_channel(c) && ts[sl.slot].tile2d)
    s = side[int64_t(blockIdx.x) * 12 + c - kSideFirst];
  else
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

// The first layer's share of channels 15-26 for each R and C entry of the tile2d tensors (one thread per
// entry, LoCore's side items): R_k and 1 / sqrt(R_k + 1e-8), or C_k and 1 / sqrt(C_k + 1e-8), normalised
// by the tensor's slice, times their rows of W0, in channel order. 2 x 6 x 8 FMAs per row and column
// instead of 12 x 8 per element in pass C.
__global__ void __launch_bounds__(256)
    c2_side(const LoSideItem* __restrict__ items, const LoTensor* __restrict__ ts, const C2Mat* __restrict__ mats,
            const float* __restrict__ sigma, const float4* __restrict__ rrec, const float4* __restrict__ crec,
            const float4* __restrict__ rsr, const float4* __restrict__ rsc, float4* __restrict__ side_r,
            float4* __restrict__ side_c) {
  const LoSideItem it = items[blockIdx.x];
  const LoTensor t = ts[it.tensor];
  const int64_t e = it.first + threadIdx.x;
  if (e >= (it.side ? t.nb : t.na)) return;
  const bool is_r = (it.side == 1) == lo_b_is_r(t);  // the same for the whole block
  const int64_t at = (is_r ? t.r_off : t.c_off) + e;
  const float4 v = is_r ? rrec[at] : crec[at], q = is_r ? rsr[at] : rsc[at];
  const int c0 = is_r ? 15 : 18, c1 = is_r ? 21 : 24;
  const float* sg = sigma + int64_t(mats[it.tensor].first_slice) * kPart;
  const float x[6] = {v.x * sg[c0], v.y * sg[c0 + 1], v.z * sg[c0 + 2],
                      q.x * sg[c1], q.y * sg[c1 + 1], q.z * sg[c1 + 2]};
  const int ch[6] = {c0, c0 + 1, c0 + 2, c1, c1 + 1, c1 + 2};
  float h[kH];
#pragma unroll
  for (int j = 0; j < kH; j++) h[j] = 0.0f;
#pragma unroll
  for (int k = 0; k < 6; k++)
#pragma unroll
    for (int j = 0; j < kH; j++) h[j] = fmaf(x[k], c2_mlp_w[kW0 + ch[k] * kH + j], h[j]);
  float4* out = (is_r ? side_r : side_c) + 2 * at;
  out[0] = make_float4(h[0], h[1], h[2], h[3]);
  out[1] = make_float4(h[4], h[5], h[6], h[7]);
}

// The MLP's two first outputs (5.8) from the normalised inputs, for two elements at once (x and y). Each
// unit's sum is as for one element, s = b[j] then fmaf over the inputs in order; only the order among
// independent sums differs: the two elements interleaved, so that each weight's constant load feeds two
// FMAs, and a layer's units side by side, input by input, so that neighbouring weights (W[c][j], W[c][j+1])
// load in pairs. kSided: each unit starts from b[j] + h0[j] (the side tables' share, hx and hy) and skips
// channels 15-26. ReLU keeps NaN.
template <bool kSided>
__device__ __forceinline__ void c2_mlp2(const float* x, const float* y, const float* hx, const float* hy, float& dir_x,
                                        float& mag_x, float& dir_y, float& mag_y) {
  const float* w = c2_mlp_w;
  float h1x[kH], h1y[kH], h2x[kH], h2y[kH];
#pragma unroll
  for (int j = 0; j < kH; j++) {
    h1x[j] = kSided ? w[kB0 + j] + hx[j] : w[kB0 + j];
    h1y[j] = kSided ? w[kB0 + j] + hy[j] : w[kB0 + j];
  }
#pragma unroll
  for (int c = 0; c < kCh; c++) {
    if (kSided && c2_side_channel(c)) continue;
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
    const float hx2 = h2x[k] < 0.0f ? 0.0f : h2x[k], hy2 = h2y[k] < 0.0f ? 0.0f : h2y[k];
    o0 = fmaf(hx2, w[kW2 + 2 * k], o0);
    o1 = fmaf(hx2, w[kW2 + 2 * k + 1], o1);
    q0 = fmaf(hy2, w[kW2 + 2 * k], q0);
    q1 = fmaf(hy2, w[kW2 + 2 * k + 1], q1);
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

// D = dir exp(exp_mult mag) (x ps with param_scale_mult) of one element, into dx; its D^2 onto acc.
template <typename T>
__device__ __forceinline__ void c2_emit(const C2PassC& c, float dir, float mag, float ps, T* __restrict__ at,
                                        double& acc) {
  const float em = expf(mag * c.exp_mult);
  const float D = c.param_scale_mult ? dir * (ps * em) : dir * em;
  dx_store(at, D);
  acc += double(D) * D;
}

// Pass C over the items of the tensors that are not tile2d (vectors sent to the MLP, N-D tensors, (1, n)
// matrices): normalised features, the MLP, D into dx, and per item the sum of D^2 (Newton-Schulz's
// Frobenius norm, or the final RMS without NS). Two elements per iteration, e and e + kThreads, so that
// each MLP weight is loaded once for both. When the second is past the item's end the first is computed
// twice and the copy dropped. D^2 is added in the order of the one-element loop (e, e + kThreads, ...).
template <typename T, bool k16>
__global__ void __launch_bounds__(kThreads, 2)
    c2_pass_c(const C2Pass a, const C2PassC c, const int32_t* __restrict__ item_ids, T* __restrict__ dx) {
  const int item = item_ids[blockIdx.x];
  const C2Item it = a.items[item];
  const LoTensor t = a.ts[it.slot];
  const C2Scalars sc = *a.sc;
  const float ps = c2_param_scale(c.param_scale_mult, c.psq, a.mats[it.slot], t.numel);
  float sg[kCh];
#pragma unroll
  for (int k = 0; k < kCh; k++) sg[k] = c.sigma[int64_t(it.slice) * kPart + k];
  double acc = 0;
  for (int e = threadIdx.x; e < it.n; e += 2 * kThreads) {
    const bool two = e + kThreads < it.n;
    const int f = two ? e + kThreads : e;
    float x[kCh], y[kCh];
    c2_element<true, false, k16>(a, t, it.begin + e, false, sc, x);
    c2_element<true, false, k16>(a, t, it.begin + f, false, sc, y);
#pragma unroll
    for (int k = 0; k < kCh; k++) {
      x[k] *= sg[k];
      y[k] *= sg[k];
    }
    float dir[2], mag[2];
    c2_mlp2<false>(x, y, nullptr, nullptr, dir[0], mag[0], dir[1], mag[1]);
    c2_emit(c, dir[0], mag[0], ps, dx + it.dx + e, acc);
    if (two) c2_emit(c, dir[1], mag[1], ps, dx + it.dx + f, acc);
  }
  acc = block_sum_d(acc);
  if (threadIdx.x == 0) c.partial1[item] = acc;
}

// The features of element (row, col) of a tile2d tensor but channels 15-26, from the two sides' factors.
template <bool k16>
__device__ __forceinline__ void c2_tile_features(const C2Pass& a, const LoTensor& t, int64_t i, float4 f_row,
                                                 float4 f_col, const C2Scalars& sc, float* x) {
  const float g = c2_grad(a.g[t.p_off + i], sc, a.cv), p = a.p[t.p_off + i];
  const float4 none = make_float4(0, 0, 0, 0);
  c2_features<true>(g, p, c2_rec<k16>(a.state, t.s_off + i), none, none, f_row, f_col, none, none, x);  // rf cf = cf rf
}

// Pass C over a tile of a tile2d tensor (LoCore's work item: up to kTileRows rows x 256 columns, a column per
// thread): the column's side-table share and Adafactor factor stay in registers, the row's are one load per
// row that every thread of the block shares; channels 15-26 come only through the side tables (c2_side).
// Two rows per iteration, so that each MLP weight load feeds two elements. The tile's sum of D^2, each
// thread's rows in order, into tile_partial.
template <typename T, bool k16>
__global__ void __launch_bounds__(kThreads, 2)
    c2_pass_c_tiles(const C2Pass a, const C2PassC c, const LoWork* __restrict__ works,
                    const int32_t* __restrict__ tile_ids, double* __restrict__ tile_partial, T* __restrict__ dx) {
  const int w = tile_ids[blockIdx.x];
  const LoWork wk = works[w];
  const LoTensor t = a.ts[wk.tensor];
  const C2Mat m = a.mats[wk.tensor];
  const C2Scalars sc = *a.sc;
  const float ps = c2_param_scale(c.param_scale_mult, c.psq, m, t.numel);
  float sg[kCh];
#pragma unroll
  for (int k = 0; k < kCh; k++) sg[k] = c.sigma[int64_t(m.first_slice) * kPart + k];
  double acc = 0;
  const int64_t col = int64_t(wk.col0) + threadIdx.x;
  if (col < t.nb) {
    // 2-D: element (r, col) has R entry col and C entry r when d0 is the row axis, else R r and C col.
    const bool col_is_r = lo_b_is_r(t);
    const int64_t ce = (col_is_r ? t.r_off : t.c_off) + col;
    const float4* s_col = (col_is_r ? a.side_r : a.side_c) + 2 * ce;
    const float4 sc0 = s_col[0], sc1 = s_col[1], f_col = col_is_r ? a.rfac[ce] : a.cfac[ce];
    const float hc[kH] = {sc0.x, sc0.y, sc0.z, sc0.w, sc1.x, sc1.y, sc1.z, sc1.w};
    const float4* s_rows = col_is_r ? a.side_c + 2 * t.c_off : a.side_r + 2 * t.r_off;
    const float4* f_rows = col_is_r ? a.cfac + t.c_off : a.rfac + t.r_off;
    for (int r = 0; r < wk.n; r += 2) {
      const bool two = r + 1 < wk.n;
      const int64_t r0 = wk.row0 + r, r1 = two ? r0 + 1 : r0;
      float x[kCh], y[kCh], hx[kH], hy[kH];
      const float4 a0 = s_rows[2 * r0], a1 = s_rows[2 * r0 + 1], b0 = s_rows[2 * r1], b1 = s_rows[2 * r1 + 1];
      const float ha[kH] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float hb[kH] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int j = 0; j < kH; j++) {
        hx[j] = ha[j] + hc[j];
        hy[j] = hb[j] + hc[j];
      }
      c2_tile_features<k16>(a, t, r0 * t.nb + col, f_rows[r0], f_col, sc, x);
      c2_tile_features<k16>(a, t, r1 * t.nb + col, f_rows[r1], f_col, sc, y);
#pragma unroll
      for (int k = 0; k < kCh; k++) {
        if (c2_side_channel(k)) continue;
        x[k] *= sg[k];
        y[k] *= sg[k];
      }
      float dir[2], mag[2];
      c2_mlp2<true>(x, y, hx, hy, dir[0], mag[0], dir[1], mag[1]);
      c2_emit(c, dir[0], mag[0], ps, dx + m.dx + r0 * t.nb + col, acc);
      if (two) c2_emit(c, dir[1], mag[1], ps, dx + m.dx + r1 * t.nb + col, acc);
    }
  }
  acc = block_sum_d(acc);
  if (threadIdx.x == 0) tile_partial[w] = acc;
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
// The sums of squares come per item (partial1), or with tiles, for a tile2d tensor's slice, per tile (pass
// C's tile_partial; Newton-Schulz's output is summed per item by c2_sumsq).
__global__ void c2_slice_scalar(const C2Slice* __restrict__ slices, int n, const double* __restrict__ partial1,
                                const double* __restrict__ tile_partial, bool tiles, bool ns, double ns_eps,
                                double rmsmult, double* __restrict__ out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const C2Slice sl = slices[i];
  double s = 0;
  if (tiles && sl.n_tiles)
    for (int k = 0; k < sl.n_tiles; k++) s += tile_partial[sl.first_tile + k];
  else
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

// 5.9: u = O x (rmsmult / rms(O)) and p -= lr (u + wd p), p on the right before the step. Per item, the sum
// of the new p^2 as pass B would take it (each thread's elements in order in fp32, then c2_block_sums) into
// p2, for the next pass B.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    c2_apply(const C2Pass a, const T* __restrict__ dx, const double* __restrict__ rscale, double* __restrict__ p2) {
  const C2Item it = a.items[blockIdx.x];
  const LoTensor t = a.ts[it.slot];
  const float wd = a.mats[it.slot].wd, lr = a.sc->lr;
  const double r = rscale[it.slice];
  float acc[1] = {0.0f};
  for (int e = threadIdx.x; e < it.n; e += kThreads) {
    const int64_t i = it.begin + e;
    const float u = float(double(dx_load(dx + it.dx + e)) * r);
    const float p0 = a.p[t.p_off + i];
    const float p = p0 - lr * (u + wd * p0);
    a.p[t.p_off + i] = p;
    if (a.pb) a.pb[t.p_off + i] = __float2bfloat16_rn(p);
    acc[0] = fmaf(p, p, acc[0]);
  }
  c2_block_sums<1>(acc, p2 + blockIdx.x);
}
}  // namespace

void Celo2::learned_step(cudaStream_t s) {
  core_->factor_passes(&scalars_.get()->gs_total, float(h_.grad_clip_val), dec_, s);
  for (auto [rec, out] : {std::pair{&core_->rrec, &rsr_}, std::pair{&core_->crec, &rsc_}}) {
    const int64_t n = int64_t(rec->size());
    c2_rsqrt_rc<<<unsigned((n + 255) / 256), 256, 0, s>>>(rec->get(), n, out->get());
    CUDA_CHECK_LAUNCH();
  }
  const bool r16 = core_->bf16_records;
  if (dx_bf16_ && r16)
    direction_passes<__nv_bfloat16, true>(reinterpret_cast<__nv_bfloat16*>(dx_.get()), s);
  else if (dx_bf16_)
    direction_passes<__nv_bfloat16, false>(reinterpret_cast<__nv_bfloat16*>(dx_.get()), s);
  else if (r16)
    direction_passes<float, true>(reinterpret_cast<float*>(dx_.get()), s);
  else
    direction_passes<float, false>(reinterpret_cast<float*>(dx_.get()), s);
}

// Passes B and C, Newton-Schulz and the apply pass, with the direction buffer's element type T; k16: the
// records in bf16.
template <typename T, bool k16>
void Celo2::direction_passes(T* dx, cudaStream_t s) {
  const C2Pass a{items_.get(),
                 mats_.get(),
                 core_->tensors.get(),
                 arena_.grads(),
                 arena_.params(),
                 arena_.params_bf16(),
                 core_->state.get(),
                 core_->rrec.get(),
                 core_->crec.get(),
                 core_->rfac.get(),
                 core_->cfac.get(),
                 rsr_.get(),
                 rsc_.get(),
                 scalars_.get(),
                 dec_,
                 float(h_.grad_clip_val),
                 side_r_.get(),
                 side_c_.get()};
  const unsigned ni = unsigned(n_items_), ns = unsigned(n_slices_);
  if (p2_ready_)
    c2_pass_b<false, k16><<<ni, kThreads, 0, s>>>(a, partial_.get(), p2_.get());
  else
    c2_pass_b<true, k16><<<ni, kThreads, 0, s>>>(a, partial_.get(), nullptr);
  CUDA_CHECK_LAUNCH();
  c2_side_sums<<<ns, kThreads, 0, s>>>(slices_.get(), core_->tensors.get(), core_->rrec.get(), core_->crec.get(),
                                       rsr_.get(), rsc_.get(), side_sums_.get());
  CUDA_CHECK_LAUNCH();
  c2_sigma<<<ns, 32, 0, s>>>(slices_.get(), core_->tensors.get(), partial_.get(), side_sums_.get(), sigma_.get(),
                             psq_.get());
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaMemcpyToSymbolAsync(c2_mlp_w, weights_.get(), sizeof c2_mlp_w, 0, cudaMemcpyDeviceToDevice, s));
  if (core_->side_items.size()) {
    c2_side<<<unsigned(core_->side_items.size()), 256, 0, s>>>(
        core_->side_items.get(), core_->tensors.get(), mats_.get(), sigma_.get(), core_->rrec.get(), core_->crec.get(),
        rsr_.get(), rsc_.get(), side_r_.get(), side_c_.get());
    CUDA_CHECK_LAUNCH();
  }
  C2PassC c{};
  c.sigma = sigma_.get();
  c.psq = psq_.get();
  c.partial1 = partial1_.get();
  c.exp_mult = float(h_.exp_mult);
  c.param_scale_mult = h_.param_scale_mult ? 1 : 0;
  if (c_items_.size()) {
    c2_pass_c<T, k16><<<unsigned(c_items_.size()), kThreads, 0, s>>>(a, c, c_items_.get(), dx);
    CUDA_CHECK_LAUNCH();
  }
  if (c_tiles_.size() && h_.fast) {
    const C2FastArgs f{core_->work.get(),
                       c_tiles_.get(),
                       int(c_tiles_.size()),
                       core_->tensors.get(),
                       mats_.get(),
                       arena_.grads(),
                       arena_.params(),
                       core_->state.get(),
                       core_->rfac.get(),
                       core_->cfac.get(),
                       side_r_.get(),
                       side_c_.get(),
                       sigma_.get(),
                       psq_.get(),
                       weights_.get(),
                       scalars_.get(),
                       float(h_.grad_clip_val),
                       c.exp_mult,
                       c.param_scale_mult,
                       tile_partial_.get(),
                       k16};
    c2_pass_c_fast(f, dx, s);
  } else if (c_tiles_.size()) {
    c2_pass_c_tiles<T, k16><<<unsigned(c_tiles_.size()), kThreads, 0, s>>>(a, c, core_->work.get(), c_tiles_.get(),
                                                                           tile_partial_.get(), dx);
    CUDA_CHECK_LAUNCH();
  }
  const unsigned sb = unsigned((n_slices_ + 127) / 128);
  const double* tp = tile_partial_.get();
  if (ns_) {
    c2_slice_scalar<<<sb, 128, 0, s>>>(slices_.get(), n_slices_, partial1_.get(), tp, true, true, h_.ns_eps, 0.0,
                                       dnorm_.get());
    CUDA_CHECK_LAUNCH();
    c2_ns_in<<<ni, kThreads, 0, s>>>(items_.get(), dnorm_.get(), dx);
    CUDA_CHECK_LAUNCH();
    ns_->run(dx, s);
    c2_sumsq<<<ni, kThreads, 0, s>>>(items_.get(), dx, partial1_.get());
    CUDA_CHECK_LAUNCH();
  }
  c2_slice_scalar<<<sb, 128, 0, s>>>(slices_.get(), n_slices_, partial1_.get(), tp, !ns_, false, 0.0, h_.rmsmult,
                                     rscale_.get());
  CUDA_CHECK_LAUNCH();
  c2_apply<<<ni, kThreads, 0, s>>>(a, dx, rscale_.get(), p2_.get());
  CUDA_CHECK_LAUNCH();
  p2_ready_ = true;  // the next pass B takes channel 2's sums from this apply
}
template void Celo2::direction_passes<float, false>(float* dx, cudaStream_t s);
template void Celo2::direction_passes<float, true>(float* dx, cudaStream_t s);
template void Celo2::direction_passes<__nv_bfloat16, false>(__nv_bfloat16* dx, cudaStream_t s);
template void Celo2::direction_passes<__nv_bfloat16, true>(__nv_bfloat16* dx, cudaStream_t s);

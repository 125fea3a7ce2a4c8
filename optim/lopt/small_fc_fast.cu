// small_fc_lopt's (and ELO's) fast mode: pass C's MLP on tensor cores (mma.sync: layer 1 bf16, layers 2
// and 3 fp16, fp32 accumulation) for the tile2d tensors (2-D factored: nearly all parameters), with the
// exact fp32 MLP (small_fc_exact.cuh) for the rest (vectors, N-D tensors; a tiny share) in the first blocks
// of the same launch. Per step: the side tables (sf_side), then the one pass-C launch (sf_pass_c_fast).
// The kernels' PTX wrappers: kernels/mma_ptx.cuh.
#include <cstddef>

#include "kernels/mma_ptx.cuh"
#include "optim/lopt/small_fc_exact.cuh"

using namespace small_fc;

namespace {
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

// One row (32 elements) of a strip in shared memory, filled by cp.async kStages - 1 rows ahead.
struct SfStage {
  float4 st[32];       // records {m0, m1, m2, v} (bf16 records: 32 uint2 in the first half)
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
// One function of ~175 lines, its row pipeline in four lambdas (prefetch, features, load_a, mlp_row) over
// the strip's registers: their order in the straight-line loop body is the pipelining, and ptxas's output
// follows the compiler's value numbering, which moving code into functions changes (as it did for the
// attention kernels, scripts/compare_kernels.sh); the kernel keeps the code measured on the H100.
// k16: the records in bf16 (small_fc_lopt.bf16_record), 8 bytes an element.
template <bool kElo, bool k16>
__global__ void __launch_bounds__(kThreadsC, kMinBlocksC)
    sf_pass_c_fast(const LoWork* __restrict__ works, const LoTensor* __restrict__ ts, const float* __restrict__ g,
                   float* __restrict__ p, __nv_bfloat16* __restrict__ pb, const LoRec<k16>* __restrict__ state,
                   const float4* __restrict__ rfac, const float4* __restrict__ cfac,
                   const uint32_t* __restrict__ side_a, const uint32_t* __restrict__ side_b,
                   const float* __restrict__ norm, const float* __restrict__ mlp, const SfScalars* __restrict__ sc,
                   float exp_mult, float step_mult, float wd, const Chunk* __restrict__ exact_chunks, int n_exact,
                   const float4* __restrict__ diag, const float4* __restrict__ rrec, const float4* __restrict__ crec,
                   double* __restrict__ psq) {
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
  __shared__ float p2_strip[kTileCols / 32];  // per strip: the sum of the new p^2 (psq)
  if (threadIdx.x < kTileCols / 32) p2_strip[threadIdx.x] = 0.0f;
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
    float p2 = 0.0f;         // the new p^2 of this lane's column (col0 + eo), down the rows as pass B adds them
    auto prefetch = [&]() {  // the next row into its stage; past the last row: zeros, nothing read
      const uint32_t d = dlane + uint32_t(next % kStages) * uint32_t(sizeof(SfStage));
      const uint32_t e = at0 + uint32_t(next) * nb;
      const bool in = next < n;
      cp_async4(d + offsetof(SfStage, g), gbase + size_t(e) * 4, live && in);
      cp_async4(d + offsetof(SfStage, p), pbase + size_t(e) * 4, live && in);
      if (k16)
        cp_async8(d + offsetof(SfStage, st) + 4 * lane, sbase + size_t(e) * 8, live && in);
      else
        cp_async16(d + offsetof(SfStage, st) + 12 * lane, sbase + size_t(e) * 16, live && in);
      cp_async16_if(d + offsetof(SfStage, ha) + 12 * lane, hbase + size_t(next) * (4 * kSideWords),
                    lane < kSideWords / 4, in);
      cp_async_commit();
      next++;
    };
    // Feature step of row i (its stage complete and visible): features -> staging tile xi, side operand, old p.
    auto features = [&](int i, int xi, SfRowIn& in) {
      const SfStage& st = ws.stage[i % kStages];
      const float gv = gr(st.g[lane]), pv = st.p[lane];
      in.po = st.p[eo];
      const float4 rec = k16 ? lo_rec_load(reinterpret_cast<const uint2*>(st.st), lane) : st.st[lane], fa = st.fa;
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
      ldsm_x4(in.a[0], smem_u32(&ws.x[xi][lane % 16][(lane / 16) * 4]));
      ldsm_x4(in.a[1], smem_u32(&ws.x[xi][16 + lane % 16][(lane / 16) * 4]));
    };
    // MLP of row i and its update.
    auto mlp_row = [&](int i, const SfRowIn& in) {
      float4 dm = b2c;
#pragma unroll
      for (int mt = 0; mt < 2; mt++) {
        float4 h[4];
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
          h[nt] = mma_bf16_1688(xb[mt][0], xb[mt][1], in.ws[nt], make_float4(0, 0, 0, 0));
          h[nt] = mma_16816<false>(in.a[mt], wf[2 * nt], wf[2 * nt + 1], h[nt]);
        }
        uint32_t a2[2][4];
        relu_to_a_fragments(h, a2);
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
          h[nt] = mma_16816<true>(a2[0], wf[12 + 2 * nt], wf[12 + 2 * nt + 1], b1c[nt]);
          h[nt] = mma_16816<true>(a2[1], wf[20 + 2 * nt], wf[20 + 2 * nt + 1], h[nt]);
        }
        relu_to_a_fragments(h, a2);
        dm = mma_16816<true>(a2[0], wf[28 + 4 * mt], wf[29 + 4 * mt], dm);
        dm = mma_16816<true>(a2[1], wf[30 + 4 * mt], wf[31 + 4 * mt], dm);
      }
      // small_fc_lopt: p -= lr * dir * exp(exp_mult * mag) * step_mult, then decoupled weight decay; ELO:
      // p -= lr * (dir * exp(exp_mult * mag) + wd * p) (sf_store)
      const float dir = q % 2 ? dm.z : dm.x, mag = q % 2 ? dm.w : dm.y;
      const float pn = kElo ? in.po - lr * (dir * ex2_approx(mag * mag2) + wdf * in.po)
                            : (in.po - lrs * (dir * ex2_approx(mag * mag2))) * keep;
      const uint32_t e = base + uint32_t(eo) + uint32_t(i) * nb;
      st_global_if(pbase + size_t(e) * 4, pn, live_o);
      st_global_bf16_if(bbase + size_t(e) * 2, pn, live_o && bbase);
      if (live_o) p2 += pn * pn;
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
    // The strip's sum as pass B's warp of these columns takes it (lo_block_sums): lane c gets column c's
    // sum from the lane that wrote it (eo = 8 q + r), then the same butterfly.
    float v = __shfl_sync(0xffffffffu, p2, 4 * (lane % 8) + lane / 8);
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) p2_strip[strip] = v;
  }
  __syncthreads();
  if (threadIdx.x == 0) {  // as lo_block_sums adds its 8 warps
    double sum = 0;
    for (int k = 0; k < kTileCols / 32; k++) sum += p2_strip[k];
    psq[blockIdx.x - n_exact] = sum;
  }
}
}  // namespace

// Fast pass C: the side tables, then tile2d tensors on tensor cores and, in the launch's first blocks, the
// other tensors (flat chunks) exact.
template <bool kElo, bool k16>
void SmallFcLopt::fast_pass_c(cudaStream_t s) {
  const SfSide side{core_.side_items.get(),
                    core_.tensors.get(),
                    core_.rrec.get(),
                    core_.crec.get(),
                    core_.rfac.get(),
                    core_.cfac.get(),
                    norm_.get(),
                    mlp_.get(),
                    reinterpret_cast<uint32_t*>(side_a_.get()),
                    side_b_.get()};
  sf_side<<<unsigned(core_.side_items.size()), 256, 0, s>>>(side);
  CUDA_CHECK_LAUNCH();
  const unsigned n_exact = unsigned(core_.flat_chunks.size()), nw = unsigned(core_.work.size());
  sf_pass_c_fast<kElo, k16><<<n_exact + nw, kThreadsC, 0, s>>>(
      core_.work.get(), core_.tensors.get(), arena_.grads(), arena_.params(), arena_.params_bf16(),
      reinterpret_cast<const LoRec<k16>*>(core_.state.get()), core_.rfac.get(), core_.cfac.get(),
      reinterpret_cast<const uint32_t*>(side_a_.get()), reinterpret_cast<const uint32_t*>(side_b_.get()), norm_.get(),
      mlp_.get(), scalars_.get(), rule_.exp_mult, rule_.step_mult, rule_.wd, core_.flat_chunks.get(), int(n_exact),
      core_.diag.get(), core_.rrec.get(), core_.crec.get(), psq_.get());
  CUDA_CHECK_LAUNCH();
}
template void SmallFcLopt::fast_pass_c<false, false>(cudaStream_t s);
template void SmallFcLopt::fast_pass_c<false, true>(cudaStream_t s);
template void SmallFcLopt::fast_pass_c<true, false>(cudaStream_t s);

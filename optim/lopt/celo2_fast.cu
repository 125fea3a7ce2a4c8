// CELO2's fast pass C (celo2_fast.h): for each tile of a tile2d tensor, the MLP on tensor cores. A warp
// owns 32 columns of the tile and walks its rows: each lane builds its element's features (but channels
// 15-26, whose share of layer 1 comes from the side tables) and writes them as bf16 to shared memory, and
// the warp runs the 32 elements as two m16 tiles of mma.sync: layer 1 in bf16 (k16 + k8 over the 18
// channels; the slice's normalisers folded into the weights, so the features go in raw), layers 2 and 3 in
// fp16 (relu and saturation in the conversion), fp32 accumulation throughout. The accumulator of each
// layer is the next layer's A operand, so nothing else goes through shared memory. Layer 1's accumulator
// starts from b0 plus the row's and the column's side-table shares. Operand rounding bounds the error (the
// GPU test states it); the order of every sum is fixed, so a step is deterministic.
#include "common/cuda_check.h"
#include "kernels/mma_ptx.cuh"
#include "optim/lopt/celo2_device.cuh"
#include "optim/lopt/celo2_fast.h"

namespace {
constexpr int kCompact = kCh - (kSideEnd - kSideFirst);  // 18 channels per element
constexpr int kFeatLd = 24;                              // bf16 per element in shared memory: k16 + k8
// 3 blocks an SM (24 warps): the pass waits on its loads more than on its arithmetic (54% of DRAM's peak with
// 2 blocks; an L2 prefetch of later rows made it slower), and 78 registers a thread hold it without spills.
constexpr int kMinBlocks = 3;

// Compact channel kk (0-17) -> CELO2's channel: 0-14, then 27-29.
__device__ __forceinline__ int c2_compact_channel(int kk) { return kk < kSideFirst ? kk : kk + kSideEnd - kSideFirst; }

// Layer 1's weight from compact channel kk to hidden unit j, times the slice's normaliser of the channel;
// 0 past the 18 channels (the zero padding of k).
__device__ __forceinline__ float c2_w0n(const float* mlp, const float* sg, int kk, int j) {
  if (kk >= kCompact) return 0.0f;
  const int c = c2_compact_channel(kk);
  return mlp[kW0 + c * kH + j] * sg[c];
}

// The lane's element: its 18 raw features as 12 bf16 pairs (zero padded), channel order.
__device__ __forceinline__ void c2_pack_features(const float* x, uint32_t* packed) {
#pragma unroll
  for (int q = 0; q < kFeatLd / 2; q++) {
    const float lo = 2 * q < kCompact ? x[c2_compact_channel(2 * q)] : 0.0f;
    const float hi = 2 * q + 1 < kCompact ? x[c2_compact_channel(2 * q + 1)] : 0.0f;
    packed[q] = pack_bf16(lo, hi);
  }
}

// Lane (g, t)'s fixed mma operands for a block: the B operands (k 2t, 2t + 1 (| + 8) of output column g) of
// layer 1 (normalisers folded in), 2 and 3, and the biases of layers 2 and 3 in the accumulator layout.
struct C2Mma {
  uint32_t w0a, w0b, w0c, w1, w2;
  float4 bias2, bias3;
};
__device__ __forceinline__ C2Mma c2_mma_operands(const float* mlp, const float* sg, int gq, int tq) {
  C2Mma b;
  b.w0a = pack_bf16(c2_w0n(mlp, sg, 2 * tq, gq), c2_w0n(mlp, sg, 2 * tq + 1, gq));
  b.w0b = pack_bf16(c2_w0n(mlp, sg, 2 * tq + 8, gq), c2_w0n(mlp, sg, 2 * tq + 9, gq));
  b.w0c = pack_bf16(c2_w0n(mlp, sg, 2 * tq + 16, gq), c2_w0n(mlp, sg, 2 * tq + 17, gq));
  b.w1 = pack_f16(mlp[kW1 + 2 * tq * kH + gq], mlp[kW1 + (2 * tq + 1) * kH + gq]);
  b.w2 = gq < 2 ? pack_f16(mlp[kW2 + 4 * tq + gq], mlp[kW2 + 4 * tq + 2 + gq]) : 0u;
  b.bias2 = make_float4(mlp[kB1 + 2 * tq], mlp[kB1 + 2 * tq + 1], mlp[kB1 + 2 * tq], mlp[kB1 + 2 * tq + 1]);
  b.bias3 = tq == 0 ? make_float4(mlp[kB2], mlp[kB2 + 1], mlp[kB2], mlp[kB2 + 1]) : make_float4(0, 0, 0, 0);
  return b;
}

// Layers 1-3 of one m16 tile; returns lane (g, t)'s accumulator of layer 3: for t = 0, (dir, mag) of mma
// rows g and g + 8.
__device__ __forceinline__ float4 c2_mlp_mma(const uint32_t (&a16)[4], uint32_t a8lo, uint32_t a8hi, float4 h,
                                             const C2Mma& b) {
  h = mma_16816<false>(a16, b.w0a, b.w0b, h);
  h = mma_bf16_1688(a8lo, a8hi, b.w0c, h);
  const float4 h2 = mma_f16_1688(pack_f16_relu(h.x, h.y), pack_f16_relu(h.z, h.w), b.w1, b.bias2);
  return mma_f16_1688(pack_f16_relu(h2.x, h2.y), pack_f16_relu(h2.z, h2.w), b.w2, b.bias3);
}

// Lane L's own element's (dir, mag) from the two m-tiles' layer-3 accumulators: it is mma row L % 16 of
// m-tile L / 16, which lane 4 (L % 8) holds in (x, y) for rows 0-7 and (z, w) for rows 8-15.
__device__ __forceinline__ float2 c2_own_result(const float4 (&o)[2], int lane) {
  const int src = 4 * (lane % 8);
  float dm[2][4];
#pragma unroll
  for (int mt = 0; mt < 2; mt++) {
    dm[mt][0] = __shfl_sync(0xffffffffu, o[mt].x, src);
    dm[mt][1] = __shfl_sync(0xffffffffu, o[mt].y, src);
    dm[mt][2] = __shfl_sync(0xffffffffu, o[mt].z, src);
    dm[mt][3] = __shfl_sync(0xffffffffu, o[mt].w, src);
  }
  const bool mt1 = lane / 16, half = (lane / 8) % 2;
  return make_float2(mt1 ? (half ? dm[1][2] : dm[1][0]) : (half ? dm[0][2] : dm[0][0]),
                     mt1 ? (half ? dm[1][3] : dm[1][1]) : (half ? dm[0][3] : dm[0][1]));
}

// What one row of a tile gives a lane: its element's gradient (raw), weight and state, the row's factor and
// the row's side share of hidden units 2t, 2t + 1.
struct C2RowIn {
  float g, p;
  float4 st, f_row;
  float2 hr;
};
template <bool k16>
__device__ __forceinline__ C2RowIn c2_row_in(const C2FastArgs& a, const LoTensor& t, const float4* side_rows,
                                             const float4* f_rows, int64_t row, int64_t col, bool mine, int tq) {
  C2RowIn in{0.0f, 0.0f, make_float4(0, 0, 0, 0), f_rows[row],
             reinterpret_cast<const float2*>(side_rows + 2 * row)[tq]};
  if (mine) {
    const int64_t i = row * t.nb + col;
    in.g = a.g[t.p_off + i];
    in.p = a.p[t.p_off + i];
    in.st = c2_rec<k16>(a.state, t.s_off + i);
  }
  return in;
}

template <typename T, bool k16>
__global__ void __launch_bounds__(kThreads, kMinBlocks) c2_pass_c_fast_k(const C2FastArgs a, T* __restrict__ dx) {
  __shared__ __align__(16) __nv_bfloat16 feat[kWarps][32][kFeatLd];  // 48-byte rows: ldmatrix conflict-free
  const int w = a.tiles[blockIdx.x];
  const LoWork wk = a.works[w];
  const LoTensor t = a.ts[wk.tensor];
  const C2Mat m = a.mats[wk.tensor];
  const C2Scalars sc = *a.sc;
  const float ps = c2_param_scale(a.param_scale_mult, a.psq, m, t.numel);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, gq = lane / 4, tq = lane % 4;
  const float* sg = a.sigma + int64_t(m.first_slice) * kPart;
  const float* mlp = a.mlp;
  const C2Mma mma = c2_mma_operands(mlp, sg, gq, tq);
  // 2-D: element (row, col) has R entry col and C entry row when d0 is the row axis, else R row and C col.
  const bool col_is_r = lo_b_is_r(t);
  const float4* side_cols = col_is_r ? a.side_r + 2 * t.r_off : a.side_c + 2 * t.c_off;
  const float4* side_rows = col_is_r ? a.side_c + 2 * t.c_off : a.side_r + 2 * t.r_off;
  const float4* f_cols = col_is_r ? a.rfac + t.r_off : a.cfac + t.c_off;
  const float4* f_rows = col_is_r ? a.cfac + t.c_off : a.rfac + t.r_off;
  const int64_t wcol0 = int64_t(wk.col0) + 32 * warp;
  // Layer 1's start for the lane's mma rows (columns 16 mt + 8 half + g of the warp), hidden units 2t, 2t + 1:
  // b0 plus the column's side share; each row adds its own.
  float2 hc[2][2];
#pragma unroll
  for (int mt = 0; mt < 2; mt++)
#pragma unroll
    for (int half = 0; half < 2; half++) {
      const int64_t c = wcol0 + 16 * mt + 8 * half + gq;
      const float2 v = c < t.nb ? reinterpret_cast<const float2*>(side_cols + 2 * c)[tq] : make_float2(0, 0);
      hc[mt][half] = make_float2(mlp[kB0 + 2 * tq] + v.x, mlp[kB0 + 2 * tq + 1] + v.y);
    }
  const int64_t col = wcol0 + lane;  // the lane's own element's column
  const bool mine = col < t.nb;
  const float4 zero = make_float4(0, 0, 0, 0), f_col = mine ? f_cols[col] : zero;
  uint4* my_feat = reinterpret_cast<uint4*>(&feat[warp][lane][0]);
  const uint32_t a16_addr0 = smem_u32(&feat[warp][8 * ((lane / 8) % 2) + lane % 8][8 * (lane / 16)]);
  const uint32_t a16_addr1 = a16_addr0 + 16 * kFeatLd * 2;  // the second m-tile: 16 rows on
  const uint32_t a8_addr = smem_u32(&feat[warp][lane][16]);
  double acc = 0;
  // The next row's loads are issued before this row's work (one row of loads in flight per warp would leave
  // the memory system idle while the warp computes).
  C2RowIn next = c2_row_in<k16>(a, t, side_rows, f_rows, wk.row0, col, mine, tq);
  for (int r = 0; r < wk.n; r++) {
    const int64_t row = wk.row0 + r;
    const C2RowIn in = next;
    if (r + 1 < wk.n) next = c2_row_in<k16>(a, t, side_rows, f_rows, row + 1, col, mine, tq);
    const float2 hr = in.hr;
    uint32_t packed[kFeatLd / 2] = {};
    if (mine) {
      float x[kCh];
      c2_features<true>(c2_grad(in.g, sc, a.cv), in.p, in.st, zero, zero, in.f_row, f_col, zero, zero, x);
      c2_pack_features(x, packed);
    }
    my_feat[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    my_feat[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
    my_feat[2] = make_uint4(packed[8], packed[9], packed[10], packed[11]);
    __syncwarp();
    uint32_t a16[2][4], a8[4];
    ldsm_x4(a16[0], a16_addr0);
    ldsm_x4(a16[1], a16_addr1);
    ldsm_x4(a8, a8_addr);
    __syncwarp();  // the next row overwrites feat
    float4 o[2];
#pragma unroll
    for (int mt = 0; mt < 2; mt++) {
      const float4 h = make_float4(hr.x + hc[mt][0].x, hr.y + hc[mt][0].y, hr.x + hc[mt][1].x, hr.y + hc[mt][1].y);
      o[mt] = c2_mlp_mma(a16[mt], a8[2 * mt], a8[2 * mt + 1], h, mma);
    }
    const float2 dm = c2_own_result(o, lane);
    if (mine) {
      const float em = expf(dm.y * a.exp_mult);
      const float D = a.param_scale_mult ? dm.x * (ps * em) : dm.x * em;
      dx_store(dx + m.dx + row * t.nb + col, D);
      acc += double(D) * D;
    }
  }
  acc = block_sum_d(acc);
  if (threadIdx.x == 0) a.tile_partial[w] = acc;
}
}  // namespace

template <typename T>
void c2_pass_c_fast(const C2FastArgs& a, T* dx, cudaStream_t s) {
  if (a.rec16)
    c2_pass_c_fast_k<T, true><<<unsigned(a.n_tiles), kThreads, 0, s>>>(a, dx);
  else
    c2_pass_c_fast_k<T, false><<<unsigned(a.n_tiles), kThreads, 0, s>>>(a, dx);
  CUDA_CHECK_LAUNCH();
}
template void c2_pass_c_fast(const C2FastArgs& a, float* dx, cudaStream_t s);
template void c2_pass_c_fast(const C2FastArgs& a, __nv_bfloat16* dx, cudaStream_t s);

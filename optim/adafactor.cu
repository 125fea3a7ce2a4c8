// Adafactor in three passes over the arena (24 B/param; optimizers.md D):
//   A  (tiles)  read g, p: row and column sums of g^2 into small partial buffers, sum of p^2 per tile;
//               vectors: update their full variance in place.
//   F1 (tensor) reduce the partials in a fixed order: row_var, col_var, mean(row_var), alpha.
//   B  (tiles)  read g: sum of U^2, U = g * rsqrt(max(V_hat, eps1^2)) recomputed from the factors.
//   F2 (tensor) update-clipping denominator; coefficient -alpha/denom.
//   C  (tiles)  read g, p, write p: p = p*(1 - lr*wd) + coef*U.
// Every reduction is a fixed-order tree (no atomics), so runs are bit-reproducible.
// Tiles: up to 1024 columns; a warp walks rows, each lane owns 32 columns (float4 when cols % 4 == 0).
#include "kernels/device_utils.cuh"
#include "optim/adafactor.h"
#include "optim/step_scalars.cuh"
#include "optim/tile_reduce.cuh"

namespace {
constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kTileCols = 1024, kTileElems = 32768;

// Fixed-order block sum in double of one value per thread; result valid in thread 0.
__device__ double block_sum(double x) {
  __shared__ double red[kThreads];
  red[threadIdx.x] = x;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  double r = red[0];
  __syncthreads();
  return r;
}

__global__ void af_begin_step(int64_t* step, AdafactorOptions h, double eps1, LrSchedule sched, const float* grad_scale,
                              AfScalars* out) {
  int64_t t = ++*step;
  double tf = double(t), lr = h.lr * sched.factor(t - 1);
  AfScalars s;
  s.w = float(pow(tf, h.beta2_decay));
  s.rho = fmin(lr, 1.0 / sqrt(tf));
  s.wd_factor = float(1.0 - lr * h.weight_decay);
  s.eps1 = float(eps1);
  s.eps1sq = float(eps1 * eps1);
  s.eps2 = h.eps2;
  s.d = h.d;
  s.grad_scale = read_grad_scale(grad_scale);
  *out = s;
}

// ------------------------------------------------------------------------------------- pass A
// The column reduction is shared with the learned optimizers' pass A; their row sums differ (lo_pass_a).
__global__ void __launch_bounds__(kThreads)
    af_pass_a(const Tile* __restrict__ tiles, const AfTensor* __restrict__ tensors, const float* __restrict__ p,
              const float* __restrict__ g, float* __restrict__ variance, float* __restrict__ rowpart,
              float* __restrict__ colpart, float* __restrict__ tile_sq, const AfScalars* __restrict__ sc) {
  __shared__ float cols[kWarps][kTileCols];
  const Tile tl = tiles[blockIdx.x];
  const AfTensor t = tensors[tl.slot];
  const float gs = sc->grad_scale;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t slice = int64_t(tl.b) * t.R * t.C;
  const float* G = g + t.p_off + slice;
  const float* P = p + t.p_off + slice;
  float psq = 0.0f;
  if (!t.factored) {
    const float w = sc->w;
    float* V = variance + t.var_off;
    for (int c = tl.c0 + threadIdx.x; c < tl.c0 + tl.nc; c += kThreads) {
      float gv = G[c] * gs, pv = P[c];
      V[c] = torch_lerp(V[c], gv * gv, w);
      psq += pv * pv;
    }
  } else {
    float acc[32];
#pragma unroll
    for (int j = 0; j < 32; j++) acc[j] = 0.0f;
    const bool vec = (t.C % 4) == 0;
    for (int r = tl.r0 + warp; r < tl.r0 + tl.nr; r += kWarps) {
      const float* grow = G + int64_t(r) * t.C + tl.c0;
      const float* prow = P + int64_t(r) * t.C + tl.c0;
      float rs = 0.0f;
      if (vec) {
#pragma unroll
        for (int j = 0; j < 8; j++) {
          int cc = 4 * lane + 128 * j;
          if (cc < tl.nc) {
            float4 gv = *reinterpret_cast<const float4*>(grow + cc);
            float4 pv = *reinterpret_cast<const float4*>(prow + cc);
            float a = gv.x * gs, b = gv.y * gs, c = gv.z * gs, d = gv.w * gs;
            a *= a;
            b *= b;
            c *= c;
            d *= d;
            rs += (a + b) + (c + d);
            acc[4 * j] += a;
            acc[4 * j + 1] += b;
            acc[4 * j + 2] += c;
            acc[4 * j + 3] += d;
            psq += pv.x * pv.x + pv.y * pv.y + pv.z * pv.z + pv.w * pv.w;
          }
        }
      } else {
#pragma unroll
        for (int j = 0; j < 32; j++) {
          int cc = lane + 32 * j;
          if (cc < tl.nc) {
            float a = grow[cc] * gs, pv = prow[cc];
            a *= a;
            rs += a;
            acc[j] += a;
            psq += pv * pv;
          }
        }
      }
      rs = warp_sum(rs);
      if (lane == 0) rowpart[t.rowpart_off + (int64_t(tl.b) * t.col_tiles + tl.tc) * t.R + r] = rs;
    }
    // Column partials: each warp's sums to shared memory, then a fixed-order sum over the warps.
    if (vec) {
#pragma unroll
      for (int j = 0; j < 8; j++)
#pragma unroll
        for (int k = 0; k < 4; k++) {
          int cc = 4 * lane + 128 * j + k;
          if (cc < kTileCols) cols[warp][cc] = acc[4 * j + k];
        }
    } else {
#pragma unroll
      for (int j = 0; j < 32; j++) cols[warp][lane + 32 * j] = acc[j];
    }
    __syncthreads();
    sum_warp_columns(cols, tl.nc, colpart + t.colpart_off + (int64_t(tl.b) * t.row_tiles + tl.tr) * t.C + tl.c0);
  }
  double tot = block_sum(double(psq));
  if (threadIdx.x == 0) tile_sq[blockIdx.x] = float(tot);
}

// ------------------------------------------------------------------------------------- F1
// One block per work item, so that tensors with many slices (conv kernels) or many row tiles (tall
// embeddings) spread over the GPU: kAlpha (relative step of a tensor), kRows (row_var and its mean for
// one slice), kCols (col_var of 32 columns of one slice, row tiles split over 8 warps).
__global__ void __launch_bounds__(kThreads)
    af_finalize_factors(const AfItem* __restrict__ items, const AfTensor* __restrict__ tensors,
                        float* __restrict__ factors, const float* __restrict__ rowpart,
                        const float* __restrict__ colpart, float* __restrict__ den, const float* __restrict__ tile_sq,
                        double* __restrict__ alpha, const AfScalars* __restrict__ sc) {
  const AfItem it = items[blockIdx.x];
  const AfTensor t = tensors[it.slot];
  const AfScalars s = *sc;
  if (it.kind == AfItem::kAlpha) {
    double psq = 0;
    for (int i = t.tile_begin + threadIdx.x; i < t.tile_end; i += kThreads) psq += tile_sq[i];
    psq = block_sum(psq);
    if (threadIdx.x == 0) alpha[it.slot] = fmax(s.eps2, sqrt(psq) / sqrt(double(t.numel))) * s.rho;
  } else if (it.kind == AfItem::kRows) {
    float* rv = factors + t.rv_off + int64_t(it.b) * t.R;
    double rsum = 0;
    for (int r = threadIdx.x; r < t.R; r += kThreads) {
      float sq = 0.0f;
      for (int k = 0; k < t.col_tiles; k++) sq += rowpart[t.rowpart_off + (int64_t(it.b) * t.col_tiles + k) * t.R + r];
      float nrm = sqrtf(sq);  // torch: vector_norm(g, dim=-1)^2 / C
      float v = torch_lerp(rv[r], nrm * nrm / float(t.C), s.w);
      rv[r] = v;
      rsum += v;
    }
    rsum = block_sum(rsum);
    if (threadIdx.x == 0) den[t.den_off + it.b] = fmaxf(float(rsum / t.R), s.eps1);
  } else {
    __shared__ float part[kWarps][32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, c = it.c0 + lane;
    float sq = 0.0f;
    if (c < t.C) {
      const float* src = colpart + t.colpart_off + int64_t(it.b) * t.row_tiles * t.C + c;
#pragma unroll 4
      for (int k = warp; k < t.row_tiles; k += kWarps) sq += src[int64_t(k) * t.C];
    }
    part[warp][lane] = sq;
    __syncthreads();
    if (warp == 0 && c < t.C) {
      float tot = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; w++) tot += part[w][lane];
      float nrm = sqrtf(tot);
      float* cv = factors + t.cv_off + int64_t(it.b) * t.C;
      cv[c] = torch_lerp(cv[c], nrm * nrm / float(t.R), s.w);
    }
  }
}

// ------------------------------------------------------------------------------------- passes B, C
// U for one element of a factored tensor: g * rsqrt(max(row_var*col_var/den, eps1^2)).
__device__ __forceinline__ float af_u(float g, float rv, float cv, float den, float eps1sq) {
  return rsqrtf(fmaxf(rv * cv / den, eps1sq)) * g;
}

// kApply = false: pass B (sum of U^2 per tile). kApply = true: pass C (p = p*wd_factor + coef*U).
template <bool kApply>
__global__ void __launch_bounds__(kThreads)
    af_update_pass(const Tile* __restrict__ tiles, const AfTensor* __restrict__ tensors, float* __restrict__ p,
                   const float* __restrict__ g, __nv_bfloat16* __restrict__ pb, const float* __restrict__ factors,
                   const float* __restrict__ variance, const float* __restrict__ den, float* __restrict__ tile_sq,
                   const double* __restrict__ coef_in, const AfScalars* __restrict__ sc) {
  const Tile tl = tiles[blockIdx.x];
  const AfTensor t = tensors[tl.slot];
  const float gs = sc->grad_scale, eps1sq = sc->eps1sq;
  const float wdf = t.decay ? sc->wd_factor : 1.0f;
  const float coef = kApply ? float(coef_in[tl.slot]) : 0.0f;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t slice = int64_t(tl.b) * t.R * t.C;
  const float* G = g + t.p_off + slice;
  float* P = p + t.p_off + slice;
  __nv_bfloat16* PB = pb ? pb + t.p_off + slice : nullptr;
  float usq = 0.0f;
  auto apply = [&](float* pp, float u, int64_t i) {
    float v = *pp * wdf + coef * u;
    *pp = v;
    if (PB) PB[i] = __float2bfloat16_rn(v);
  };
  if (!t.factored) {
    const float* V = variance + t.var_off;
    for (int c = tl.c0 + threadIdx.x; c < tl.c0 + tl.nc; c += kThreads) {
      float u = rsqrtf(fmaxf(V[c], eps1sq)) * (G[c] * gs);
      if (kApply)
        apply(P + c, u, c);
      else
        usq += u * u;
    }
  } else {
    const float dn = den[t.den_off + tl.b];
    const float* RV = factors + t.rv_off + int64_t(tl.b) * t.R;
    const float* CV = factors + t.cv_off + int64_t(tl.b) * t.C + tl.c0;
    const bool vec = (t.C % 4) == 0;
    for (int r = tl.r0 + warp; r < tl.r0 + tl.nr; r += kWarps) {
      const float rv = RV[r];
      const int64_t row = int64_t(r) * t.C + tl.c0;
      if (vec) {
#pragma unroll 2
        for (int j = 0; j < 8; j++) {
          int cc = 4 * lane + 128 * j;
          if (cc < tl.nc) {
            float4 gv = *reinterpret_cast<const float4*>(G + row + cc);
            float4 cv = *reinterpret_cast<const float4*>(CV + cc);
            float u0 = af_u(gv.x * gs, rv, cv.x, dn, eps1sq), u1 = af_u(gv.y * gs, rv, cv.y, dn, eps1sq);
            float u2 = af_u(gv.z * gs, rv, cv.z, dn, eps1sq), u3 = af_u(gv.w * gs, rv, cv.w, dn, eps1sq);
            if (kApply) {
              float4 pv = *reinterpret_cast<float4*>(P + row + cc);
              pv.x = pv.x * wdf + coef * u0;
              pv.y = pv.y * wdf + coef * u1;
              pv.z = pv.z * wdf + coef * u2;
              pv.w = pv.w * wdf + coef * u3;
              *reinterpret_cast<float4*>(P + row + cc) = pv;
              if (PB) {
                __nv_bfloat162 lo = __floats2bfloat162_rn(pv.x, pv.y), hi = __floats2bfloat162_rn(pv.z, pv.w);
                uint2 w2;
                w2.x = *reinterpret_cast<uint32_t*>(&lo);
                w2.y = *reinterpret_cast<uint32_t*>(&hi);
                *reinterpret_cast<uint2*>(PB + row + cc) = w2;
              }
            } else {
              usq += (u0 * u0 + u1 * u1) + (u2 * u2 + u3 * u3);
            }
          }
        }
      } else {
        for (int cc = lane; cc < tl.nc; cc += 32) {
          float u = af_u(G[row + cc] * gs, rv, CV[cc], dn, eps1sq);
          if (kApply)
            apply(P + row + cc, u, row + cc);
          else
            usq += u * u;
        }
      }
    }
  }
  if (!kApply) {
    double tot = block_sum(double(usq));
    if (threadIdx.x == 0) tile_sq[blockIdx.x] = float(tot);
  }
}

// ------------------------------------------------------------------------------------- F2
__global__ void __launch_bounds__(kThreads)
    af_finalize_clip(const AfTensor* __restrict__ tensors, const float* __restrict__ tile_sq,
                     double* __restrict__ alpha, const AfScalars* __restrict__ sc) {
  const AfTensor t = tensors[blockIdx.x];
  double usq = 0;
  for (int i = t.tile_begin + threadIdx.x; i < t.tile_end; i += kThreads) usq += tile_sq[i];
  usq = block_sum(usq);
  if (threadIdx.x == 0) {
    double denom = fmax(1.0, sqrt(usq) / (sqrt(double(t.numel)) * sc->d));
    alpha[blockIdx.x] = -alpha[blockIdx.x] / denom;
  }
}
}  // namespace

Adafactor::Adafactor(Arena& arena, const OptimOptions& opts, const Owned& owned) : Optimizer(arena, opts, owned) {
  require_whole(owned_);
  const ParamTable& tab = arena.table();
  std::vector<AfTensor> ts;
  std::vector<Tile> tiles;
  std::vector<AfItem> items;
  int64_t nf = 0, nv = 0, nrp = 0, ncp = 0, nden = 0;
  for (int idx : owned_) {  // slot = position in owned_: the kernels' index into the tensor table
    const TensorInfo& ti = tab[idx];
    const int slot = int(ts.size());
    AfTensor t{};
    t.p_off = ti.offset;
    t.numel = ti.numel;
    t.factored = ti.ndim() > 1;
    t.decay = ti.decay;
    t.tile_begin = int32_t(tiles.size());
    if (t.factored) {
      t.R = int32_t(ti.rows());
      t.C = int32_t(ti.cols());
      t.B = int32_t(ti.batch());
      TileGrid gr = plan_tile_grid(t.R, t.C, kTileCols, kTileElems);
      t.row_tiles = gr.row_tiles;
      t.col_tiles = gr.col_tiles;
      auto align = [](int64_t n) { return (n + 31) / 32 * 32; };  // col_var is read as float4
      t.rv_off = nf;
      nf += align(int64_t(t.B) * t.R);
      t.cv_off = nf;
      nf += align(int64_t(t.B) * t.C);
      t.rowpart_off = nrp;
      nrp += int64_t(t.B) * t.col_tiles * t.R;
      t.colpart_off = ncp;
      ncp += int64_t(t.B) * t.row_tiles * t.C;
      t.den_off = nden;
      nden += t.B;
      append_tiles(&tiles, slot, t.B, t.R, t.C, gr);
    } else {
      if (ti.numel >= (1ll << 31))
        user_error("tensor '", ti.name, "' is too large for Adafactor (2^31 elements or more).");
      t.R = 1;
      t.C = int32_t(ti.numel);
      t.B = 1;
      t.var_off = nv;
      nv += ti.numel;
      append_tiles(&tiles, slot, 1, 1, t.C, plan_tile_grid(1, t.C, kTileElems, kTileElems));
    }
    t.tile_end = int32_t(tiles.size());
    items.push_back({slot, AfItem::kAlpha, 0, 0});
    for (int b = 0; t.factored && b < t.B; b++) {
      items.push_back({slot, AfItem::kRows, b, 0});
      for (int c0 = 0; c0 < t.C; c0 += 32) items.push_back({slot, AfItem::kCols, b, c0});
    }
    ts.push_back(t);
  }
  n_tensors_ = int(ts.size());
  tensors_.alloc(ts.size(), "Adafactor tensor table");
  tensors_.upload(ts);
  tiles_.alloc(tiles.size(), "Adafactor tile map");
  tiles_.upload(tiles);
  items_.alloc(items.size(), "Adafactor reduction items");
  items_.upload(items);
  factors_.alloc(size_t(nf), "Adafactor row/col factors");
  factors_.zero();
  variance_.alloc(size_t(nv), "Adafactor variance");
  variance_.zero();
  rowpart_.alloc(size_t(nrp), "Adafactor row partials");
  colpart_.alloc(size_t(ncp), "Adafactor column partials");
  den_.alloc(size_t(nden), "Adafactor row means");
  tile_sq_.alloc(tiles.size(), "Adafactor tile sums");
  alpha_.alloc(ts.size(), "Adafactor step sizes");
  scalars_.alloc(1, "Adafactor scalars");
}

void Adafactor::step(const StepInfo& info, cudaStream_t s) {
  const unsigned nt = unsigned(tiles_.size()), nten = unsigned(n_tensors_);
  af_begin_step<<<1, 1, 0, s>>>(d_step_.get(), opts_.adafactor, opts_.adafactor.eps1_value(), opts_.schedule,
                                info.d_grad_scale, scalars_.get());
  CUDA_CHECK_LAUNCH();
  af_pass_a<<<nt, kThreads, 0, s>>>(tiles_.get(), tensors_.get(), arena_.params(), arena_.grads(), variance_.get(),
                                    rowpart_.get(), colpart_.get(), tile_sq_.get(), scalars_.get());
  CUDA_CHECK_LAUNCH();
  af_finalize_factors<<<unsigned(items_.size()), kThreads, 0, s>>>(items_.get(), tensors_.get(), factors_.get(),
                                                                   rowpart_.get(), colpart_.get(), den_.get(),
                                                                   tile_sq_.get(), alpha_.get(), scalars_.get());
  CUDA_CHECK_LAUNCH();
  af_update_pass<false><<<nt, kThreads, 0, s>>>(tiles_.get(), tensors_.get(), arena_.params(), arena_.grads(), nullptr,
                                                factors_.get(), variance_.get(), den_.get(), tile_sq_.get(), nullptr,
                                                scalars_.get());
  CUDA_CHECK_LAUNCH();
  af_finalize_clip<<<nten, kThreads, 0, s>>>(tensors_.get(), tile_sq_.get(), alpha_.get(), scalars_.get());
  CUDA_CHECK_LAUNCH();
  af_update_pass<true><<<nt, kThreads, 0, s>>>(tiles_.get(), tensors_.get(), arena_.params(), arena_.grads(),
                                               arena_.params_bf16(), factors_.get(), variance_.get(), den_.get(),
                                               nullptr, alpha_.get(), scalars_.get());
  CUDA_CHECK_LAUNCH();
}

std::vector<Optimizer::StateBuffer> Adafactor::state_buffers() const {
  return {{"adafactor.factors", factors_.get(), factors_.bytes()},
          {"adafactor.variance", variance_.get(), variance_.bytes()}};
}

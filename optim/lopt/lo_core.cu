#include <algorithm>

#include "kernels/device_utils.cuh"
#include "optim/grad_clip.h"
#include "optim/lopt/lo_core.h"
#include "optim/lopt/lo_device.cuh"
#include "optim/step_scalars.cuh"
#include "optim/tile_reduce.cuh"

namespace {
constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kPassACols = kLoPassACols;  // pass A tiles: Adafactor's (a lane owns 32 columns)
constexpr int64_t kTileElems = kLoPassATileElems;
constexpr int kFlatChunk = 256;  // fast pass C's exact blocks: short chunks (few elements, a long MLP each)

// The gradient passes A and F1 see: g * scale clamped to +-clip where clip > 0 (small_fc_lopt, VeLO,
// CELO2), or ELO's nan_to_num((g * scale) * scale2).
template <bool kNanToNum>
__device__ __forceinline__ float lo_grad(float g, float scale, float scale2, float clip) {
  if (kNanToNum) return lo_nan_to_num(g * scale * scale2);
  g *= scale;
  return clip > 0 ? fminf(clip, fmaxf(-clip, g)) : g;
}

// Pass A over 2-D factored tensors: per tile, sums of g^2 per row (over the tile's columns) and per
// column (over the tile's rows), in Adafactor's tiles and with its column reduction (sum_warp_columns).
// The rest is not Adafactor's pass A, so it is not shared: g is clamped to [-clip, clip] first (VeLO), a
// 16-byte load adds its four squares to the row sum one at a time (Adafactor: (a + b) + (c + d), another
// rounding), every tile of 16-byte aligned rows takes 16-byte loads, and there is no sum of p^2 and no
// batch slice.
//
// With the trainer's clip taken (LoCore::run_taken_clip) it runs twice. kRaw, before the clip coefficient s
// is known: sums of g^2 unscaled, and per tile their total (the clipper's partial sum) and the largest |g|.
// kRepair, after it: only the tiles whose total is not finite or (with a clip) where the clamp binds (largest
// |g| times s over clip) sum again, (s g)^2 over s^2, so that F1's s^2 times the sums is what kScaled would
// have given up to rounding.
enum PassAMode { kScaled, kRaw, kRepair };
}  // namespace
struct LoPassA {
  const Tile* tiles;  // one block each
  const LoTensor* ts;
  const float* g;
  float* rowpart;             // per column tile and row: sum of g^2
  float* colpart;             // per row tile and column: sum of g^2
  const float* gscale;        // clip coefficient, or null
  float clip;                 // > 0: g clamped to [-clip, clip]
  const float* gscale2;       // kNanToNum: the second factor (ELO's global clip)
  float* tile_sq;             // kRaw writes, kRepair reads: per tile of the table (tile_index), the sum of g^2
  float* tile_max;            // the same per tile here: the largest |g|
  const int32_t* tile_index;  // per tile here: its number over the whole table (LoCore::number_table_tiles)
};
namespace {
// One element's share of the sums: its (clamped, scaled) g squared; kRaw also keeps the largest |g|, kRepair
// takes the square over s^2.
template <bool kNanToNum, int kMode>
__device__ __forceinline__ float lo_pass_a_square(float x, float gs, float gs2, float clip, float over, float* mx) {
  float y = lo_grad<kNanToNum>(x, gs, gs2, clip);
  if (kMode == kRaw) *mx = fmaxf(*mx, fabsf(y));
  y *= y;
  if (kMode == kRepair) y *= over;
  return y;
}

// kRaw's tile totals, after the block's __syncthreads: the warps' row sums added in warp order (one rounding on
// every run) and their largest |g|.
__device__ __forceinline__ void lo_tile_totals(const float* tot_w, const float* max_w, float* tile_sq, float* tile_max,
                                               const int32_t* tile_index) {
  float sq = 0.0f, m = 0.0f;
  for (int w = 0; w < kWarps; w++) {
    sq += tot_w[w];
    m = fmaxf(m, max_w[w]);
  }
  tile_sq[tile_index[blockIdx.x]] = sq;
  tile_max[blockIdx.x] = m;
}

template <bool kNanToNum, int kMode = kScaled>
__global__ void __launch_bounds__(kThreads) lo_pass_a(const LoPassA a) {
  // __restrict__ copies of the pointers (lo_core.h: kernel arguments)
  const Tile* __restrict__ tiles = a.tiles;
  const LoTensor* __restrict__ ts = a.ts;
  const float* __restrict__ g = a.g;
  float* __restrict__ rowpart = a.rowpart;
  float* __restrict__ colpart = a.colpart;
  const float* __restrict__ gscale = a.gscale;
  const float clip = a.clip;
  __shared__ __align__(16) float cols[kWarps][kPassACols];
  const Tile tl = tiles[blockIdx.x];
  const LoTensor t = ts[tl.slot];
  const float gs = read_grad_scale(gscale), gs2 = kNanToNum ? *a.gscale2 : 1.0f;
  if (kMode == kRepair && (clip <= 0.0f || a.tile_max[blockIdx.x] * gs <= clip) &&
      isfinite(a.tile_sq[a.tile_index[blockIdx.x]]))
    return;
  const float over = kMode != kRepair ? 1.0f : gs > 0.0f ? 1.0f / (gs * gs) : 0.0f;
  float mx = 0.0f, total = 0.0f;  // kRaw: this lane's largest |g|; lane 0: its warp's rows' sums
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t C = t.nb;
  const float* G = g + t.p_off;
  float acc[32];
#pragma unroll
  for (int j = 0; j < 32; j++) acc[j] = 0.0f;
  if (C % 4 == 0 && tl.nc % 4 == 0) {
    // Rows of 16-byte aligned float4s (tensors start 128-byte aligned, tiles at multiples of 1024
    // columns): a lane owns columns 4 (lane + 32 j) + k and a row's loads of 16 bytes are issued together;
    // past the tile's width it loads zeros, which leave every sum as it was. The scalar form below keeps a
    // quarter of the bytes in flight: on GPT-2 124M's 768 columns it took 2.4x the bandwidth floor.
    const int nq = tl.nc / 4;
    for (int r = tl.r0 + warp; r < tl.r0 + tl.nr; r += kWarps) {
      const float4* row = reinterpret_cast<const float4*>(G + int64_t(r) * C + tl.c0);
      float4 v[8];
#pragma unroll
      for (int j = 0; j < 8; j++) {
        v[j] = make_float4(0, 0, 0, 0);
        if (lane + 32 * j < nq) v[j] = row[lane + 32 * j];
      }
      float rs = 0.0f;
#pragma unroll
      for (int j = 0; j < 8; j++) {
        const float x[4] = {v[j].x, v[j].y, v[j].z, v[j].w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
          const float y = lo_pass_a_square<kNanToNum, kMode>(x[k], gs, gs2, clip, over, &mx);
          rs += y;
          acc[4 * j + k] += y;
        }
      }
      rs = warp_sum(rs);
      if (lane == 0) rowpart[t.rowpart_off + int64_t(tl.tc) * t.na + r] = rs;
      total += rs;
    }
#pragma unroll
    for (int j = 0; j < 8; j++)
      reinterpret_cast<float4*>(cols[warp])[lane + 32 * j] =
          make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
  } else {
    for (int r = tl.r0 + warp; r < tl.r0 + tl.nr; r += kWarps) {
      const float* row = G + int64_t(r) * C + tl.c0;
      float rs = 0.0f;
#pragma unroll
      for (int j = 0; j < 32; j++) {
        int cc = lane + 32 * j;
        if (cc < tl.nc) {
          const float v = lo_pass_a_square<kNanToNum, kMode>(row[cc], gs, gs2, clip, over, &mx);
          rs += v;
          acc[j] += v;
        }
      }
      rs = warp_sum(rs);
      if (lane == 0) rowpart[t.rowpart_off + int64_t(tl.tc) * t.na + r] = rs;
      total += rs;
    }
#pragma unroll
    for (int j = 0; j < 32; j++) cols[warp][lane + 32 * j] = acc[j];
  }
  __shared__ float tot_w[kWarps], max_w[kWarps];
  if (kMode == kRaw) {
    mx = warp_max(mx);
    if (lane == 0) {
      tot_w[warp] = total;
      max_w[warp] = mx;
    }
  }
  __syncthreads();
  sum_warp_columns(cols, tl.nc, colpart + t.colpart_off + int64_t(tl.tr) * C + tl.c0);
  if (kMode == kRaw && threadIdx.x == 0) lo_tile_totals(tot_w, max_w, a.tile_sq, a.tile_max, a.tile_index);
}

// The mean of (s g)^2 from an unscaled sum of g^2 (pass A's kRaw): s^2 sum / n, in double as the scaled
// form divides.
__device__ __forceinline__ float lo_scaled_mean(float sum, const float* gscale, int64_t n) {
  const double gs = read_grad_scale(gscale);
  return float(gs * gs * double(sum) / double(n) + 1e-30);
}

// EMA of one R or C entry from the mean of g^2; C entries also refresh their factor cf.
__device__ __forceinline__ void lo_update_entry(float4* rec, float4* cfac, int64_t idx, float mean, const LoDecays& d) {
  float4 r = rec[idx];
  r.x = d.f[0] * r.x + (1.0f - d.f[0]) * mean;
  r.y = d.f[1] * r.y + (1.0f - d.f[1]) * mean;
  r.z = d.f[2] * r.z + (1.0f - d.f[2]) * mean;
  rec[idx] = r;
  if (cfac)
    cfac[idx] = make_float4(rsqrtf(fmaxf(r.x, 1e-9f)), rsqrtf(fmaxf(r.y, 1e-9f)), rsqrtf(fmaxf(r.z, 1e-9f)), 0.0f);
}

struct LoF1 {
  const LoItem* items;  // one block each
  const LoTensor* ts;
  const float* g;
  const float* rowpart;  // pass A's partial sums
  const float* colpart;
  float4* rrec;  // R and C, updated
  float4* crec;
  float4* cfac;  // C's factors, refreshed
  const float* gscale;
  float clip;
  LoDecays d;
  const float* gscale2;  // kNanToNum: the second factor
  int unscaled;          // pass A's sums are of g, not of s g (kRaw): the means take s^2
};
template <bool kNanToNum>
__global__ void __launch_bounds__(kThreads) lo_f1(const LoF1 a) {
  const LoItem* __restrict__ items = a.items;
  const LoTensor* __restrict__ ts = a.ts;
  const float* __restrict__ g = a.g;
  const float* __restrict__ rowpart = a.rowpart;
  const float* __restrict__ colpart = a.colpart;
  float4* __restrict__ rrec = a.rrec;
  float4* __restrict__ crec = a.crec;
  float4* __restrict__ cfac = a.cfac;
  const float* __restrict__ gscale = a.gscale;
  const float clip = a.clip;
  const LoDecays& d = a.d;
  const LoItem it = items[blockIdx.x];
  const LoTensor t = ts[it.slot];
  if (it.kind == LoItem::kRows) {  // mean over axis 1 (the columns) of each row
    const int64_t r = it.first + threadIdx.x;
    if (r >= t.na) return;
    float s = 0.0f;
    for (int k = 0; k < t.col_tiles; k++) s += rowpart[t.rowpart_off + int64_t(k) * t.na + r];
    const float mean = a.unscaled ? lo_scaled_mean(s, gscale, t.nb) : float(double(s) / double(t.nb) + 1e-30);
    if (t.d0_is_a)
      lo_update_entry(crec + t.c_off, cfac + t.c_off, r, mean, d);  // tall: axis 1 is d1
    else
      lo_update_entry(rrec + t.r_off, nullptr, r, mean, d);
  } else if (it.kind == LoItem::kCols) {  // mean over axis 0 of 32 columns, row tiles split over warps
    __shared__ float part[kWarps][32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int64_t c = it.first + lane;
    float s = 0.0f;
    if (c < t.nb)
      for (int k = warp; k < t.row_tiles; k += kWarps) s += colpart[t.colpart_off + int64_t(k) * t.nb + c];
    part[warp][lane] = s;
    __syncthreads();
    if (warp != 0 || c >= t.nb) return;
    float tot = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; w++) tot += part[w][lane];
    const float mean = a.unscaled ? lo_scaled_mean(tot, gscale, t.na) : float(double(tot) / double(t.na) + 1e-30);
    if (t.d0_is_a)
      lo_update_entry(rrec + t.r_off, nullptr, c, mean, d);
    else
      lo_update_entry(crec + t.c_off, cfac + t.c_off, c, mean, d);
  } else {  // N-D: one thread per R (kNdR) or C (kNdC) entry, reducing straight from g
    const bool is_r = it.kind == LoItem::kNdR;
    const int64_t e = it.first + threadIdx.x;
    if (e >= (is_r ? t.r_len : t.c_len)) return;
    // Entries drop either axis A (layout o, m, b, in) or axis B (layout o, a, m, in).
    const bool drop_a = is_r == bool(t.d0_is_a);
    const float gs = read_grad_scale(gscale), gs2 = kNanToNum ? *a.gscale2 : 1.0f;
    const float* G = g + t.p_off;
    int64_t in = e % t.inner, x = e / t.inner, base, stride, n;
    if (drop_a) {
      int64_t b = x % t.nb, m = (x / t.nb) % t.mid, o = x / t.nb / t.mid;
      base = ((o * t.na * t.mid + m) * t.nb + b) * t.inner + in;
      stride = t.mid * t.nb * t.inner;
      n = t.na;
    } else {
      int64_t m = x % t.mid, a = (x / t.mid) % t.na, o = x / t.mid / t.na;
      base = ((o * t.na + a) * t.mid + m) * t.nb * t.inner + in;
      stride = t.inner;
      n = t.nb;
    }
    float s = 0.0f;
    for (int64_t j = 0; j < n; j++) {
      float v = lo_grad<kNanToNum>(G[base + j * stride], gs, gs2, clip);
      s += v * v;
    }
    const float mean = float(double(s) / double(n) + 1e-30);
    if (is_r)
      lo_update_entry(rrec + t.r_off, nullptr, e, mean, d);
    else
      lo_update_entry(crec + t.c_off, cfac + t.c_off, e, mean, d);
  }
}

// F1b: per μR group (the R entries that share every axis but d1): mean of R_k, then rf_k per entry.
__global__ void __launch_bounds__(kThreads) lo_f1b(const int2* __restrict__ groups, const LoTensor* __restrict__ ts,
                                                   const float4* __restrict__ rrec, float4* __restrict__ rfac) {
  const int2 gr = groups[blockIdx.x];
  const LoTensor t = ts[gr.x];
  const int64_t gi = gr.y, in = gi % t.inner, m = (gi / t.inner) % t.mid, o = gi / t.inner / t.mid;
  // d1 is the axis R keeps of the two: B when d0 is A, else A.
  const int64_t n = t.d0_is_a ? t.nb : t.na;
  auto ridx = [&](int64_t j) {
    return t.d0_is_a ? ((o * t.mid + m) * t.nb + j) * t.inner + in : ((o * t.na + j) * t.mid + m) * t.inner + in;
  };
  const float4* R = rrec + t.r_off;
  double s0 = 0, s1 = 0, s2 = 0;
  for (int64_t j = threadIdx.x; j < n; j += kThreads) {
    float4 r = R[ridx(j)];
    s0 += r.x;
    s1 += r.y;
    s2 += r.z;
  }
  __shared__ double red[3][kThreads];
  red[0][threadIdx.x] = s0;
  red[1][threadIdx.x] = s1;
  red[2][threadIdx.x] = s2;
  __syncthreads();
  for (int k = kThreads / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k)
      for (int q = 0; q < 3; q++) red[q][threadIdx.x] += red[q][threadIdx.x + k];
    __syncthreads();
  }
  const float mu0 = float(red[0][0] / double(n)), mu1 = float(red[1][0] / double(n)),
              mu2 = float(red[2][0] / double(n));
  for (int64_t j = threadIdx.x; j < n; j += kThreads) {
    const int64_t ri = ridx(j);
    float4 r = R[ri];
    rfac[t.r_off + ri] =
        make_float4(rsqrtf(fmaxf(r.x / (mu0 + 1e-9f), 1e-9f)), rsqrtf(fmaxf(r.y / (mu1 + 1e-9f), 1e-9f)),
                    rsqrtf(fmaxf(r.z / (mu2 + 1e-9f), 1e-9f)), 0.0f);
  }
}

// One block of 1024 threads a slot: a factored tensor's side sums into sums[12 slot, 12 slot + 12).
__global__ void __launch_bounds__(1024)
    lo_side_sums_kernel(const LoTensor* __restrict__ ts, const float4* __restrict__ rrec,
                        const float4* __restrict__ crec, double* __restrict__ sums) {
  const LoTensor t = ts[blockIdx.x];
  if (!t.factored) return;
  __shared__ double side[12];
  lo_side_sums(t, rrec, crec, side);
  if (threadIdx.x < 12) sums[blockIdx.x * 12 + threadIdx.x] = side[threadIdx.x];
}
}  // namespace

// One tensor's LoTensor before any offset into the shared buffers: its view [outer, nA, mid, nB, inner]
// around the factored axes A < B (factored_dims), the lengths of its R and C entries, and its flags.
static LoTensor describe_tensor(const TensorInfo& ti, int64_t s_off, TieRule tie, bool mup) {
  LoTensor t{};
  t.p_off = ti.offset;
  t.numel = ti.numel;
  t.s_off = s_off;
  t.decay = ti.decay;
  t.table = ti.index;
  t.scale = (mup && ti.role == Role::Hidden && ti.ndim() >= 2) ? 1.0f / float(ti.shape[1]) : 1.0f;
  for (int64_t d : ti.shape) t.rank_class += d > 1;
  t.is2d = ti.ndim() == 2;
  t.outer = t.na = t.mid = t.nb = t.inner = 1;
  FactoredDims fd = factored_dims(ti.shape, tie);
  t.factored = fd.factored;
  if (!fd.factored) return t;
  const int A = std::min(fd.d0, fd.d1), B = std::max(fd.d0, fd.d1);
  for (int k = 0; k < ti.ndim(); k++) {
    int64_t s = ti.shape[size_t(k)];
    if (k < A)
      t.outer *= s;
    else if (k == A)
      t.na = s;
    else if (k < B)
      t.mid *= s;
    else if (k == B)
      t.nb = s;
    else
      t.inner *= s;
  }
  t.d0_is_a = fd.d0 == A;
  t.tile2d = t.is2d;
  t.r_len = ti.numel / ti.shape[size_t(fd.d0)];
  t.c_len = ti.numel / ti.shape[size_t(fd.d1)];
  t.g_len = t.outer * t.mid * t.inner;
  if (t.is2d) {
    const TileGrid gr = plan_tile_grid(t.na, t.nb, kPassACols, kTileElems);
    t.row_tiles = gr.row_tiles;
    t.col_tiles = gr.col_tiles;
  }
  return t;
}

static std::vector<Part> whole_parts(const ParamTable& tab, const std::vector<int>& owned) {
  std::vector<Part> v;
  for (int i : owned) v.push_back({i, 0, tab[i].numel});
  return v;
}

LoCore::LoCore(const Arena& a, const std::vector<int>& owned, TieRule tie, bool mup, int chunk_elems, bool bf16)
    : LoCore(a, whole_parts(a.table(), owned), {}, nullptr, tie, mup, chunk_elems, bf16) {}

// What the constructor builds on the host before uploading it.
struct LoCore::HostPlan {
  std::vector<Tile> tiles;
  std::vector<LoItem> items;
  std::vector<int2> groups;
  std::vector<Chunk> chunks, flat;
  std::vector<std::pair<int64_t, int64_t>> rows;  // per slot: the rows of its part (2-D tensors)
  std::vector<int64_t> tile_base;                 // per table tensor: its first tile in the table's numbering
  std::vector<int32_t> tile_index;                // per tile here: its number in the table's
  int64_t nr = 0, nc = 0, nv = 0, nrp = 0, ncp = 0, state = 0;
};

LoCore::LoCore(const Arena& a, const std::vector<Part>& parts, const std::vector<int>& cut, CrossRank* cross,
               TieRule tie, bool mup, int chunk_elems, bool bf16)
    : arena(a), bf16_records(bf16), cross_(cross) {
  const ParamTable& tab = a.table();
  CHECK(cut.size() <= 1 && (cut.empty() || cross));  // the plan cuts one tensor at most
  const int cut_tensor = cut.empty() ? -1 : cut[0];
  const bool held = std::any_of(parts.begin(), parts.end(), [&](const Part& p) { return p.tensor == cut_tensor; });
  HostPlan h;
  // Pass A's partials: the cut tensor's column partials first and its row partials last, so that they are
  // one run of part_ (the run it shares).
  int64_t cut_rows = 0;
  if (cut_tensor >= 0) {
    const LoTensor c = describe_tensor(tab[cut_tensor], 0, tie, mup);
    CHECK(c.tile2d);
    shared_.on = true;
    shared_.items = int((c.na + kTileRows - 1) / kTileRows * ((c.nb + kTileCols - 1) / kTileCols));
    cut_rows = int64_t(c.col_tiles) * c.na;
    shared_.len = cut_rows + int64_t(c.row_tiles) * c.nb;
    if (held) h.ncp = shared_.len - cut_rows;
  }
  number_table_tiles(parts, tie, mup, &h);
  for (const Part& part : parts) place_part(part, part.tensor == cut_tensor, tie, mup, chunk_elems, &h);
  if (held) {  // the cut tensor's row partials end the row part: [its rows | its columns] is one run
    host_tensors[size_t(shared_.slot)].rowpart_off = h.nrp;
    shared_.off = h.nrp;
    h.nrp += cut_rows;
  }
  std::vector<LoWork> host_work;
  std::vector<LoSideItem> side;
  plan_element_work(&host_work, &side);
  for (LoWork& w : host_work)  // items outside a part's rows: nothing to step (pass B sums zeros)
    if (w.tile && (w.row0 < h.rows[size_t(w.tensor)].first || w.row0 >= h.rows[size_t(w.tensor)].second)) w.n = 0;
  if (held) {
    const LoTensor& t = host_tensors[size_t(shared_.slot)];
    shared_.work = t.work_begin;
    CHECK(t.work_end - t.work_begin == shared_.items);
  } else if (shared_.on) {
    zeros_f_.alloc(size_t(shared_.len), "cut tensor's stand-in partials");
  }
  upload(h, host_work, side);
}

// One part's LoTensor (slot: the next), its pass-A tiles (those of its rows), F1 items and F1b groups (the
// whole tensor's), its chunks, and its offsets into R, C, the vectors' V, pass A's partials and the state
// (which covers the part: s_off + element index).
void LoCore::place_part(const Part& part, bool is_cut, TieRule tie, bool mup, int chunk_elems, HostPlan* h) {
  const TensorInfo& ti = arena.table()[part.tensor];
  const int slot = int(host_tensors.size());
  if (part.begin != 0 || part.end != ti.numel)
    CHECK(is_cut && part.begin % lo_cut_unit(ti) == 0 && (part.end == ti.numel || part.end % lo_cut_unit(ti) == 0));
  LoTensor t = describe_tensor(ti, h->state - part.begin, tie, mup);
  h->state += (part.end - part.begin + ParamTable::kAlignElems - 1) / ParamTable::kAlignElems * ParamTable::kAlignElems;
  for (int64_t e = part.begin; e < part.end; e += chunk_elems)
    h->chunks.push_back({ti.offset + e, t.s_off + e, int32_t(std::min<int64_t>(chunk_elems, part.end - e)), slot});
  // Vectors and N-D tensors also in short chunks: few elements, but per element the exact MLP is long, and
  // in fast mode they are all that the exact kernel runs.
  for (int64_t e = 0; !t.tile2d && e < ti.numel; e += kFlatChunk)
    h->flat.push_back({ti.offset + e, t.s_off + e, int32_t(std::min<int64_t>(kFlatChunk, ti.numel - e)), slot});
  h->rows.push_back({t.is2d ? part.begin / t.nb : 0, t.is2d ? part.end / t.nb : 0});
  if (t.factored) {
    t.r_off = h->nr;
    h->nr += t.r_len;
    t.c_off = h->nc;
    h->nc += t.c_len;
    if (t.is2d) {
      const TileGrid gr = plan_tile_grid(t.na, t.nb, kPassACols, kTileElems);
      if (is_cut) {
        shared_.slot = slot;
        t.colpart_off = 0;
      } else {
        t.colpart_off = h->ncp;
        h->ncp += int64_t(gr.row_tiles) * t.nb;
        t.rowpart_off = h->nrp;
        h->nrp += int64_t(gr.col_tiles) * t.na;
      }
      std::vector<Tile> all;
      append_tiles(&all, slot, 1, t.na, t.nb, gr);
      for (size_t k = 0; k < all.size(); k++)  // the part's own tiles (a cut falls where tiles end)
        if (all[k].r0 >= h->rows.back().first && all[k].r0 < h->rows.back().second) {
          h->tiles.push_back(all[k]);
          h->tile_index.push_back(int32_t(h->tile_base[size_t(part.tensor)] + int64_t(k)));
        }
      for (int64_t r = 0; r < t.na; r += kThreads) h->items.push_back({slot, LoItem::kRows, r});
      for (int64_t c = 0; c < t.nb; c += 32) h->items.push_back({slot, LoItem::kCols, c});
    } else {
      for (int64_t e = 0; e < t.r_len; e += kThreads) h->items.push_back({slot, LoItem::kNdR, e});
      for (int64_t e = 0; e < t.c_len; e += kThreads) h->items.push_back({slot, LoItem::kNdC, e});
    }
    for (int64_t gi = 0; gi < t.g_len; gi++) h->groups.push_back({slot, int(gi)});
  } else {
    t.v_off = h->nv;
    h->nv += ti.numel;
  }
  host_tensors.push_back(t);
}

// Pass A's tiles numbered over the whole table: every factored 2-D tensor in table order, its tiles in
// append_tiles' order. The same on every rank of a sharded step, and on one GPU the order of the tiles:
// where pass A leaves each tile's total for the clipper (GradClipper::take), whose partials add up across
// ranks entry by entry. Without other ranks only the tensors here count: the clipper keeps the rest (CELO2's
// AdamW side), and for a core over the whole table the two are the same.
void LoCore::number_table_tiles(const std::vector<Part>& parts, TieRule tie, bool mup, HostPlan* h) {
  const ParamTable& tab = arena.table();
  h->tile_base.assign(size_t(tab.size()), -1);
  std::vector<char> here(size_t(tab.size()), cross_ ? 1 : 0);
  for (const Part& p : parts) here[size_t(p.tensor)] = 1;
  int64_t n = 0;
  for (const TensorInfo& ti : tab.tensors()) {
    if (!here[size_t(ti.index)]) continue;
    const LoTensor t = describe_tensor(ti, 0, tie, mup);
    if (!t.factored || !t.is2d) continue;
    h->tile_base[size_t(ti.index)] = n;
    n += int64_t(t.row_tiles) * t.col_tiles;
    table_pass_a_.push_back(ti.index);
  }
  CHECK(n < (int64_t(1) << 31));
  table_tiles_ = int(n);
}

void LoCore::upload(const HostPlan& h, const std::vector<LoWork>& host_work, const std::vector<LoSideItem>& side) {
  n_tensors = int(host_tensors.size());
  state_elems = h.state;
  tensors.alloc(host_tensors.size(), "learned-optimizer tensor table");
  tensors.upload(host_tensors);
  chunks.alloc(h.chunks.size(), "learned-optimizer chunk map");
  chunks.upload(h.chunks);
  flat_chunks.alloc(h.flat.size(), "learned-optimizer flat chunk map");
  flat_chunks.upload(h.flat);
  work.alloc(host_work.size(), "learned-optimizer work map");
  work.upload(host_work);
  side_items.alloc(side.size(), "learned-optimizer side items");
  side_items.upload(side);
  state.alloc(size_t(bf16_records ? (state_elems + 1) / 2 : state_elems), "learned-optimizer moments");
  state.zero();
  diag.alloc(size_t(std::max<int64_t>(h.nv, 1)), "learned-optimizer vector factors");
  diag.zero();
  rrec.alloc(size_t(std::max<int64_t>(h.nr, 1)), "factored R");
  rrec.zero();
  crec.alloc(size_t(std::max<int64_t>(h.nc, 1)), "factored C");
  crec.zero();
  rfac.alloc(rrec.size(), "R factors");
  cfac.alloc(crec.size(), "C factors");
  tiles_.alloc(h.tiles.size(), "pass-A tiles");
  tiles_.upload(h.tiles);
  tile_max_.alloc(h.tiles.size(), "pass-A tile maxima");  // run_taken_clip's
  tile_index_.alloc(h.tile_index.size(), "pass-A tile numbers");
  tile_index_.upload(h.tile_index);
  items_.alloc(h.items.size(), "F1 items");
  items_.upload(h.items);
  groups_.alloc(h.groups.size(), "F1b groups");
  groups_.upload(h.groups);
  nrp_ = h.nrp;
  part_.alloc(size_t(h.nrp + h.ncp), "pass-A partials");
  part_.zero();
}

LoCore::~LoCore() {  // no checks: nothing may throw from here
  if (side_) cudaStreamDestroy(side_);
  for (cudaEvent_t e : {forked_, summed_})
    if (e) cudaEventDestroy(e);
}

void LoCore::reserve_side_sums() {
  if (side_) return;
  side_sums_.alloc(size_t(std::max(n_tensors, 1)) * 12, "side sums");
  side_sums_.zero();
  CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&forked_, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreateWithFlags(&summed_, cudaEventDisableTiming));
}

void LoCore::launch_side_sums(cudaStream_t s) {
  if (!side_ || n_tensors == 0) return;
  CUDA_CHECK(cudaEventRecord(forked_, s));
  CUDA_CHECK(cudaStreamWaitEvent(side_, forked_, 0));
  lo_side_sums_kernel<<<unsigned(n_tensors), 1024, 0, side_>>>(tensors.get(), rrec.get(), crec.get(), side_sums_.get());
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaEventRecord(summed_, side_));
}

const double* LoCore::join_side_sums(cudaStream_t s) {
  CHECK(side_);  // reserve_side_sums first
  if (n_tensors > 0) CUDA_CHECK(cudaStreamWaitEvent(s, summed_, 0));
  return side_sums_.get();
}

void LoCore::reserve_item_sums(int per_item) {
  shared_.per_item = per_item;
  if (shared_.on && shared_.slot < 0)
    zeros_d_.alloc(size_t(shared_.items) * size_t(per_item), "cut tensor's stand-in sums");
}

// The cut tensor's pass-A partials summed over the ranks: each tile's partial is its holder's, zeros
// elsewhere (zeroed before pass A, which writes this rank's tiles only).
void LoCore::share_tile_partials(cudaStream_t s) {
  float* d = shared_.slot >= 0 ? part_.get() + shared_.off : zeros_f_.get();
  cross_->sum(d, size_t(shared_.len), s);
}

void LoCore::share_item_sums(double* partial, cudaStream_t s) {
  if (!shared_.on) return;
  CHECK(shared_.per_item > 0);  // reserve_item_sums first
  const size_t n = size_t(shared_.items) * size_t(shared_.per_item);
  if (shared_.slot >= 0) {
    cross_->sum(partial + size_t(shared_.work) * size_t(shared_.per_item), n, s);
  } else {
    CUDA_CHECK(cudaMemsetAsync(zeros_d_.get(), 0, n * sizeof(double), s));
    cross_->sum(zeros_d_.get(), n, s);
  }
}

// Work of passes B and C, in table order; tiles row-major so neighbouring blocks read neighbouring bytes.
// tile2d tensors also get their rows' and columns' entries in the side tables, and the side kernels' items.
void LoCore::plan_element_work(std::vector<LoWork>* work_out, std::vector<LoSideItem>* side) {
  std::vector<LoWork>& host_work = *work_out;
  for (int i = 0; i < int(host_tensors.size()); i++) {
    LoTensor& t = host_tensors[size_t(i)];
    t.work_begin = int32_t(host_work.size());
    if (t.tile2d) {
      for (int64_t r = 0; r < t.na; r += kTileRows)
        for (int64_t c = 0; c < t.nb; c += kTileCols)
          host_work.push_back({i, 1, int32_t(c), int32_t(std::min<int64_t>(kTileRows, t.na - r)), r});
      t.side_a_off = side_a_len;
      side_a_len += t.na;
      t.side_b_off = side_b_len;
      side_b_len += t.nb;
      for (int64_t e = 0; e < t.na; e += 256) side->push_back({i, 0, e});
      for (int64_t e = 0; e < t.nb; e += 256) side->push_back({i, 1, e});
    } else {
      for (int64_t e = 0; e < t.numel; e += kFlatRun)
        host_work.push_back({i, 0, 0, int32_t(std::min<int64_t>(kFlatRun, t.numel - e)), e});
    }
    t.work_end = int32_t(host_work.size());
  }
}

void LoCore::factor_passes(const float* grad_scale, float clip, const LoDecays& d, cudaStream_t s) {
  if (clipper_)
    factor_passes_after_clip(grad_scale, clip, d, s);
  else
    launch_factor_passes<false>(grad_scale, nullptr, clip, d, s);
}

void LoCore::factor_passes_nan_to_num(const float* grad_scale, const float* clip_factor, const LoDecays& d,
                                      cudaStream_t s) {
  CHECK(grad_scale && clip_factor);
  launch_factor_passes<true>(grad_scale, clip_factor, 0.0f, d, s);
}

template <bool kNanToNum>
void LoCore::launch_factor_passes(const float* grad_scale, const float* scale2, float clip, const LoDecays& d,
                                  cudaStream_t s) {
  if (shared_.on) CUDA_CHECK(cudaMemsetAsync(shared_part(), 0, size_t(shared_.len) * sizeof(float), s));
  if (tiles_.size()) {
    lo_pass_a<kNanToNum><<<unsigned(tiles_.size()), kThreads, 0, s>>>(pass_a_args(grad_scale, clip, scale2));
    CUDA_CHECK_LAUNCH();
  }
  f1_passes<kNanToNum>(grad_scale, scale2, clip, false, d, s);
}

LoPassA LoCore::pass_a_args(const float* grad_scale, float clip, const float* scale2) const {
  float* const rowpart = part_.get();
  float* const tile_sq = clipper_ ? clipper_->extra_partials() : nullptr;  // kRaw writes, kRepair reads
  return LoPassA{tiles_.get(), tensors.get(), arena.grads(), rowpart,         rowpart + nrp_,   grad_scale,
                 clip,         scale2,        tile_sq,       tile_max_.get(), tile_index_.get()};
}

float* LoCore::shared_part() { return shared_.slot >= 0 ? part_.get() + shared_.off : zeros_f_.get(); }

// The cut tensor's partials over the ranks, F1 (its means times s^2 where pass A summed unscaled g), the
// side sums, F1b.
template <bool kNanToNum>
void LoCore::f1_passes(const float* grad_scale, const float* scale2, float clip, bool unscaled, const LoDecays& d,
                       cudaStream_t s) {
  if (shared_.on) share_tile_partials(s);
  if (items_.size()) {
    const LoF1 a{items_.get(),
                 tensors.get(),
                 arena.grads(),
                 part_.get(),
                 part_.get() + nrp_,
                 rrec.get(),
                 crec.get(),
                 cfac.get(),
                 grad_scale,
                 clip,
                 d,
                 scale2,
                 int(unscaled)};
    lo_f1<kNanToNum><<<unsigned(items_.size()), kThreads, 0, s>>>(a);
    CUDA_CHECK_LAUNCH();
  }
  launch_side_sums(s);
  if (groups_.size()) {
    lo_f1b<<<unsigned(groups_.size()), kThreads, 0, s>>>(groups_.get(), tensors.get(), rrec.get(), rfac.get());
    CUDA_CHECK_LAUNCH();
  }
}

bool LoCore::take_clip(GradClipper* clipper) {
  if (clipper_) return false;
  clipper->take(table_pass_a_, table_tiles_);
  clipper_ = clipper;
  return true;
}

void LoCore::run_taken_clip(cudaStream_t s) {
  if (!clipper_) return;
  // After last step's in-place sums over the ranks, the other ranks' entries hold their values: zeros
  // again, in the tile totals and (as launch_factor_passes does) in the cut tensor's partials.
  if (cross_) CUDA_CHECK(cudaMemsetAsync(clipper_->extra_partials(), 0, size_t(table_tiles_) * sizeof(float), s));
  if (shared_.on) CUDA_CHECK(cudaMemsetAsync(shared_part(), 0, size_t(shared_.len) * sizeof(float), s));
  if (tiles_.size()) {
    lo_pass_a<false, kRaw><<<unsigned(tiles_.size()), kThreads, 0, s>>>(pass_a_args(nullptr, 0.0f, nullptr));
    CUDA_CHECK_LAUNCH();
  }
  pass_a_ran_ = true;
  clipper_->run(s);
}

void LoCore::factor_passes_after_clip(const float* grad_scale, float clip, const LoDecays& d, cudaStream_t s) {
  CHECK(pass_a_ran_);  // run_taken_clip first
  pass_a_ran_ = false;
  if (tiles_.size()) {  // the tiles whose total is not finite, or (with a clip) where the clamp binds
    const LoPassA a = pass_a_args(grad_scale, clip, nullptr);
    lo_pass_a<false, kRepair><<<unsigned(tiles_.size()), kThreads, 0, s>>>(a);
    CUDA_CHECK_LAUNCH();
  }
  f1_passes<false>(grad_scale, nullptr, clip, true, d, s);
}

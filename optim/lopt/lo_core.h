// The machinery the two learned optimizers share, over the whole arena:
//  - per-element state {m0, m1, m2, v} as one 16-byte record; vectors also get {V0, V1, V2, -}
//  - factored second moments R (mean of g^2 over d0) and C (mean over d1) at three decays, with
//    their Adafactor factors rf = rsqrt(max(R/(mean_d1 R + 1e-9), 1e-9)) and cf = rsqrt(max(C, 1e-9))
//  - the launches that produce them: pass A (row/column sums of g^2 over 2-D tiles), F1 (EMA of R
//    and C, N-D tensors reduced directly), F1b (mean of R per group and rf)
//  - the work map of the element passes B and C (LoWork): 2-D factored tensors go in tiles of
//    kTileRows x kTileCols, one column per thread, so each thread's column-indexed ("B side") R/C
//    entries stay in registers and the row-indexed ("A side") ones are one broadcast load per row;
//    every other tensor goes in flat runs of elements
// Any tensor is viewed as [outer, nA, mid, nB, inner] around its two factored axes A < B, so an
// element's R and C entries are plain index arithmetic (for 2-D tensors: the row or the column).
//
// Features built only from R or C entries (the row/column accumulators and their rsqrt) are constant
// along an axis of a 2-D tensor: their sums of squares come from the R and C vectors (each entry
// stands for the elements it is broadcast to), and their share of the MLP's first layer is computed
// once per entry and step ("side" tables) instead of once per element.
//
// In a sharded data-parallel step (core/shard_plan.h) the plan may cut one 2-D tensor between two ranks at
// rows where every tile of passes A, B and C ends (lo_cut_unit). Each of its ranks then runs pass A on the
// tiles of its rows and passes B and C on their items (the others' items have no rows), and the tensor's
// tile partials (after pass A) and item sums (after pass B) are summed over every rank: a tile's partial
// is its rank's value plus zeros, so each holder then reduces the one-GPU partials in the one-GPU order
// and keeps the whole tensor's R, C and per-tensor sums, bit for bit. Ranks that hold no part of it join
// those sums with zeros.
//
// Kernel arguments: passes A, F1, B and the side tables each take one struct, built once on the host.
// nvcc ignores __restrict__ on struct members, so such a kernel first copies the pointers into
// __restrict__ locals (what its parameters were), and compiles to the instructions it had with
// __restrict__ parameters, read-only loads (ld.global.nc) included. Not so in a kernel with inline asm:
// there a __restrict__ local gets no read-only loads (a plain __restrict__ parameter does), so the
// pass-C kernels (cp.async and ld.shared asm) keep their parameter lists.
#pragma once
#include <cuda_runtime.h>

#include <cfloat>
#include <vector>

#include "common/device_buffer.h"
#include "core/arena.h"
#include "core/chunks.h"
#include "optim/cross_rank.h"
#include "optim/lopt/lopt_common.h"

struct LoTensor {
  int64_t p_off, numel, s_off;  // arena offset; offset into the per-element state records
  int64_t outer, na, mid, nb, inner;
  int32_t factored, d0_is_a;           // d0 (R's reduced axis) is axis A (else B)
  int64_t r_off, r_len, c_off, c_len;  // entries in the R and C record buffers
  int64_t g_len;                       // μR groups (outer*mid*inner)
  int64_t v_off;                       // per-element {V0, V1, V2} of vectors, in `diag`
  int32_t row_tiles, col_tiles;        // 2-D pass-A tiles (factored 2-D tensors)
  int64_t rowpart_off, colpart_off;
  float scale;  // per-tensor step multiplier (MuLO 1/fan_in, else 1)
  int32_t decay, rank_class, is2d;
  int32_t tile2d;                  // factored and 2-D: passes B and C run in tiles
  int32_t table;                   // index in the ParamTable (the bf16 records' draws, lo_record16.h)
  int32_t work_begin, work_end;    // LoWork items of passes B and C
  int64_t side_a_off, side_b_off;  // tile2d: entries in the row- (A) and column- (B) indexed side tables
};

// 2-D factored tensors: R drops d0, so when d0 is the row axis R is indexed by the column (B side).
__host__ __device__ inline bool lo_b_is_r(const LoTensor& t) { return t.d0_is_a != 0; }

// One block's share of passes B and C (blockDim = kLoThreads).
constexpr int kLoThreads = 256, kTileCols = kLoThreads, kTileRows = kLoTileRows, kFlatRun = kTileCols * kTileRows;
struct LoWork {
  int32_t tensor, tile;  // tile: rows [row0, row0 + n) x columns [col0, col0 + kTileCols) of a tile2d tensor
  int32_t col0, n;       // flat: elements [row0, row0 + n) of any other tensor
  int64_t row0;
};

// Item of the per-step side-table kernels: entries [first, first + 256) of one side of a tile2d tensor.
struct LoSideItem {
  int32_t tensor, side;  // 0: A (rows), 1: B (columns)
  int64_t first;
};

// Written on the device by each step's first kernel; read by the passes (no host round trip).
struct LoStepScalars {
  float grad_scale;  // the clip coefficient (1 without clipping)
  float lr;          // the lr multiplier times the schedule's factor for this step
};

// The arguments of pass B (each optimizer's moments and feature sums of squares), the same for every
// learned optimizer on LoCore but for the type of its per-step scalars (SfScalars, VeloScalars). The
// buffers never move, so they are built once (LoCore::pass_b).
template <class Scalars>
struct LoPassB {
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
  double* partial;  // per work item: the optimizer's sums
  const Scalars* sc;
  LoDecays d;
};

// Work item of F1: kRows/kCols reduce 2-D tile partials; kNdR/kNdC reduce N-D tensors from g.
struct LoItem {
  enum : int32_t { kRows = 0, kCols = 1, kNdR = 2, kNdC = 3 };
  int32_t slot, kind;
  int64_t first;  // first entry (row, column, or R/C entry) handled by the block
};

struct LoPassA;  // lo_core.cu: pass A's kernel arguments
class GradClipper;

class LoCore {
 public:
  // Over the tensors `owned` (table indices, ascending), whole; slot k of every device table is owned[k].
  LoCore(const Arena& arena, const std::vector<int>& owned, TieRule tie, bool mup, int chunk_elems,
         bool bf16_records = false);
  // Over `parts` (owned_parts: sorted, ends filled in) as one rank's share of a sharded step: `cut` is the
  // plan's cut tensor (Owned::cut: at most one, held here or not), whose statistics are summed over the
  // ranks through `cross` (lo_core.h's top).
  // bf16_records: the records {m0, m1, m2, v} in bf16 (8 bytes an element, lo_record16.h): `state` then holds
  // uint2s, two to a float4.
  LoCore(const Arena& arena, const std::vector<Part>& parts, const std::vector<int>& cut, CrossRank* cross, TieRule tie,
         bool mup, int chunk_elems, bool bf16_records = false);

  ~LoCore();
  LoCore(const LoCore&) = delete;
  LoCore& operator=(const LoCore&) = delete;

  // Launches pass A, F1 and F1b. grad_scale: device pointer or null; clip > 0 clamps g to [-clip, clip].
  // With the trainer's clip taken (take_clip) pass A has run in run_taken_clip: the after-clip form below.
  void factor_passes(const float* grad_scale, float clip, const LoDecays& d, cudaStream_t s);
  // The same with ELO's gradient: nan_to_num((g * *grad_scale) * *clip_factor), NaN to 0 and +-inf to
  // +-FLT_MAX, no clamp (celo2.md 8, E2). Both pointers on the device, non-null.
  void factor_passes_nan_to_num(const float* grad_scale, const float* clip_factor, const LoDecays& d, cudaStream_t s);
  // A cut tensor's pass-B sums, `per_item` doubles per work item in `partial` (item k at k * per_item):
  // reserve_item_sums in the optimizer's constructor, share_item_sums after pass B. No-ops without a cut.
  void reserve_item_sums(int per_item);
  void share_item_sums(double* partial, cudaStream_t s);
  // The factored tensors' side sums (lo_side_sums: 12 doubles a slot) read only R and C, final after F1.
  // After reserve_side_sums (the optimizer's constructor) the factor passes launch them on a stream of
  // their own, beside F1b and pass B rather than before the tensor norms (one block a tensor: for the
  // 50k-row embedding 20 us); join_side_sums orders s after them and returns them.
  void reserve_side_sums();
  const double* join_side_sums(cudaStream_t s);
  // The trainer's clip taken into pass A (Optimizer::take_clip; not for ELO's nan_to_num form). Once taken,
  // run_taken_clip, first in each step, runs pass A unscaled, before the clip coefficient s is known: each
  // tile's total of g^2, numbered over the whole table, is one of the clipper's partial sums (table_tiles()
  // of them, for the table's factored 2-D tensors; the same on every rank of a sharded step), and then the
  // clipper. factor_passes then sums again, scaled and clamped, only the tiles where the clamp binds or whose
  // total is not finite (s = 0 then), and F1 takes s^2 times the sums.
  bool take_clip(GradClipper* clipper);  // false when already taken
  void run_taken_clip(cudaStream_t s);   // no-op unless taken
  // Pass B's arguments over this core's buffers, the arena's gradients and parameters, the optimizer's
  // partial sums, scalars and decays.
  template <class Scalars>
  LoPassB<Scalars> pass_b(double* partial, const Scalars* sc, const LoDecays& d) const {
    return {work.get(), tensors.get(), arena.grads(), arena.params(), state.get(), diag.get(), rrec.get(),
            crec.get(), rfac.get(),    cfac.get(),    partial,        sc,          d};
  }

  const Arena& arena;
  const bool bf16_records;
  int n_tensors = 0;
  std::vector<LoTensor> host_tensors;
  DeviceBuffer<LoTensor> tensors;
  DeviceBuffer<Chunk> chunks;       // flat chunks of every tensor (exact small_fc_lopt pass C)
  DeviceBuffer<Chunk> flat_chunks;  // flat chunks of the tensors that are not tile2d
  DeviceBuffer<LoWork> work;        // passes B and C
  DeviceBuffer<LoSideItem> side_items;
  int64_t side_a_len = 0, side_b_len = 0;
  DeviceBuffer<float4> state;       // {m0, m1, m2, v} per element (bf16_records: uint2 per element)
  DeviceBuffer<float4> diag;        // {V0, V1, V2, 0} per element of vectors
  DeviceBuffer<float4> rrec, crec;  // {R0, R1, R2, 0} / {C0, C1, C2, 0}
  DeviceBuffer<float4> rfac, cfac;  // {rf0, rf1, rf2, 0} / {cf0, cf1, cf2, 0}
  int64_t state_elems = 0;

 private:
  DeviceBuffer<Tile> tiles_;
  DeviceBuffer<LoItem> items_;
  DeviceBuffer<int2> groups_;  // F1b: (slot, group)
  DeviceBuffer<float> part_;   // pass A's partials: per row (nrp_ floats), then per column
  int64_t nrp_ = 0;
  // The plan's cut tensor: its slot here (-1: not held), its pass-A partials part_[off, off + len) and its
  // work items [work, work + items); ranks without it sum zeros in their place.
  struct Shared {
    bool on = false;
    int slot = -1;
    int64_t off = 0, len = 0;
    int work = 0, items = 0, per_item = 0;
  } shared_;
  CrossRank* cross_ = nullptr;
  DeviceBuffer<float> zeros_f_;   // a rank without the cut tensor: its stand-in partials
  DeviceBuffer<double> zeros_d_;  // and item sums
  DeviceBuffer<double> side_sums_;
  cudaStream_t side_ = nullptr;
  cudaEvent_t forked_ = nullptr, summed_ = nullptr;
  GradClipper* clipper_ = nullptr;  // take_clip's
  bool pass_a_ran_ = false;         // run_taken_clip's pass A, which factor_passes then completes
  DeviceBuffer<float> tile_max_;
  DeviceBuffer<int32_t> tile_index_;  // per tile here: its number over the whole table
  std::vector<int> table_pass_a_;     // the table's factored 2-D tensors
  int table_tiles_ = 0;               // their tiles
  void share_tile_partials(cudaStream_t s);
  void factor_passes_after_clip(const float* grad_scale, float clip, const LoDecays& d, cudaStream_t s);
  void launch_side_sums(cudaStream_t s);
  float* shared_part();
  LoPassA pass_a_args(const float* grad_scale, float clip, const float* scale2) const;
  template <bool kNanToNum>
  void f1_passes(const float* grad_scale, const float* scale2, float clip, bool unscaled, const LoDecays& d,
                 cudaStream_t s);
  struct HostPlan;
  void number_table_tiles(const std::vector<Part>& parts, TieRule tie, bool mup, HostPlan* h);
  void place_part(const Part& part, bool is_cut, TieRule tie, bool mup, int chunk_elems, HostPlan* h);
  void upload(const HostPlan& h, const std::vector<LoWork>& work, const std::vector<LoSideItem>& side);
  void plan_element_work(std::vector<LoWork>* work, std::vector<LoSideItem>* side);
  template <bool kNanToNum>
  void launch_factor_passes(const float* grad_scale, const float* scale2, float clip, const LoDecays& d,
                            cudaStream_t s);
};

// torch.nan_to_num: NaN -> 0, +-inf -> +-FLT_MAX (fminf / fmaxf alone would turn NaN into a bound). In this
// form ELO's passes need no more registers than small_fc_lopt's (testing isnan first made them spill).
__device__ __forceinline__ float lo_nan_to_num(float x) {
  const float y = fminf(fmaxf(x, -FLT_MAX), FLT_MAX);
  return x == x ? y : 0.0f;
}

// Element i of tensor t -> its entries in R and C.
__host__ __device__ inline void lo_rc_index(const LoTensor& t, int64_t i, int64_t& ri, int64_t& ci) {
  int64_t o = 0, a, m = 0, b, in = 0;
  if (t.outer == 1 && t.mid == 1 && t.inner == 1 && t.numel < (int64_t(1) << 32)) {
    const uint32_t q = uint32_t(i) / uint32_t(t.nb);  // 32-bit division: a third of the 64-bit cost
    a = q;
    b = int64_t(uint32_t(i) - q * uint32_t(t.nb));
  } else {
    in = i % t.inner;
    int64_t x = i / t.inner;
    b = x % t.nb;
    x /= t.nb;
    m = x % t.mid;
    x /= t.mid;
    a = x % t.na;
    o = x / t.na;
  }
  if (t.d0_is_a) {
    ri = ((o * t.mid + m) * t.nb + b) * t.inner + in;
    ci = ((o * t.na + a) * t.mid + m) * t.inner + in;
  } else {
    ri = ((o * t.na + a) * t.mid + m) * t.inner + in;
    ci = ((o * t.mid + m) * t.nb + b) * t.inner + in;
  }
}

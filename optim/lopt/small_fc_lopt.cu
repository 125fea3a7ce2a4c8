// small_fc_lopt / μLO and ELO: per element and step 72 B/param (small_fc_lopt.md 8.2 adds them up):
// pass A reads g (4 B); pass B reads g, p and {m0,m1,m2,v}, writes the record (40 B) and sums the feature
// squares; pass C reads g, p and the record again, runs the MLP and writes p (28 B). The 11 time features
// are folded into the first-layer bias once per step and each tensor's 28 normalisers into its block's
// copy of the first layer.
// 2-D factored tensors (nearly all parameters) run passes B and C in tiles, one column per thread
// (lo_core.h): 16 of the 28 features vary per element; the 12 built from R or C alone get their sums
// of squares from the R and C vectors (F2) and, in fast mode, their share of layer 1 per row / column.
// Pass C comes in two forms:
//   exact: fp32 on CUDA cores, per element over flat chunks (small_fc_exact.cuh);
//   fast:  tensor cores for the tile2d tensors, the exact MLP for the rest (small_fc_fast.cu).
// ELO runs these passes with the template flag kElo: its gradient (SfGrad) and its step (sf_store, the
// end of sf_pass_c_fast) differ; everything else is small_fc_lopt's, instruction for instruction, and
// small_fc_lopt's kernels (kElo false) compile to what they were without the flag.
// This file: the step's first kernel, pass B, the normalisers (F2), the exact pass C and the optimizer.
#include <cmath>

#include "optim/lopt/small_fc_exact.cuh"
#include "optim/step_scalars.cuh"

using namespace small_fc;

namespace {
constexpr int kThreads = 256, kChunk = 4096;  // exact pass C: a block of 256 threads takes 4096 elements
// The published weights as uploaded (torch nn.Linear, (out, in) row-major): W0 (32 x 39) | b0 (32) |
// W1 (32 x 32) | b1 (32) | W2 (2 x 32) | b2 (2).
constexpr int kSrcW0 = 0, kSrcB0 = 32 * 39, kSrcW1 = kSrcB0 + 32, kSrcB1 = kSrcW1 + 1024, kSrcW2 = kSrcB1 + 32;

// Counter, schedule, and this step's folded weights (one block).
__global__ void sf_begin(int64_t* step, double lr, LrSchedule sched, const float* gscale, const float* w, float* mlp,
                         SfScalars* scalars) {
  const int64_t t = *step;
  __shared__ float tau[11];
  if (threadIdx.x < 11) {
    const float T[11] = {1, 3, 10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000};
    tau[threadIdx.x] = tanhf(float(t) / T[threadIdx.x] - 1.0f);
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < 28 * 32; idx += blockDim.x) {
    const int k = idx / 32, o = idx % 32;
    mlp[kW0 + idx] = w[kSrcW0 + o * 39 + k];
  }
  if (threadIdx.x < 32) {
    const int o = threadIdx.x;
    float b = w[kSrcB0 + o];
    for (int j = 0; j < 11; j++) b += w[kSrcW0 + o * 39 + 28 + j] * tau[j];
    mlp[kB0 + o] = b;
    mlp[kB1 + o] = w[kSrcB1 + o];
  }
  for (int idx = threadIdx.x; idx < 1024; idx += blockDim.x) mlp[kW1 + idx] = w[kSrcW1 + (idx % 32) * 32 + idx / 32];
  for (int idx = threadIdx.x; idx < 66; idx += blockDim.x) mlp[kW2 + idx] = w[kSrcW2 + idx];  // W2 and b2
  __syncthreads();
  if (threadIdx.x == 0) {
    scalars->grad_scale = read_grad_scale(gscale);
    scalars->lr = float(lr * sched.factor(t));
    scalars->count = t;
    *step = t + 1;
  }
}

// Pass B: moments, and per block the sums of squares of the features. Channels 13-24 of factored
// tensors are left to F2 (lo_side_sums). kTileP false: tiles read no p, and their channel 1 (the sum of
// p^2) is psq[block], which the last fast pass C summed over the same elements in the same order as it
// wrote them (so the same bits); flat runs still read p (the exact blocks of pass C go another way).
// k16: the records in bf16, rounded with the tensor's key of this step.
template <bool kElo, bool kTileP, bool k16>
__global__ void __launch_bounds__(kLoThreads) sf_pass_b(const LoPassB<SfScalars> a, const double* __restrict__ psq) {
  LO_PASS_B_POINTERS(a);
  LoRec<k16>* __restrict__ rs = reinterpret_cast<LoRec<k16>*>(state);
  const LoDecays& d = a.d;
  const LoWork w = works[blockIdx.x];
  const LoTensor t = ts[w.tensor];
  const uint64_t key = k16 ? lo_r16_tensor_key(uint64_t(sc->count), uint32_t(t.table)) : 0;
  const SfGrad<kElo> gr = sf_grad<kElo>(sc);
  float acc[kF];
#pragma unroll
  for (int k = 0; k < kF; k++) acc[k] = 0.0f;
  if (w.tile) {
    const LoSides sd = lo_sides(t, rfac, cfac);
    const int64_t col = w.col0 + int(threadIdx.x);
    const float4 fb = col < t.nb ? sd.fac_b[col] : make_float4(0, 0, 0, 0);
    lo_tile_column<4, kTileP>(w, t, g, p, rs, [&](int64_t row, int64_t at, float gv, float pv, float4 st) {
      float sg[3];
      lo_tile_sg(sd.fac_a[row], fb, sg);
      const float gg = gr(gv);
      st = lo_step_record(rs, t.s_off + at, st, gg, d, key, at);
      float x[16];
      sf_elem16(gg, pv, st, rsqrtf(st.w + 1e-6f), sg, x);
      lo_add_squares_tile<kLead, 16>(x, acc);
    });
  } else {
    const Chunk c{t.p_off + w.row0, t.s_off + w.row0, w.n, w.tensor};
    const LoFactorView fv{rrec, crec, rfac, cfac, diag};
    auto body = [&](int e, float gv, float pv, float4 st) {
      const int64_t i = w.row0 + e;
      LoElem el;
      lo_flat_step<false>(t, i, gr(gv), pv, st, rs, c.s_begin + e, diag, fv, d, el, key);
      float x[kF];
      sf_features(el, x);
      lo_add_squares_flat<kLead, kF>(x, t.factored, acc);
    };
    lo_for_each_pair<kLoThreads>(c, g, p, rs, body);
  }
  lo_block_sums<kF>(acc, partial + int64_t(blockIdx.x) * kF);
  if (!kTileP && w.tile) {
    __syncthreads();  // after lo_block_sums' store of channel 1
    if (threadIdx.x == 0) partial[int64_t(blockIdx.x) * kF + 1] = psq[blockIdx.x];
  }
}

__global__ void __launch_bounds__(1024) sf_norms(const LoTensor* __restrict__ ts, const double* __restrict__ partial,
                                                 const double* __restrict__ side, float* __restrict__ norm) {
  const LoTensor t = ts[blockIdx.x];
  __shared__ double S[kF], part[32][kF + 1];
  {  // S = sums of the work items' partials in a fixed order: 32 strides x 32 channel lanes (28 used),
     // 8 loads in flight per thread (the embedding has thousands of items: latency, not bandwidth).
     // Not lo_tensor_sums (VeLO's 38 channels: 16 strides x 64 lanes): another tree, other roundings.
    const int c = threadIdx.x % 32, j = threadIdx.x / 32;
    if (c < kF) {
      double s8[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int it = t.work_begin + j;
      for (; it + 7 * 32 < t.work_end; it += 8 * 32)
#pragma unroll
        for (int u = 0; u < 8; u++) s8[u] += partial[int64_t(it + 32 * u) * kF + c];
      for (; it < t.work_end; it += 32) s8[0] += partial[int64_t(it) * kF + c];
      part[j][c] = ((s8[0] + s8[1]) + (s8[2] + s8[3])) + ((s8[4] + s8[5]) + (s8[6] + s8[7]));
    }
    __syncthreads();
    if (threadIdx.x < kF) {
      double tot = 0;
      for (int k = 0; k < 32; k++) tot += part[k][threadIdx.x];
      S[threadIdx.x] = tot;
    }
    __syncthreads();
  }
  if (t.factored) lo_add_side_sums<kLead>(side + blockIdx.x * 12, S);
  if (threadIdx.x < kF) norm[blockIdx.x * kNormLd + threadIdx.x] = lo_normaliser(S[threadIdx.x], double(t.numel));
}

// Parameters rather than a struct, like sf_pass_c_fast with which it shares sf_exact_chunk (lo_core.h).
template <bool kElo, class Rec>
__global__ void __launch_bounds__(kThreads, 2)
    sf_pass_c_exact(const Chunk* __restrict__ chunks, const LoTensor* __restrict__ ts, const float* __restrict__ g,
                    float* __restrict__ p, __nv_bfloat16* __restrict__ pb, const Rec* __restrict__ state,
                    const float4* __restrict__ diag, const float4* __restrict__ rrec, const float4* __restrict__ crec,
                    const float4* __restrict__ rfac, const float4* __restrict__ cfac, const float* __restrict__ norm,
                    const float* __restrict__ mlp, const SfScalars* __restrict__ sc, float exp_mult, float step_mult,
                    float wd) {
  __shared__ SfExactSmem<kThreads> sm;
  sf_exact_chunk<kThreads, kElo>(chunks[blockIdx.x], ts, g, p, pb, state, diag, rrec, crec, rfac, cfac, norm, mlp, sc,
                                 exp_mult, step_mult, wd, sm);
}
}  // namespace

// The two optimizers' settings in one form (the kernels read these).
SmallFcLopt::Rule SmallFcLopt::rule_of(const OptimOptions& o, SmallFcMode mode) {
  Rule r;
  if (mode == SmallFcMode::kElo) {  // ELO has no step_mult and no MuLO scale (celo2.md 8, E3)
    const EloOptions& h = o.elo;
    r.lr = h.lr;
    r.wd = float(h.weight_decay);
    r.exp_mult = float(h.exp_mult);
    r.step_mult = 1.0f;  // unused
    r.fast = h.fast;
    r.tie = parse_tie_rule(h.tie, kEloPyloTie);
    r.mup = false;
    r.bf16_records = false;
    return r;
  }
  const SmallFcOptions& h = o.small_fc;
  r.lr = h.lr;
  r.wd = float(h.weight_decay);
  r.exp_mult = float(h.exp_mult);
  r.step_mult = float(h.step_mult);
  r.fast = h.fast;
  r.tie = parse_tie_rule(h.tie, kSmallFcPyloTie);
  r.mup = h.mup;
  r.bf16_records = h.bf16_record;
  return r;
}

SmallFcLopt::SmallFcLopt(Arena& arena, const OptimOptions& opts, const SmallFcWeights& w, SmallFcMode mode,
                         const Owned& owned, CrossRank* cross)
    : Optimizer(arena, opts, owned, cross),
      mode_(mode),
      rule_(rule_of(opts, mode)),
      core_(arena, parts_, cut_, cross, rule_.tie, rule_.mup, kChunk, rule_.bf16_records),
      // small_fc_lopt: the meta-learned decays; ELO: the nominal ones as they are (celo2.md 8, E1)
      dec_(mode == SmallFcMode::kElo ? nominal_decays() : small_fc_decays()) {
  const char* what = mode == SmallFcMode::kElo ? "elo" : "small_fc_lopt";
  std::vector<float> all;
  for (const auto* v : {&w.w0, &w.b0, &w.w1, &w.b1, &w.w2, &w.b2}) all.insert(all.end(), v->begin(), v->end());
  CHECK(all.size() == 2402);
  weights_.alloc(all.size(), str_cat(what, " weights").c_str());
  weights_.upload(all);
  mlp_.alloc(kMlpFloats, str_cat(what, " folded weights").c_str());
  partial_.alloc(core_.work.size() * kF, str_cat(what, " partial sums").c_str());
  if (rule_.fast) psq_.alloc(core_.work.size(), str_cat(what, " sums of p^2 from pass C").c_str());
  core_.reserve_item_sums(kF);
  core_.reserve_side_sums();
  norm_.alloc(size_t(core_.n_tensors) * kNormLd, str_cat(what, " normalisers").c_str());
  scalars_.alloc(1, str_cat(what, " scalars").c_str());
  const SfScalars one{1.0f, 1.0f, 1.0f, 0};  // clip stays 1 unless ELO's global clip writes it
  scalars_.upload(&one, 1);
  if (rule_.fast) {
    side_a_.alloc(size_t(core_.side_a_len) * kSideWords, str_cat(what, " row-side layer-1 shares").c_str());
    side_b_.alloc(size_t(core_.side_b_len), str_cat(what, " column-side features").c_str());
  }
  if (mode == SmallFcMode::kElo && opts.elo.clip_grad)  // with `cross`: the norm over the whole table
    clip_ = std::make_unique<LoGlobalClip>(arena, Owned(parts_), opts.elo.clip_norm, cross);
  pass_b_ = core_.pass_b(partial_.get(), scalars_.get(), dec_);
}

bool SmallFcLopt::take_clip(GradClipper* clipper) {
  return mode_ != SmallFcMode::kElo && steps_table() && core_.take_clip(clipper);
}

void SmallFcLopt::step(const StepInfo& info, cudaStream_t s) {
  core_.run_taken_clip(s);  // when taken: the clip coefficient for sf_begin
  sf_begin<<<1, 256, 0, s>>>(d_step_.get(), rule_.lr, opts_.schedule, info.d_grad_scale, weights_.get(), mlp_.get(),
                             scalars_.get());
  CUDA_CHECK_LAUNCH();
  if (clip_) clip_->run(info.d_grad_scale, &scalars_.get()->clip, s);
  if (mode_ == SmallFcMode::kElo)
    passes<true, false>(s);
  else if (rule_.bf16_records)
    passes<false, true>(s);
  else
    passes<false, false>(s);
}

// Passes A, F1, F1b (LoCore), B, F2 and C.
template <bool kElo, bool k16>
void SmallFcLopt::passes(cudaStream_t s) {
  SfScalars* sc = scalars_.get();
  if (kElo)
    core_.factor_passes_nan_to_num(&sc->grad_scale, &sc->clip, dec_, s);
  else
    core_.factor_passes(&sc->grad_scale, 0.0f, dec_, s);
  const unsigned nw = unsigned(core_.work.size());
  const bool fast_c = rule_.fast && core_.side_items.size();
  if (fast_c && psq_ready_)
    sf_pass_b<kElo, false, k16><<<nw, kLoThreads, 0, s>>>(pass_b_, psq_.get());
  else
    sf_pass_b<kElo, true, k16><<<nw, kLoThreads, 0, s>>>(pass_b_, nullptr);
  CUDA_CHECK_LAUNCH();
  core_.share_item_sums(partial_.get(), s);  // a cut tensor's sums over its ranks
  const double* side = core_.join_side_sums(s);
  sf_norms<<<unsigned(core_.n_tensors), 1024, 0, s>>>(core_.tensors.get(), partial_.get(), side, norm_.get());
  CUDA_CHECK_LAUNCH();
  if (fast_c) {
    fast_pass_c<kElo, k16>(s);  // small_fc_fast.cu; sums the tiles' p^2 for the next pass B
    psq_ready_ = true;
    return;
  }
  // Exact: every tensor per element (fast mode without tile2d tensors: every tensor is a flat chunk).
  const Chunk* exact_chunks = rule_.fast ? core_.flat_chunks.get() : core_.chunks.get();
  const unsigned n_exact = unsigned(rule_.fast ? core_.flat_chunks.size() : core_.chunks.size());
  if (n_exact) {
    sf_pass_c_exact<kElo><<<n_exact, kThreads, 0, s>>>(
        exact_chunks, core_.tensors.get(), arena_.grads(), arena_.params(), arena_.params_bf16(),
        reinterpret_cast<const LoRec<k16>*>(core_.state.get()), core_.diag.get(), core_.rrec.get(), core_.crec.get(),
        core_.rfac.get(), core_.cfac.get(), norm_.get(), mlp_.get(), sc, rule_.exp_mult, rule_.step_mult, rule_.wd);
    CUDA_CHECK_LAUNCH();
  }
}

std::vector<Optimizer::StateBuffer> SmallFcLopt::state_buffers() const {
  return {{"lopt.moments", core_.state.get(), core_.state.bytes()},
          {"lopt.vector_factors", core_.diag.get(), core_.diag.bytes()},
          {"lopt.R", core_.rrec.get(), core_.rrec.bytes()},
          {"lopt.C", core_.crec.get(), core_.crec.bytes()}};
}

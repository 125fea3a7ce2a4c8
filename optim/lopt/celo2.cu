// CELO2 / ELO_CELO2 (celo2.h): the optimizer, its planning, and the step's kernels before the learned
// path - the global clip's partial sums, the step's scalars, the AdamW side path. The learned path (passes
// B and C, Newton-Schulz, the update) is in celo2_learned.cu. Semantics and operation order follow the CPU
// reference (optim/ref/ref_celo2*.cpp): g = clamp((g * gs) * clip, +-grad_clip_val); elementwise math in
// fp32; reductions in double over fixed partitions (per-thread, then warp shuffles, then warps in order,
// then items in order), so results do not depend on scheduling.
#include <algorithm>
#include <cmath>
#include <map>

#include "optim/lopt/celo2_device.cuh"
#include "optim/step_scalars.cuh"

namespace {
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
  sc.count = t;
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
}  // namespace

Celo2::Celo2(Arena& arena, const OptimOptions& opts, const Celo2Weights& w, Celo2Mode mode, const Owned& owned,
             CrossRank* cross)
    : Optimizer(arena, opts, owned, cross),
      elo_(mode == Celo2Mode::kEloCelo2),
      h_(elo_ ? opts.elo_celo2 : opts.celo2),
      dec_(celo2_decays()) {
  const ParamTable& tab = arena.table();
  std::vector<int> learned;
  std::vector<Part> adam;
  for (const Part& p : parts_) {
    const int i = p.tensor;
    if (celo2_uses_adamw(tab[i], h_)) {
      adam.push_back(p);
      continue;
    }
    if (tab[i].ndim() < 2)
      user_error(name(), ": vectors through the MLP (", name(),
                 ".adamw_1d=false) exist only in the CPU reference; tensor '", tab[i].name, "' has ", tab[i].ndim(),
                 " dimensions.");
    learned.push_back(i);
  }
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
  require_whole(learned);
  plan_learned(learned);
  plan_adam(adam);
  if (h_.clip_grad) plan_clip();
}

// The global clip's chunks: over the owned tensors, or with a CrossRank over the whole table (each rank
// sums its share of every chunk, the ranks add them up).
void Celo2::plan_clip() {
  const ParamTable& tab = arena_.table();
  std::vector<int64_t> soff;
  plan_state_offsets(tab, owned_, &soff);
  const std::vector<Chunk> c =
      cross_ ? plan_table_chunks(tab, Owned(parts_), kClipChunk) : plan_chunks(tab, owned_, soff, kClipChunk);
  clip_chunks_.alloc(c.size(), "celo2 clip chunks");
  clip_chunks_.upload(c);
  clip_partial_.alloc(std::max<size_t>(c.size(), 1), "celo2 clip partials");
}

// Items run over each slice in the tensor's order; the direction buffer groups slices by shape, each group
// back to back at NewtonSchulz's stride, so that one batched GEMM serves a whole group.
void Celo2::plan_learned(const std::vector<int>& learned) {
  if (learned.empty()) return;
  const ParamTable& tab = arena_.table();
  core_ = std::make_unique<LoCore>(arena_, learned, parse_tie_rule(h_.tie, kCelo2PyloTie), false, kRun, h_.bf16_record);
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
  std::vector<int32_t> c_items, c_tiles;  // pass C's blocks (celo2_learned.cu)
  for (int k = 0; k < int(host_mats_.size()); k++) {
    C2Mat& m = host_mats_[size_t(k)];
    const int64_t rc = m.rows * m.cols;
    m.first_slice = int32_t(slices.size());
    m.n_slices = int32_t(m.slices);
    m.dx = next[{m.rows, m.cols}];
    const LoTensor& lt = core_->host_tensors[size_t(k)];
    for (int64_t b = 0; b < m.slices; b++) {
      int64_t& dx = next[{m.rows, m.cols}];
      C2Slice sl{k, int32_t(items.size()), 0, rc};
      if (lt.tile2d) {  // 2-D: one slice
        sl.first_tile = lt.work_begin;
        sl.n_tiles = lt.work_end - lt.work_begin;
        for (int w = lt.work_begin; w < lt.work_end; w++) c_tiles.push_back(w);
      }
      for (int64_t e = 0; e < rc; e += kRun) {
        if (!lt.tile2d) c_items.push_back(int32_t(items.size()));
        items.push_back({k, int32_t(slices.size()), b * rc + e, dx + e, int32_t(std::min<int64_t>(kRun, rc - e))});
      }
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
  p2_.alloc(items.size(), "celo2 sums of p^2 from the apply pass");
  c_items_.alloc(c_items.size(), "celo2 pass C items");
  c_items_.upload(c_items);
  c_tiles_.alloc(c_tiles.size(), "celo2 pass C tiles");
  c_tiles_.upload(c_tiles);
  tile_partial_.alloc(core_->work.size(), "celo2 pass C sums per tile");
  sigma_.alloc(slices.size() * kPart, "celo2 normalisers");
  side_sums_.alloc(slices.size() * 12, "celo2 sums of the side channels");
  psq_.alloc(slices.size(), "celo2 sums of p^2");
  dnorm_.alloc(slices.size(), "celo2 Frobenius norms");
  rscale_.alloc(slices.size(), "celo2 RMS scales");
  rsr_.alloc(core_->rrec.size(), "celo2 1/sqrt(R)");
  rsc_.alloc(core_->crec.size(), "celo2 1/sqrt(C)");
  side_r_.alloc(2 * core_->rrec.size(), "celo2 side tables of R");
  side_c_.alloc(2 * core_->crec.size(), "celo2 side tables of C");
  const NsPrecision prec = parse_ns_precision(h_.ns, name() + ".ns");
  dx_bf16_ = h_.orthogonalize && prec == NsPrecision::Bf16;
  dx_.alloc(size_t(dx_elems) * (dx_bf16_ ? 2 : 4), "celo2 direction");
  if (h_.orthogonalize)  // the scratch cap is Muon's default: larger = fewer, bigger batched GEMMs
    ns_ = std::make_unique<NewtonSchulz>(groups, h_.ns_steps, h_.ns_a, h_.ns_b, h_.ns_c, size_t(1) << 30, prec);
}

void Celo2::plan_adam(const std::vector<Part>& adam) {
  const ParamTable& tab = arena_.table();
  std::vector<float> wd(size_t(tab.size()), 0.0f);
  for (const Part& p : adam) wd[size_t(p.tensor)] = tab[p.tensor].decay ? float(h_.adam_wd()) : 0.0f;
  adam_wd_.alloc(wd.size(), "celo2 AdamW weight decay");
  adam_wd_.upload(wd);
  if (adam.empty()) return;
  const std::vector<Chunk> c = plan_part_chunks(tab, adam, kRun, &adam_elems_);
  adam_chunks_.alloc(c.size(), "celo2 AdamW chunks");
  adam_chunks_.upload(c);
  adam_m_.alloc(size_t(adam_elems_), "celo2 AdamW m");
  adam_m_.zero();
  adam_v_.alloc(size_t(adam_elems_), "celo2 AdamW v");
  adam_v_.zero();
}

bool Celo2::take_clip(GradClipper* clipper) { return core_ && !cross_ && steps_table() && core_->take_clip(clipper); }

void Celo2::step(const StepInfo& info, cudaStream_t s) {
  if (core_) core_->run_taken_clip(s);  // when taken: the clip coefficient that everything below reads
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

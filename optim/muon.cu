// Muon step, in launches:
//   begin      one thread: step counter, scheduled lr, Muon and aux-AdamW scalars
//   momentum   chunks: buf = lerp(buf, g, 1-mu); u = nesterov ? lerp(g, buf, mu) : buf; x = bf16(u);
//              sum of bf16(u)^2 per chunk                         R g, buf  W buf, x (10 B/param)
//   normalise  chunks: x /= max(bf16(||x||_F), eps) (the norm rounded to bf16, as torch does) (4 B)
//   NS         3 GEMMs per iteration per shape group (5 iterations)
//   apply      chunks: p = p*(1 - lr*wd) - lr*ratio*float(x)       R p, x  W p (10 B/param)
//   aux AdamW  one launch over the other tensors
#include <algorithm>
#include <cmath>
#include <map>

#include "optim/muon.h"
#include "optim/step_scalars.cuh"

namespace {
constexpr int kThreads = 256;
constexpr int kChunk = 16384;

__global__ void muon_begin_step(int64_t* step, MuonOptions h, LrSchedule sched, const float* grad_scale,
                                MuonScalars* out) {
  int64_t t = ++*step;
  double f = sched.factor(t - 1);
  MuonScalars s;
  s.lr = h.lr * f;
  s.mu = float(h.momentum);
  s.one_minus_mu = float(1.0 - h.momentum);
  s.wd_factor = float(1.0 - s.lr * h.weight_decay);
  s.grad_scale = read_grad_scale(grad_scale);
  s.aux = make_adamw_scalars(h.aux, t, f, s.grad_scale);
  *out = s;
}

__global__ void __launch_bounds__(kThreads)
    muon_momentum(const Chunk* __restrict__ chunks, const float* __restrict__ g, float* __restrict__ buf,
                  __nv_bfloat16* __restrict__ x, float* __restrict__ chunk_sq, bool nesterov,
                  const MuonScalars* __restrict__ sc) {
  const Chunk c = chunks[blockIdx.x];
  const float gs = sc->grad_scale, w = sc->one_minus_mu, mu = sc->mu;
  float sq = 0.0f;
  for (int i = threadIdx.x; i < c.n; i += kThreads) {
    float gv = g[c.p_begin + i] * gs;
    float b = torch_lerp(buf[c.s_begin + i], gv, w);
    buf[c.s_begin + i] = b;
    __nv_bfloat16 u = __float2bfloat16_rn(nesterov ? torch_lerp(gv, b, mu) : b);
    x[c.s_begin + i] = u;
    float uf = __bfloat162float(u);
    sq += uf * uf;
  }
  __shared__ float red[kThreads];
  red[threadIdx.x] = sq;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) chunk_sq[blockIdx.x] = red[0];
}

__global__ void __launch_bounds__(kThreads)
    muon_normalise(const Chunk* __restrict__ chunks, const MuonTensor* __restrict__ mt,
                   const float* __restrict__ chunk_sq, __nv_bfloat16* __restrict__ x, float eps) {
  const Chunk c = chunks[blockIdx.x];
  const MuonTensor t = mt[c.tensor];
  __shared__ float inv;
  if (threadIdx.x == 0) {  // every block of a tensor sums the same partials in the same order
    float s = 0.0f;
    for (int k = t.chunk_begin; k < t.chunk_end; k++) s += chunk_sq[k];
    float nrm = __bfloat162float(__float2bfloat16_rn(sqrtf(s)));
    inv = fmaxf(nrm, eps);
  }
  __syncthreads();
  const float d = inv;
  for (int i = threadIdx.x; i < c.n; i += kThreads)
    x[c.s_begin + i] = __float2bfloat16_rn(__bfloat162float(x[c.s_begin + i]) / d);
}

__global__ void __launch_bounds__(kThreads)
    muon_apply(const Chunk* __restrict__ chunks, const MuonTensor* __restrict__ mt, float* __restrict__ p,
               __nv_bfloat16* __restrict__ pb, const __nv_bfloat16* __restrict__ x,
               const MuonScalars* __restrict__ sc) {
  const Chunk c = chunks[blockIdx.x];
  const MuonTensor t = mt[c.tensor];
  const float wdf = t.decay ? sc->wd_factor : 1.0f;
  const float step = float(-(sc->lr * double(t.ratio)));
  for (int i = threadIdx.x; i < c.n; i += kThreads) {
    float v = p[c.p_begin + i] * wdf + step * __bfloat162float(x[c.s_begin + i]);
    p[c.p_begin + i] = v;
    if (pb) pb[c.p_begin + i] = __float2bfloat16_rn(v);
  }
}

double adjust_ratio(const std::string& rule, int64_t rows, int64_t cols) {
  if (rule == "match_rms_adamw") return 0.2 * std::sqrt(double(std::max(rows, cols)));
  return std::sqrt(std::max(1.0, double(rows) / double(cols)));
}
}  // namespace

std::vector<Part> muon_owned(const ParamTable& t, const std::vector<Part>& owned, bool muon) {
  std::vector<Part> v;
  for (const Part& p : owned)
    if ((t[p.tensor].resolved_owner() == Owner::Muon) == muon) v.push_back(p);
  return v;
}

Muon::Muon(Arena& arena, const OptimOptions& opts, const Owned& owned)
    : Optimizer(arena, opts, owned),
      muon_(part_tensors(muon_owned(arena.table(), parts_, true))),
      aux_(arena, muon_owned(arena.table(), parts_, false)) {
  require_whole(muon_);
  const ParamTable& tab = arena.table();
  // Group the Muon tensors by their 2-D shape so each group sits back to back at a fixed stride.
  std::map<std::pair<int64_t, int64_t>, std::vector<int>> by_shape;
  for (int i : muon_) by_shape[{tab[i].mat_rows(), tab[i].mat_cols()}].push_back(i);
  std::vector<int> order;
  std::vector<NsGroup> groups;
  int64_t off = 0;
  for (auto& [shape, ids] : by_shape) {
    int64_t stride = ns_matrix_stride(shape.first, shape.second);
    groups.push_back({shape.first, shape.second, off, stride, int(ids.size())});
    off += stride * int64_t(ids.size());
    order.insert(order.end(), ids.begin(), ids.end());
  }
  std::vector<int64_t> offsets;
  int64_t n = plan_state_offsets(tab, order, &offsets);
  CHECK(n == off);
  buf_.alloc(size_t(n), "Muon momentum");
  buf_.zero();
  x_.alloc(size_t(n), "Muon Newton-Schulz buffer");
  auto chunks = plan_chunks(tab, order, offsets, kChunk);
  std::vector<MuonTensor> mt(size_t(tab.size()), MuonTensor{0, 0, 0, 0.0f, 0});
  for (size_t k = 0; k < chunks.size(); k++) {
    MuonTensor& t = mt[size_t(chunks[k].tensor)];
    if (t.chunk_end == 0) t.chunk_begin = int32_t(k);
    t.chunk_end = int32_t(k + 1);
  }
  for (int i : order) {
    mt[size_t(i)].s_off = offsets[size_t(i)];
    mt[size_t(i)].ratio = float(adjust_ratio(opts.muon.adjust_lr, tab[i].mat_rows(), tab[i].mat_cols()));
    mt[size_t(i)].decay = tab[i].decay;
  }
  chunks_.alloc(chunks.size(), "Muon chunk map");
  chunks_.upload(chunks);
  chunk_sq_.alloc(chunks.size(), "Muon chunk sums");
  mt_.alloc(mt.size(), "Muon tensor table");
  mt_.upload(mt);
  scalars_.alloc(1, "Muon scalars");
  if (!groups.empty())
    ns_ = std::make_unique<NewtonSchulz>(groups, opts.muon.ns_steps, opts.muon.ns_a, opts.muon.ns_b, opts.muon.ns_c,
                                         size_t(opts.muon.ns_workspace_mb * 1048576.0));
}

void Muon::step(const StepInfo& info, cudaStream_t s) {
  muon_begin_step<<<1, 1, 0, s>>>(d_step_.get(), opts_.muon, opts_.schedule, info.d_grad_scale, scalars_.get());
  CUDA_CHECK_LAUNCH();
  const unsigned nc = unsigned(chunks_.size());
  if (nc) {
    muon_momentum<<<nc, kThreads, 0, s>>>(chunks_.get(), arena_.grads(), buf_.get(), x_.get(), chunk_sq_.get(),
                                          opts_.muon.nesterov, scalars_.get());
    CUDA_CHECK_LAUNCH();
    muon_normalise<<<nc, kThreads, 0, s>>>(chunks_.get(), mt_.get(), chunk_sq_.get(), x_.get(), float(opts_.muon.eps));
    CUDA_CHECK_LAUNCH();
    ns_->run(x_.get(), s);
    muon_apply<<<nc, kThreads, 0, s>>>(chunks_.get(), mt_.get(), arena_.params(), arena_.params_bf16(), x_.get(),
                                       scalars_.get());
    CUDA_CHECK_LAUNCH();
  }
  // The aux AdamW reads its scalars from inside MuonScalars.
  aux_.run(
      reinterpret_cast<const AdamWScalars*>(reinterpret_cast<const char*>(scalars_.get()) + offsetof(MuonScalars, aux)),
      s);
}

std::vector<Optimizer::StateBuffer> Muon::state_buffers() const {
  return {{"muon.momentum", buf_.get(), buf_.bytes()},
          {"muon.adamw.m", aux_.m.get(), aux_.m.bytes()},
          {"muon.adamw.v", aux_.v.get(), aux_.v.bytes()}};
}

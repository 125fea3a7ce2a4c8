#include "optim/grad_clip.h"

namespace {
constexpr int kThreads = 256, kChunk = 16384, kFinal = 1024;

__global__ void __launch_bounds__(kThreads)
    sumsq_chunks(const Chunk* __restrict__ chunks, const float* __restrict__ g, float* __restrict__ partial) {
  const Chunk c = chunks[blockIdx.x];
  const float4* G4 = reinterpret_cast<const float4*>(g + c.p_begin);
  float s = 0.0f;
  const int n4 = c.n >> 2;
  for (int i = threadIdx.x; i < n4; i += kThreads) {
    float4 v = G4[i];
    s += (v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w);
  }
  for (int e = 4 * n4 + threadIdx.x; e < c.n; e += kThreads) s += g[c.p_begin + e] * g[c.p_begin + e];
  __shared__ float red[kThreads];
  red[threadIdx.x] = s;
  __syncthreads();
  for (int k = kThreads / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = red[0];
}

__global__ void __launch_bounds__(kFinal)
    finish_norm(const float* __restrict__ partial, int n, float max_norm, float* out) {
  __shared__ double red[kFinal];
  double s = 0;
  for (int i = threadIdx.x; i < n; i += kFinal) s += partial[i];
  red[threadIdx.x] = s;
  __syncthreads();
  for (int k = kFinal / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    float norm = float(sqrt(red[0]));
    float scale = 1.0f;
    if (max_norm > 0) scale = fminf(1.0f, max_norm / (norm + 1e-6f));
    out[0] = scale;
    out[1] = norm;
  }
}
}  // namespace

GradClipper::GradClipper(const Arena& arena, float max_norm, const Owned& owned, CrossRank* cross)
    : arena_(arena), max_norm_(max_norm), cross_(cross) {
  const ParamTable& t = arena.table();
  std::vector<int64_t> same;
  for (const auto& ti : t.tensors()) same.push_back(ti.offset);
  const std::vector<Part> parts = owned_parts(t, owned);
  CHECK(cross || all_whole(t, parts));  // a part of a tensor only as one rank's share of a sharded step
  host_chunks_ = cross ? plan_table_chunks(t, owned, kChunk) : plan_chunks(t, part_tensors(parts), same, kChunk);
  n_chunks_ = int(host_chunks_.size());
  chunks_.alloc(host_chunks_.size(), "grad-norm chunk map");
  chunks_.upload(host_chunks_);
  partial_.alloc(host_chunks_.size(), "grad-norm partials");
  out_.alloc(2, "grad-norm result");
}

void GradClipper::take(const std::vector<int>& taken, int n_extra) {
  CHECK(n_extra >= 0 && n_chunks_ == int(host_chunks_.size()));  // once
  std::vector<char> gone(size_t(arena_.table().size()), 0);
  for (int k : taken) gone[size_t(k)] = 1;
  std::vector<Chunk> kept;
  for (const Chunk& c : host_chunks_)
    if (!gone[size_t(c.tensor)]) kept.push_back(c);
  n_chunks_ = int(kept.size());
  if (!kept.empty()) chunks_.upload(kept);
  partial_.alloc(kept.size() + size_t(n_extra), "grad-norm partials");
  partial_.zero();
}

void GradClipper::run(cudaStream_t s) {
  if (n_chunks_ > 0)
    sumsq_chunks<<<unsigned(n_chunks_), kThreads, 0, s>>>(chunks_.get(), arena_.grads(), partial_.get());
  CUDA_CHECK_LAUNCH();
  if (cross_) cross_->sum(partial_.get(), partial_.size(), s);
  finish_norm<<<1, kFinal, 0, s>>>(partial_.get(), int(partial_.size()), max_norm_, out_.get());
  CUDA_CHECK_LAUNCH();
}

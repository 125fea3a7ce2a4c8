// Per chunk: sum of (g gs)^2 in double, each square in fp32; then one block sums the chunks in a fixed
// order and writes the factor. 4 B/param read.
#include <algorithm>

#include "optim/lopt/lo_global_clip.h"
#include "optim/step_scalars.cuh"

namespace {
constexpr int kThreads = 256, kChunk = 16384;

// Sum over the block of one double per thread, in a fixed order; valid in thread 0.
__device__ double lgc_block_sum(double x) {
  __shared__ double red[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = x;
  __syncthreads();
  double s = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < kThreads / 32; w++) s += red[w];
  return s;
}

__global__ void __launch_bounds__(kThreads)
    lgc_partials(const Chunk* __restrict__ chunks, const float* __restrict__ g, const float* __restrict__ gscale,
                 double* __restrict__ partial) {
  const Chunk c = chunks[blockIdx.x];
  const float gs = read_grad_scale(gscale);
  // Chunks start 16-byte aligned (tensors are 128-byte aligned, chunk lengths multiples of 4).
  const float4* G4 = reinterpret_cast<const float4*>(g + c.p_begin);
  const int n4 = c.n / 4;
  double s = 0;
  for (int i = threadIdx.x; i < n4; i += kThreads) {
    const float4 v = G4[i];
    const float x[4] = {v.x * gs, v.y * gs, v.z * gs, v.w * gs};
#pragma unroll
    for (int k = 0; k < 4; k++) s += double(x[k] * x[k]);
  }
  for (int e = 4 * n4 + threadIdx.x; e < c.n; e += kThreads) {
    const float x = g[c.p_begin + e] * gs;
    s += double(x * x);
  }
  s = lgc_block_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void __launch_bounds__(kThreads)
    lgc_factor(const double* __restrict__ partial, int n, double clip_norm, float* __restrict__ out) {
  double s = 0;
  for (int i = threadIdx.x; i < n; i += kThreads) s += partial[i];
  s = lgc_block_sum(s);
  if (threadIdx.x != 0) return;
  const double norm = sqrt(double(float(s)));  // PyLO's float32 total: infinite beyond FLT_MAX
  *out = isnan(norm) ? 1.0f : float(clip_norm / fmax(norm, clip_norm));
}
}  // namespace

LoGlobalClip::LoGlobalClip(const Arena& arena, const Owned& owned, double clip_norm, CrossRank* cross)
    : arena_(arena), clip_norm_(clip_norm), cross_(cross) {
  std::vector<int64_t> same;  // the chunks index the gradients only: arena offsets
  for (const auto& t : arena.table().tensors()) same.push_back(t.offset);
  const std::vector<Chunk> c = cross ? plan_table_chunks(arena.table(), owned, kChunk)
                                     : plan_chunks(arena.table(), part_tensors(owned.parts), same, kChunk);
  chunks_.alloc(c.size(), "global-clip chunk map");
  chunks_.upload(c);
  partial_.alloc(std::max<size_t>(c.size(), 1), "global-clip partial sums");
  partial_.zero();
}

void LoGlobalClip::run(const float* grad_scale, float* out, cudaStream_t s) {
  if (chunks_.size()) {
    lgc_partials<<<unsigned(chunks_.size()), kThreads, 0, s>>>(chunks_.get(), arena_.grads(), grad_scale,
                                                               partial_.get());
    CUDA_CHECK_LAUNCH();
  }
  if (cross_) cross_->sum(partial_.get(), partial_.size(), s);
  lgc_factor<<<1, kThreads, 0, s>>>(partial_.get(), int(chunks_.size()), clip_norm_, out);
  CUDA_CHECK_LAUNCH();
}

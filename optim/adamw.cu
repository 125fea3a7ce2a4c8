// AdamW, one pass: per element read p, g, m, v and write p, m, v (28 B/param; +2 B with a bf16 copy).
// Blocks walk a device-resident chunk map (16K elements each), 16-byte loads, two vectors in flight
// per thread per iteration.
#include "optim/adamw.h"

namespace {
constexpr int kThreads = 256;
constexpr int kChunk = 16384;

// One element, in torch's fused AdamW order (its results to the bit):
//   p -= lr wd p                        decoupled weight decay first, on the parameter before the step
//   m  = beta1 m + (1 - beta1) g        the first moment;  m_hat = m / (1 - beta1^t)
//   v  = beta2 v + (1 - beta2) g^2      the second moment; v_hat = v / (1 - beta2^t)
//   p -= lr m_hat / (sqrt(v_hat) + eps)
// with the bias corrections folded into per-step scalars as torch folds them: lr m_hat is
// step_size m, and sqrt(v_hat) is sqrt(v) / sqrt_bias_correction2. g arrives unscaled: times grad_scale
// (the trainer's clip coefficient) first. lr_wd is 0 for tensors without weight decay.
__device__ __forceinline__ void adamw_elem(float& p, float g, float& m, float& v, const AdamWScalars& s, float lr_wd) {
  g *= s.grad_scale;
  p -= lr_wd * p;
  m = s.beta1 * m + s.one_minus_beta1 * g;
  v = s.beta2 * v + s.one_minus_beta2 * g * g;
  float denom = sqrtf(v) / s.sqrt_bias_correction2 + s.eps;  // sqrt(v_hat) + eps
  p -= s.step_size * m / denom;                              // lr m_hat / (sqrt(v_hat) + eps)
}

__device__ __forceinline__ void store_bf16x4(__nv_bfloat16* dst, float4 p) {
  __nv_bfloat162 lo = __floats2bfloat162_rn(p.x, p.y), hi = __floats2bfloat162_rn(p.z, p.w);
  uint2 u;
  u.x = *reinterpret_cast<uint32_t*>(&lo);
  u.y = *reinterpret_cast<uint32_t*>(&hi);
  *reinterpret_cast<uint2*>(dst) = u;
}

__device__ __forceinline__ void adamw_vec(float4* P, const float4* G, float4* M, float4* V, __nv_bfloat16* PB, int i,
                                          const AdamWScalars& s, float lr_wd) {
  float4 p = P[i], g = G[i], m = M[i], v = V[i];
  adamw_elem(p.x, g.x, m.x, v.x, s, lr_wd);
  adamw_elem(p.y, g.y, m.y, v.y, s, lr_wd);
  adamw_elem(p.z, g.z, m.z, v.z, s, lr_wd);
  adamw_elem(p.w, g.w, m.w, v.w, s, lr_wd);
  P[i] = p;
  M[i] = m;
  V[i] = v;
  if (PB) store_bf16x4(PB + 4 * i, p);
}

__global__ void __launch_bounds__(kThreads)
    adamw_kernel(const Chunk* __restrict__ chunks, const TensorDesc* __restrict__ desc, float* __restrict__ p,
                 const float* __restrict__ g, float* __restrict__ m, float* __restrict__ v,
                 __nv_bfloat16* __restrict__ pb, const AdamWScalars* __restrict__ sc) {
  const Chunk c = chunks[blockIdx.x];
  const AdamWScalars s = *sc;
  const float lr_wd = (desc[c.tensor].flags & kDecay) ? s.lr_wd : 0.0f;
  float* P = p + c.p_begin;
  const float* G = g + c.p_begin;
  float* M = m + c.s_begin;
  float* V = v + c.s_begin;
  __nv_bfloat16* PB = pb ? pb + c.p_begin : nullptr;
  // Offsets are multiples of 32 elements, so the float4 views are aligned.
  const int n4 = c.n >> 2;
  int i = threadIdx.x;
  for (; i + kThreads < n4; i += 2 * kThreads) {
    adamw_vec((float4*)P, (const float4*)G, (float4*)M, (float4*)V, PB, i, s, lr_wd);
    adamw_vec((float4*)P, (const float4*)G, (float4*)M, (float4*)V, PB, i + kThreads, s, lr_wd);
  }
  if (i < n4) adamw_vec((float4*)P, (const float4*)G, (float4*)M, (float4*)V, PB, i, s, lr_wd);
  for (int e = 4 * n4 + threadIdx.x; e < c.n; e += kThreads) {
    float pe = P[e], me = M[e], ve = V[e];
    adamw_elem(pe, G[e], me, ve, s, lr_wd);
    P[e] = pe;
    M[e] = me;
    V[e] = ve;
    if (PB) PB[e] = __float2bfloat16_rn(pe);
  }
}

__global__ void adamw_begin_step(int64_t* step, AdamWOptions h, LrSchedule sched, const float* grad_scale,
                                 AdamWScalars* out) {
  int64_t t = ++*step;
  *out = make_adamw_scalars(h, t, sched.factor(t - 1), read_grad_scale(grad_scale));
}
}  // namespace

AdamWCore::AdamWCore(const Arena& arena, const std::vector<Part>& parts) : arena_(arena) {
  int64_t n = 0;
  const std::vector<Chunk> c = plan_part_chunks(arena.table(), parts, kChunk, &n);
  m.alloc(size_t(n), "AdamW first moment");
  v.alloc(size_t(n), "AdamW second moment");
  m.zero();
  v.zero();
  chunks_.alloc(c.size(), "AdamW chunk map");
  chunks_.upload(c);
}

void AdamWCore::run(const AdamWScalars* d_scalars, cudaStream_t s) const {
  if (empty()) return;
  adamw_kernel<<<unsigned(chunks_.size()), kThreads, 0, s>>>(
      chunks_.get(), arena_.desc(), arena_.params(), arena_.grads(), m.get(), v.get(), arena_.params_bf16(), d_scalars);
  CUDA_CHECK_LAUNCH();
}

AdamW::AdamW(Arena& arena, const OptimOptions& opts, const Owned& owned)
    : Optimizer(arena, opts, owned), core_(arena, parts_), scalars_(1, "AdamW scalars") {}

void AdamW::step(const StepInfo& info, cudaStream_t s) {
  adamw_begin_step<<<1, 1, 0, s>>>(d_step_.get(), opts_.adamw, opts_.schedule, info.d_grad_scale, scalars_.get());
  CUDA_CHECK_LAUNCH();
  core_.run(scalars_.get(), s);
}

std::vector<Optimizer::StateBuffer> AdamW::state_buffers() const {
  return {{"adamw.m", core_.m.get(), core_.m.bytes()}, {"adamw.v", core_.v.get(), core_.v.bytes()}};
}

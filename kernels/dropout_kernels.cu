// Dropout of a residual branch or the embedding: out = mask(x) * scale (+ add), element-wise over (rows, C),
// the mask drawn from kernels/dropout.h's hash (nothing stored). Memory-bound: reads x (and add), writes out;
// the mask costs one hash per row pair of columns, recomputed by backward.
#include "common/cuda_check.h"
#include "common/error.h"
#include "kernels/dropout_kernels.h"

namespace {
__device__ __forceinline__ float2 load2(const float* p) { return *reinterpret_cast<const float2*>(p); }
__device__ __forceinline__ float2 load2(const __nv_bfloat16* p) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}
__device__ __forceinline__ void store2(float* p, float2 v) { *reinterpret_cast<float2*>(p) = v; }
__device__ __forceinline__ void store2(__nv_bfloat16* p, float2 v) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __float22bfloat162_rn(v);
}

// One thread per pair of columns: one hash gives both elements' 16 bits (low half: the even column); an
// element is kept iff its bits are >= threshold. x, add and out (rows, C) as pairs; out may be x.
template <class T>
__global__ void dropout_k(T* out, const T* x, const T* add, int64_t pairs, int half_c, DropoutArgs d) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= pairs) return;
  const uint64_t key = dropout_site_key(d.seed, *d.counter, d.site);
  const int64_t row = i / half_c;
  const uint32_t pair = uint32_t(i - row * half_c);
  const uint32_t h = dropout_pair_bits(dropout_row(key, uint32_t(row)), pair);
  float2 v = load2(x + 2 * i);
  v.x = (h & 0xffffu) >= d.threshold ? v.x * d.scale : 0.0f;
  v.y = (h >> 16) >= d.threshold ? v.y * d.scale : 0.0f;
  if (add) {
    const float2 a = load2(add + 2 * i);
    v.x += a.x;
    v.y += a.y;
  }
  store2(out + 2 * i, v);
}

template <class T>
void launch(T* out, const T* x, const T* add, int64_t rows, int C, const DropoutArgs& d, cudaStream_t s) {
  if (C % 2) user_error("dropout_forward: C must be even (got ", C, ").");
  CHECK(d.counter != nullptr && d.on());
  const int64_t pairs = rows * (C / 2);
  if (pairs == 0) return;
  dropout_k<<<unsigned((pairs + 255) / 256), 256, 0, s>>>(out, x, add, pairs, C / 2, d);
  CUDA_CHECK_LAUNCH();
}

// The micro-batch counter lives on the device, so a captured CUDA graph draws new masks on every replay.
__global__ void advance_k(uint64_t* counter) { *counter += 1; }
}  // namespace

void dropout_forward(float* out, const float* x, const float* add, int64_t rows, int C, const DropoutArgs& d,
                     cudaStream_t s) {
  launch(out, x, add, rows, C, d, s);
}
void dropout_forward(__nv_bfloat16* out, const __nv_bfloat16* x, const __nv_bfloat16* add, int64_t rows, int C,
                     const DropoutArgs& d, cudaStream_t s) {
  launch(out, x, add, rows, C, d, s);
}
void dropout_counter_advance(uint64_t* counter, cudaStream_t s) {
  advance_k<<<1, 1, 0, s>>>(counter);
  CUDA_CHECK_LAUNCH();
}

void DropoutState::set(float p, uint64_t seed) {
  if (!(p >= 0.0f && p < 1.0f)) user_error("dropout must be at least 0 and below 1 (got ", p, ").");
  if (dropout_threshold(p) >= 65536u)
    user_error("dropout ", p, " keeps nothing (p is rounded to 1/65536); use at most 0.9999.");
  p_ = p;
  seed_ = seed;
  threshold_ = dropout_threshold(p);
}

DropoutArgs DropoutState::site(uint32_t site) const {
  DropoutArgs d;
  d.seed = seed_;
  d.counter = counter_.get();
  d.site = site;
  d.threshold = threshold_;
  d.scale = dropout_scale(threshold_);
  return d;
}

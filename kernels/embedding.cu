// Token + position embedding (kernels/embedding.h). Forward: one thread per element of x (N, C), two
// gathers and a store. Backward: wpe's gradient sums the B rows of each position in batch order; wte's
// gradient sums the rows of each token, the rows found by grouping positions by token (cub: a stable radix
// sort of (token, position), run-length encoding, a prefix sum for each run's start), so every sum has
// one fixed order and no float atomics.
#include <algorithm>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include "common/cuda_check.h"
#include "kernels/device_utils.cuh"
#include "kernels/embedding.h"

namespace {
__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ float from_f<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// v[i] = i: the positions that the sort carries along with their tokens.
__global__ void iota_k(int* v, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] = i;
}

// x[n, c] = wte[tok[n], c] + wpe[n % T, c], added in fp32.
template <class X, class P>
__global__ void encoder_fwd_k(X* x, const int* tok, const P* wte, const P* wpe, int N, int T, int C) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= int64_t(N) * C) return;
  const int n = int(i / C), c = int(i % C);
  x[i] = from_f<X>(to_f(wte[int64_t(tok[n]) * C + c]) + to_f(wpe[int64_t(n % T) * C + c]));
}

// dwpe[t, c] += sum_b dx[b, t, c]: one thread per (t, c), b in order.
template <class X>
__global__ void encoder_bwd_wpe_k(float* dwpe, const X* dx, int B, int T, int C) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= int64_t(T) * C) return;
  float s = 0.0f;
  for (int b = 0; b < B; b++) s += to_f(dx[int64_t(b) * T * C + i]);
  dwpe[i] += s;
}

// One block per run of equal tokens (blocks past the number of runs exit at once). Its 8 warps take
// the run's rows round-robin, each lane a 16-byte vector of columns; the 8 warp sums are then added
// in a fixed order, so the result does not depend on scheduling.
constexpr int kWarps = 8;
template <class X>
__global__ void __launch_bounds__(32 * kWarps)
    encoder_bwd_wte_k(float* dwte, const X* dx, const int* pos, const int* run_token, const int* run_start,
                      const int* run_len, const int* num_runs, int C) {
  constexpr int kVec = 16 / sizeof(X);
  __shared__ float part[kWarps][32 * kVec];
  const int u = blockIdx.x;
  if (u >= *num_runs) return;
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, start = run_start[u], len = run_len[u];
  float* row = dwte + int64_t(run_token[u]) * C;
  for (int c0 = 0; c0 < C; c0 += 32 * kVec) {
    const int c = c0 + lane * kVec;
    float acc[kVec] = {};
    if (c < C)
      for (int j = w; j < len; j += kWarps) {
        const X* src = dx + int64_t(pos[start + j]) * C + c;
        X v[kVec];
        *reinterpret_cast<uint4*>(v) = *reinterpret_cast<const uint4*>(src);
        for (int e = 0; e < kVec; e++) acc[e] += to_f(v[e]);
      }
    for (int e = 0; e < kVec; e++) part[w][lane * kVec + e] = acc[e];
    __syncthreads();
    for (int i = threadIdx.x; i < 32 * kVec && c0 + i < C; i += blockDim.x) {
      float s = 0.0f;
      for (int k = 0; k < kWarps; k++) s += part[k][i];
      row[c0 + i] += s;
    }
    __syncthreads();
  }
}
}  // namespace

// bits_: the sort looks at the token's low bits only, enough for ids < vocab. The constructor asks cub how
// much scratch each step needs (calls with null pointers) and allocates the largest once.
TokenGroups::TokenGroups(int N, int vocab) : N_(N), bits_(1) {
  while ((1 << bits_) < vocab) bits_++;
  for (auto* b : {&vals_in_, &keys_out_, &vals_out_, &run_token_, &run_start_, &run_len_})
    b->alloc(size_t(N), "token groups");
  num_runs_.alloc(1, "token groups");
  iota_k<<<blocks(N, 256), 256>>>(vals_in_.get(), N);
  CUDA_CHECK_LAUNCH();
  size_t a = 0, b = 0, c = 0;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, a, static_cast<const int*>(nullptr), static_cast<int*>(nullptr),
                                             static_cast<const int*>(nullptr), static_cast<int*>(nullptr), N, 0,
                                             bits_));
  CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(nullptr, b, static_cast<const int*>(nullptr),
                                                static_cast<int*>(nullptr), static_cast<int*>(nullptr),
                                                static_cast<int*>(nullptr), N));
  CUDA_CHECK(
      cub::DeviceScan::ExclusiveSum(nullptr, c, static_cast<const int*>(nullptr), static_cast<int*>(nullptr), N));
  temp_bytes_ = std::max(a, std::max(b, c));
  temp_.alloc(temp_bytes_, "token groups");
}

// sort (token, position) by token, stably -> runs of equal tokens (token, length) -> each run's start.
void TokenGroups::build(const int* d_tokens, cudaStream_t s) {
  size_t bytes = temp_bytes_;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp_.get(), bytes, d_tokens, keys_out_.get(), vals_in_.get(),
                                             vals_out_.get(), N_, 0, bits_, s));
  bytes = temp_bytes_;
  CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(temp_.get(), bytes, keys_out_.get(), run_token_.get(), run_len_.get(),
                                                num_runs_.get(), N_, s));
  bytes = temp_bytes_;
  CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp_.get(), bytes, run_len_.get(), run_start_.get(), N_, s));
}

template <class X, class P>
void encoder_forward(X* x, const int* tok, const P* wte, const P* wpe, int N, int T, int C, cudaStream_t s) {
  encoder_fwd_k<<<blocks(int64_t(N) * C, 256), 256, 0, s>>>(x, tok, wte, wpe, N, T, C);
  CUDA_CHECK_LAUNCH();
}

template <class X>
void encoder_backward(float* dwte, float* dwpe, const X* dx, const TokenGroups& g, int B, int T, int C,
                      cudaStream_t s) {
  encoder_bwd_wpe_k<<<blocks(int64_t(T) * C, 256), 256, 0, s>>>(dwpe, dx, B, T, C);
  CUDA_CHECK_LAUNCH();
  CHECK(C % (16 / int(sizeof(X))) == 0);
  encoder_bwd_wte_k<<<unsigned(g.N()), 32 * kWarps, 0, s>>>(dwte, dx, g.sorted_pos(), g.run_token(), g.run_start(),
                                                            g.run_len(), g.num_runs(), C);
  CUDA_CHECK_LAUNCH();
}

template void encoder_forward(float*, const int*, const float*, const float*, int, int, int, cudaStream_t);
template void encoder_forward(__nv_bfloat16*, const int*, const __nv_bfloat16*, const __nv_bfloat16*, int, int, int,
                              cudaStream_t);
template void encoder_backward(float*, float*, const float*, const TokenGroups&, int, int, int, cudaStream_t);
template void encoder_backward(float*, float*, const __nv_bfloat16*, const TokenGroups&, int, int, int, cudaStream_t);

TokenBatch::TokenBatch(int N, int vocab) : N_(N), groups_(N, vocab) {
  tokens_.alloc(size_t(N), "tokens");
  targets_.alloc(size_t(N), "targets");
}

void TokenBatch::set(const int* tokens, const int* targets, cudaStream_t s) {
  CUDA_CHECK(cudaMemcpyAsync(tokens_.get(), tokens, size_t(N_) * sizeof(int), cudaMemcpyHostToDevice, s));
  if (targets)
    CUDA_CHECK(cudaMemcpyAsync(targets_.get(), targets, size_t(N_) * sizeof(int), cudaMemcpyHostToDevice, s));
  groups_.build(tokens_.get(), s);
}

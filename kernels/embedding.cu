#include <cub/device/device_radix_sort.cuh>

#include "common/cuda_check.h"
#include "kernels/embedding.h"

namespace {
__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

__global__ void iota_k(int* v, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] = i;
}

template <class X, class P>
__global__ void encoder_fwd_k(X* x, const int* tok, const P* wte, const P* wpe, int N, int T, int C) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= int64_t(N) * C) return;
  const int n = int(i / C), c = int(i % C);
  x[i] = from_f<X>(to_f(wte[int64_t(tok[n]) * C + c]) + to_f(wpe[int64_t(n % T) * C + c]));
}

template <class X>
__global__ void encoder_bwd_wpe_k(float* dwpe, const X* dx, int B, int T, int C) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= int64_t(T) * C) return;
  float s = 0.0f;
  for (int b = 0; b < B; b++) s += to_f(dx[int64_t(b) * T * C + i]);
  dwpe[i] += s;
}

// One warp per sorted position k; the warp at the first position of a token's run sums the run.
template <class X>
__global__ void encoder_bwd_wte_k(float* dwte, const X* dx, const int* tok, const int* pos, int N, int C) {
  const int k = int((blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32), lane = threadIdx.x % 32;
  if (k >= N || (k > 0 && tok[k] == tok[k - 1])) return;
  int end = k + 1;
  while (end < N && tok[end] == tok[k]) end++;
  float* row = dwte + int64_t(tok[k]) * C;
  for (int c = lane; c < C; c += 32) {
    float s = 0.0f;
    for (int j = k; j < end; j++) s += to_f(dx[int64_t(pos[j]) * C + c]);
    row[c] += s;
  }
}
unsigned blocks(int64_t n, int t) { return unsigned((n + t - 1) / t); }
}  // namespace

TokenGroups::TokenGroups(int N, int vocab) : N_(N), bits_(1) {
  while ((1 << bits_) < vocab) bits_++;
  vals_in_.alloc(size_t(N), "token groups"), keys_out_.alloc(size_t(N), "token groups"), vals_out_.alloc(size_t(N), "token groups");
  iota_k<<<blocks(N, 256), 256>>>(vals_in_.get(), N);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes_, static_cast<const int*>(nullptr), static_cast<int*>(nullptr),
                                             static_cast<const int*>(nullptr), static_cast<int*>(nullptr), N, 0, bits_));
  temp_.alloc(temp_bytes_, "token groups");
}

void TokenGroups::build(const int* d_tokens, cudaStream_t s) {
  size_t bytes = temp_bytes_;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp_.get(), bytes, d_tokens, keys_out_.get(), vals_in_.get(), vals_out_.get(), N_, 0,
                                             bits_, s));
}

template <class X, class P>
void encoder_forward(X* x, const int* tok, const P* wte, const P* wpe, int N, int T, int C, cudaStream_t s) {
  encoder_fwd_k<<<blocks(int64_t(N) * C, 256), 256, 0, s>>>(x, tok, wte, wpe, N, T, C);
  CUDA_CHECK_LAUNCH();
}

template <class X>
void encoder_backward(float* dwte, float* dwpe, const X* dx, const TokenGroups& g, int B, int T, int C, cudaStream_t s) {
  encoder_bwd_wpe_k<<<blocks(int64_t(T) * C, 256), 256, 0, s>>>(dwpe, dx, B, T, C);
  CUDA_CHECK_LAUNCH();
  encoder_bwd_wte_k<<<blocks(int64_t(B) * T * 32, 256), 256, 0, s>>>(dwte, dx, g.sorted_tokens(), g.sorted_pos(), B * T, C);
  CUDA_CHECK_LAUNCH();
}

template void encoder_forward(float*, const int*, const float*, const float*, int, int, int, cudaStream_t);
template void encoder_forward(__nv_bfloat16*, const int*, const __nv_bfloat16*, const __nv_bfloat16*, int, int, int, cudaStream_t);
template void encoder_backward(float*, float*, const float*, const TokenGroups&, int, int, int, cudaStream_t);
template void encoder_backward(float*, float*, const __nv_bfloat16*, const TokenGroups&, int, int, int, cudaStream_t);

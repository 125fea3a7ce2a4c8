// The elementwise GELU forward over bf16 rows (the erf form's path; see kernels/gelu.h).
#include "common/cuda_check.h"
#include "common/error.h"
#include "kernels/device_utils.cuh"
#include "kernels/gelu.cuh"

namespace {
// One thread per pair of columns of a row (cols is even: every layer width here is).
template <Gelu kKind>
__global__ void gelu_fwd_k(bf16* y, const bf16* pre, int ld, int N, int cols) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, half = cols / 2;
  if (i >= int64_t(N) * half) return;
  const int64_t o = (i / half) * ld + 2 * (i % half);
  const float2 u = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(pre + o));
  *reinterpret_cast<__nv_bfloat162*>(y + o) = __floats2bfloat162_rn(gelu_value<kKind>(u.x), gelu_value<kKind>(u.y));
}

// Contiguous rows (ld == cols) of a multiple of 8 elements: 8 values per thread through 16-byte accesses
// (the ViT's MLP activations: 2x the pair kernel's bandwidth). Elementwise, so the values are the same.
template <Gelu kKind>
__global__ void gelu_fwd_vec8_k(bf16* y, const bf16* pre, int64_t n8) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n8) return;
  Vec8 x;
  x.load(pre + 8 * i);
#pragma unroll
  for (int k = 0; k < 8; k++) x.v[k] = gelu_value<kKind>(x.v[k]);
  x.store(y + 8 * i);
}

template <Gelu kKind>
void launch(bf16* y, const bf16* pre, int ld, int N, int cols, cudaStream_t s) {
  const int64_t total = int64_t(N) * cols;
  const bool vec = ld == cols && total % 8 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(pre) % 16 == 0;
  if (vec)
    gelu_fwd_vec8_k<kKind><<<blocks(total / 8, 256), 256, 0, s>>>(y, pre, total / 8);
  else
    gelu_fwd_k<kKind><<<blocks(total / 2, 256), 256, 0, s>>>(y, pre, ld, N, cols);
}
}  // namespace

void gelu_forward(bf16* y, const bf16* pre, int ld, int N, int cols, Gelu kind, cudaStream_t s) {
  CHECK(cols % 2 == 0 && ld % 2 == 0);  // bf16 pairs
  const int64_t n = int64_t(N) * (cols / 2);
  if (n == 0) return;
  if (kind == Gelu::kTanh)
    launch<Gelu::kTanh>(y, pre, ld, N, cols, s);
  else
    launch<Gelu::kErf>(y, pre, ld, N, cols, s);
  CUDA_CHECK_LAUNCH();
}

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
}  // namespace

void gelu_forward(bf16* y, const bf16* pre, int ld, int N, int cols, Gelu kind, cudaStream_t s) {
  CHECK(cols % 2 == 0 && ld % 2 == 0);  // bf16 pairs
  const int64_t n = int64_t(N) * (cols / 2);
  if (n == 0) return;
  if (kind == Gelu::kTanh) {
    gelu_fwd_k<Gelu::kTanh><<<blocks(n, 256), 256, 0, s>>>(y, pre, ld, N, cols);
  } else {
    gelu_fwd_k<Gelu::kErf><<<blocks(n, 256), 256, 0, s>>>(y, pre, ld, N, cols);
  }
  CUDA_CHECK_LAUNCH();
}

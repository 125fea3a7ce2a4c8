#include "common/cuda_check.h"
#include "data/gpu_resize.h"
#include "data/resample_taps.h"

namespace {
template <int C>
__global__ void resize_kernel(const DeviceResizeJob* jobs, int size, bool bicubic) {
  const DeviceResizeJob j = jobs[blockIdx.y];
  const int p = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (p >= size * size) return;
  const int y = p / size;
  resize_pixel<C>(j.src, j.pitch, j.geometry, bicubic, size, p - y * size, y, j.dst + size_t(p) * C);
}
}  // namespace

void resize_u8_device(const DeviceResizeJob* jobs, int count, int size, int channels, Filter filter,
                      cudaStream_t stream) {
  CHECK(count >= 0 && count <= 65535 && size > 0 && size <= 4096 && (channels == 1 || channels == 3));
  if (count == 0) return;
  const dim3 grid(unsigned(ceil_div(int64_t(size) * size, 256)), unsigned(count));
  const bool bicubic = filter == Filter::kBicubic;
  if (channels == 3)
    resize_kernel<3><<<grid, 256, 0, stream>>>(jobs, size, bicubic);
  else
    resize_kernel<1><<<grid, 256, 0, stream>>>(jobs, size, bicubic);
  CUDA_CHECK_LAUNCH();
}

#include "common/cuda_check.h"
#include "data/gpu_resize.h"
#include "data/resample_taps.h"

namespace {
template <int C>
__global__ void resize_kernel(const DeviceResizeJob* jobs, int size, bool bicubic) {
  const DeviceResizeJob j = jobs[blockIdx.y];
  const int p = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (p >= size * size) return;
  const ResizeGeometry& g = j.geometry;
  const int oy = p / size, ox = p - oy * size;
  const int col = g.flip ? size - 1 - ox : ox;  // the column of the unmirrored window it shows
  const TapWindow tx = tap_window(bicubic, g.box.w, g.out_w, g.out_x + col);
  const TapWindow ty = tap_window(bicubic, g.box.h, g.out_h, g.out_y + oy);
  float acc[C] = {};
  for (int r = 0; r < ty.count; r++) {
    const uint8_t* px = j.src + size_t(g.box.y + ty.first + r) * j.pitch + size_t(g.box.x + tx.first) * C;
    float row[C] = {};  // the horizontal pass's value at this source row
    for (int i = 0; i < tx.count; i++) {
      const float w = tap_weight(tx, i);
      for (int c = 0; c < C; c++) row[c] += w * float(px[i * C + c]);
    }
    const float w = tap_weight(ty, r);
    for (int c = 0; c < C; c++) acc[c] += w * row[c];
  }
  uint8_t* out = j.dst + size_t(p) * C;
  for (int c = 0; c < C; c++) out[c] = uint8_t(lroundf(fminf(255.0f, fmaxf(0.0f, acc[c]))));
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

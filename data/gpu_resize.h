// The resampling step of the train and eval transforms (data/augment.h's resize_u8) on the GPU, for images
// already in device memory (decoded by data/nvjpeg_decoder): one thread per output pixel does
// data/resample_taps.h's resize_pixel (its own taps, the horizontal then the vertical sums in float, as
// data/resample.cpp, the flip, the rounding to bytes). Built with -fmad=false, so that each product and sum is
// rounded as the CPU's are: on the same decoded image the bytes are expected to be the CPU's exactly
// (tests/gpu/test_nvjpeg.cu allows 1 in 1000 to differ by one).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "data/resample.h"

struct DeviceResizeJob {
  const uint8_t* src = nullptr;  // device: rows of `pitch` bytes, channels interleaved
  size_t pitch = 0;
  ResizeGeometry geometry;  // its box inside the source image
  uint8_t* dst = nullptr;   // device: (size, size, channels) bytes
};

// `jobs`: `count` jobs in device memory (count <= 65535), all with `channels` (1 or 3) channels.
void resize_u8_device(const DeviceResizeJob* jobs, int count, int size, int channels, Filter filter,
                      cudaStream_t stream);

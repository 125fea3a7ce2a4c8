// A decoder of whole batches beside the CPU threads, which ImageLoader hands the images it can take:
// data/nvjpeg_decoder's (nvJPEG's hardware engine, then a resize kernel). Plain C++, so the loader builds and
// is tested without CUDA; the loader draws every crop and flip on the CPU, from each sample's generator, and
// the decoder only applies them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/augment.h"

struct EncodedImage {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

struct ImageSize {
  int width = 0, height = 0;  // 0: not decoded (the loader decodes it with stb)
};

class BatchImageDecoder {
 public:
  // One image of the last decode() to resize per `geometry` (data/augment.h's resize_u8) into `out`: host
  // memory of (size, size, channels) bytes.
  struct Job {
    size_t image = 0;
    ResizeGeometry geometry;
    uint8_t* out = nullptr;
  };
  virtual ~BatchImageDecoder() = default;
  virtual std::string name() const = 0;
  // Decodes what it can of `images` (the bytes stay the caller's until transform() returns) and gives each
  // one's size, or 0 x 0 where the CPU must decode it (PNG, progressive JPEG, ...).
  virtual void decode(const std::vector<EncodedImage>& images, std::vector<ImageSize>* sizes) = 0;
  // Resizes decoded images into host memory; returns when the bytes are there.
  virtual void transform(const std::vector<Job>& jobs) = 0;
};

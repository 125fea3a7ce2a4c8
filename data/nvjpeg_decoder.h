// JPEG decoding on the GPU's hardware JPEG engine (nvJPEG's NVJPEG_BACKEND_HARDWARE, batched): on an H100
// ~26k img/s for 500x375 JPEGs in batches of 64, where nvJPEG's default backend gives ~1.2k, so the backend is
// chosen explicitly. libnvjpeg is opened at run time (libnvjpeg.so.13, then libnvjpeg.so; data/nvjpeg_api.h
// declares what is used), so nothing here needs nvJPEG to build, and without it the loader keeps stb_image.
//
// The engine takes baseline JPEGs with 1 or 3 components (not 4:1:1 / 4:1:0). The rest is reported back
// for the CPU: progressive and other non-baseline JPEGs, PNG, CMYK, RGB-coded JPEGs (data/image_decode.h's
// jpeg_codes_rgb), images over DecodeLimits or the batch's memory budget, and a whole batch the engine
// fails on. Its pixels are not stb's bit for bit (its own IDCT, colour conversion and chroma upsampling;
// interpolated upsampling is asked for): see tests/gpu/test_nvjpeg.cu for the bounds. A JPEG that is
// corrupt after its header may decode to garbage here where stb would refuse it (and the loader skip it).
#pragma once
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "common/device_buffer.h"
#include "data/batch_decoder.h"
#include "data/image_loader.h"
#include "data/nvjpeg_api.h"

// One decoded image in device memory: (height, pitch) bytes, channels interleaved; pixels null where the
// engine did not take it (why says why).
struct DeviceImage {
  const uint8_t* pixels = nullptr;
  size_t pitch = 0;
  int width = 0, height = 0;
  std::string why;
  bool ok() const { return pixels != nullptr; }
};

class NvjpegDecoder {
 public:
  // libnvjpeg loads, a GPU is visible and the hardware backend can be created; probed once per process.
  static bool available(std::string* why = nullptr);

  // channels 3: RGB (a gray JPEG's luma replicated); 1: luma (as stb decodes JPEGs to one channel). At most
  // max_bytes of decoded pixels per batch. UserError where unavailable.
  explicit NvjpegDecoder(int channels, size_t max_bytes = size_t(1) << 30);
  ~NvjpegDecoder();
  NvjpegDecoder(const NvjpegDecoder&) = delete;
  NvjpegDecoder& operator=(const NvjpegDecoder&) = delete;

  // Decodes the images the engine takes, in one batched call on stream(); out[i] stays valid until the next
  // call, for work queued on stream() after this one.
  void decode_batch(const std::vector<EncodedImage>& images, std::vector<DeviceImage>* out);
  cudaStream_t stream() const { return stream_; }
  int channels() const { return channels_; }

 private:
  std::string screen(const EncodedImage& image, DeviceImage* d);  // why the engine cannot take it ("" = it can)
  void release();

  int channels_;
  size_t max_bytes_;
  nvjpeg::Handle handle_ = nullptr;
  nvjpeg::State state_ = nullptr;
  nvjpeg::Stream parsed_ = nullptr;
  cudaStream_t stream_ = nullptr;
  DeviceBuffer<uint8_t> arena_;
};

// The batch decoder for ImageLoader's options: null for decoder "stb"; for "nvjpeg" the hardware engine and
// the GPU resize (data/gpu_resize.h), or a UserError saying why it is unavailable; for "auto" the same where
// available, else null; "auto" says once on stderr which it uses.
std::unique_ptr<BatchImageDecoder> make_batch_decoder(const ImageLoaderOptions& o);

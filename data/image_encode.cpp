#include "data/image_encode.h"

#include <stb/stb_image_write.h>

#include "common/error.h"

namespace {
void append(void* context, void* data, int size) {
  static_cast<std::string*>(context)->append(static_cast<const char*>(data), size_t(size));
}
}  // namespace

std::string encode_png(const Image& img) {
  CHECK(img.width > 0 && img.height > 0 && img.pixels.size() == img.index(0, img.height, 0));
  std::string out;
  CHECK(stbi_write_png_to_func(append, &out, img.width, img.height, img.channels, img.pixels.data(),
                               img.width * img.channels) != 0);
  return out;
}

std::string encode_jpeg(const Image& img, int quality) {
  CHECK(img.width > 0 && img.height > 0 && img.pixels.size() == img.index(0, img.height, 0));
  CHECK(quality >= 1 && quality <= 100);
  std::string out;
  CHECK(stbi_write_jpg_to_func(append, &out, img.width, img.height, img.channels, img.pixels.data(), quality) != 0);
  return out;
}

// An 8-bit image in memory: (height, width, channels) row-major, channels 1 (gray) or 3 (RGB), the layout
// stb_image decodes to and the augmentations read.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

struct Image {
  int width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;  // (height, width, channels)

  Image() = default;
  Image(int w, int h, int c) : width(w), height(h), channels(c), pixels(size_t(w) * size_t(h) * size_t(c)) {}
  size_t index(int x, int y, int c) const {
    return (size_t(y) * size_t(width) + size_t(x)) * size_t(channels) + size_t(c);
  }
  uint8_t& at(int x, int y, int c) { return pixels[index(x, y, c)]; }
  uint8_t at(int x, int y, int c) const { return pixels[index(x, y, c)]; }
};

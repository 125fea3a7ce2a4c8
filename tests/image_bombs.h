// Hostile PNGs for the decoder's memory limits (tests/cpu/test_image_decode.cpp, fuzz seeds):
//   idat_claim_png()  a 1 x 1 image whose IDAT chunk claims 2 GB and holds 4 bytes: stb 2.27 grew its
//                     buffer to 2 GiB before reading it (the 76-byte PNG);
//   huge_png()        a 16384 x 4096 header (within the size limits) with 4 bytes of data: stb allocated
//                     its 64 MB output before finding that deflate cannot expand 4 bytes that much;
// and a JPEG: progressive_jpeg_with_undefined_table(), whose second scan names AC table 1, which no DHT
// defines: stb 2.27 decoded with the uninitialised table and read out of bounds (tests/fuzz/fuzz_image.cpp).
#pragma once
#include <cstdint>
#include <string>

#include "common/crc32.h"
#include "tests/jpeg_samples.h"

namespace image_bombs {
inline std::string be32(uint32_t v) { return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)}; }
inline std::string chunk(const std::string& type, const std::string& data, uint32_t claimed_length) {
  const std::string body = type + data;
  return be32(claimed_length) + body + be32(crc32_update(0, body.data(), body.size()));
}
inline std::string png(const std::string& idat, uint32_t idat_length, uint32_t w = 1, uint32_t h = 1) {
  const std::string ihdr = be32(w) + be32(h) + std::string("\x08\x00\x00\x00\x00", 5);  // 8-bit gray
  return std::string("\x89PNG\r\n\x1a\n", 8) + chunk("IHDR", ihdr, 13) + chunk("IDAT", idat, idat_length) +
         chunk("IEND", "", 0);
}
}  // namespace image_bombs

inline std::string idat_claim_png() { return image_bombs::png(std::string("\x78\x01\x00\x00", 4), 0x7fffff00u); }
inline std::string huge_png() { return image_bombs::png(std::string("\x78\x01\x00\x00", 4), 4, 16384, 4096); }

inline std::string progressive_jpeg_with_undefined_table() {
  std::string j(kGrayProgressiveJpeg, sizeof kGrayProgressiveJpeg - 1);
  const size_t second_scan = j.find("\xff\xda", j.find("\xff\xda") + 2);
  j[second_scan + 6] = '\x01';  // Ns = 1: component 1, then its tables: DC 0, AC 1 (the file defines AC 0 only)
  return j;
}

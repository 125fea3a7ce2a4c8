// JPEG and PNG bytes to an 8-bit image, with stb_image (baseline and progressive JPEG, Adobe CMYK/YCCK,
// PNG of any bit depth; no arithmetic-coded or 12-bit JPEG). Grayscale, gray+alpha, RGBA and CMYK sources
// all become `channels` (3: RGB, gray replicated; 1: luma), as stb's req_comp does.
//
// The dimensions are read from the header and checked against DecodeLimits before anything is decoded,
// and every allocation stb makes is capped from them and the file's size (data/stb_alloc.h), so a corrupt
// or hostile file cannot make us allocate gigabytes.
//
// A data set of a million images may hold a few bad ones: try_decode_image() returns false with the
// reason, so a loader can skip the sample and count it; decode_image() throws a UserError instead.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/image.h"

struct DecodeLimits {
  int max_side = 16384;                   // pixels, either side (stb's own limit is 2^24)
  int64_t max_pixels = int64_t(1) << 26;  // 64 Mpix = 192 MB as RGB: 16 decoding threads stay within 3 GB
};

// Decodes `size` bytes to `out` (channels 1 or 3). On failure returns false, leaves `out` empty and sets
// `why` to the reason ("not a JPEG or PNG image", stb's "bad huffman code", "4000000 x 3 pixels is over
// the 16384-pixel side limit", ...).
bool try_decode_image(const void* data, size_t size, int channels, Image* out, std::string* why,
                      const DecodeLimits& limits = {});

// True for a 3-component JPEG that stores RGB rather than YCbCr, as stb_image tells them apart: component ids
// 'R', 'G', 'B', or an Adobe APP14 marker with colour transform 0 and no JFIF marker. Decoders that assume
// YCbCr (data/nvjpeg_decoder) leave these to stb.
bool jpeg_codes_rgb(const void* data, size_t size);

// Same, but a failure is a UserError naming `what` (a file or tar member) and the reason.
Image decode_image(const void* data, size_t size, int channels, const std::string& what,
                   const DecodeLimits& limits = {});

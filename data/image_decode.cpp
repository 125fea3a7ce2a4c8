#include "data/image_decode.h"

#include <stb/stb_image.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "common/error.h"
#include "data/stb_alloc.h"

namespace {
// JPEG: FF D8 FF; PNG: 89 'P' 'N' 'G'. Checked first so that other bytes get a clear reason.
bool looks_like_jpeg_or_png(const uint8_t* p, size_t n) {
  if (n >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF) return true;
  return n >= 8 && std::memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0;
}

// Checks stb_image 2.27 (Debian 12's) does not make: it copies a DHT table's codes into fixed arrays of 256
// without checking their count, so a corrupt or hostile JPEG could overwrite memory; and a scan may name a
// Huffman table no DHT defined, which stb then reads uninitialised (out of bounds reads; both found by
// tests/fuzz/fuzz_image.cpp). Walks the markers, skipping entropy-coded data; returns the reason, or "".
std::string check_jpeg_tables(const uint8_t* p, size_t n) {
  bool defined[2][4] = {};  // [DC, AC][table id]
  bool progressive = false;
  for (size_t i = 2; i + 4 <= n;) {
    if (p[i] != 0xFF || p[i + 1] == 0xFF) {  // scan data, or fill bytes before a marker
      i++;
      continue;
    }
    const uint8_t m = p[i + 1];
    if (m == 0x00 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {  // stuffed 0xFF, TEM, RSTn: no length
      i += 2;
      continue;
    }
    if (m == 0xD9) break;  // EOI
    // As stb reads a segment: the declared length, bytes past the end of the file read as 0.
    const size_t len = size_t(p[i + 2]) << 8 | p[i + 3];
    auto at = [&](size_t k) -> uint8_t { return k < n ? p[k] : 0; };
    if (m == 0xC2) progressive = true;
    for (size_t t = i + 4; m == 0xC4 && t < i + 2 + len;) {  // DHT: tables while the length lasts
      size_t codes = 0;
      for (size_t k = t + 1; k <= t + 16; k++) codes += at(k);
      if (codes > 256) return str_cat("corrupt JPEG (a Huffman table with ", codes, " codes; at most 256 exist)");
      if ((at(t) >> 4) <= 1 && (at(t) & 15) <= 3) defined[at(t) >> 4][at(t) & 15] = true;
      t += 17 + codes;
    }
    if (m == 0xDA) {  // SOS: Ns, then (component, DC table << 4 | AC table) each, then Ss, Se, Ah << 4 | Al
      const size_t ns = at(i + 4), ss = at(i + 5 + 2 * ns), ah = at(i + 7 + 2 * ns) >> 4;
      const bool dc = !progressive || (ss == 0 && ah == 0), ac = !progressive || ss > 0;  // tables the scan reads
      for (size_t c = 0; c < ns; c++) {
        const uint8_t tables = at(i + 6 + 2 * c);
        if ((dc && (tables >> 4) <= 3 && !defined[0][tables >> 4]) ||
            (ac && (tables & 15) <= 3 && !defined[1][tables & 15]))
          return "corrupt JPEG (a scan uses a Huffman table that no DHT segment defines)";
      }
    }
    i += 2 + len;
  }
  return "";
}

// What stb may allocate for a w x h image from `size` bytes: one buffer at most 8 bytes per pixel (16-bit
// RGBA; JPEG planes padded to whole MCUs, hence the 32), plus 1 MiB; a buffer grown at most to twice that,
// and never past 2,100 times the file (deflate expands at most 1,032 times; the growth doubles).
StbAllocLimit alloc_limit(int w, int h, size_t size) {
  StbAllocLimit l;
  const size_t slack = size_t(1) << 20;
  l.malloc_bytes = 8 * (size_t(w) + 32) * (size_t(h) + 32) + slack;
  l.realloc_bytes = std::min(2 * l.malloc_bytes, 2100 * size + slack);
  return l;
}
}  // namespace

bool jpeg_codes_rgb(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  bool jfif = false;
  int transform = -1, components = 0, rgb_ids = 0;
  // The markers before the first scan; each segment: FF, marker, 2-byte length (itself included), payload.
  for (size_t i = 2; i + 4 <= size && p[i] == 0xFF;) {
    const uint8_t m = p[i + 1];
    if (m == 0xFF) {  // fill byte
      i++;
      continue;
    }
    if (m == 0xDA || m == 0xD9) break;  // SOS, EOI
    const size_t len = size_t(p[i + 2]) << 8 | p[i + 3], at = i + 4;
    if (m == 0xE0 && len >= 7 && at + 5 <= size && std::memcmp(p + at, "JFIF", 5) == 0) jfif = true;
    if (m == 0xEE && len >= 14 && at + 12 <= size && std::memcmp(p + at, "Adobe", 6) == 0) transform = p[at + 11];
    if (m >= 0xC0 && m <= 0xC2 && at + 6 <= size) {  // SOF: precision, height, width, components, (id, hv, tq)...
      components = p[at + 5];
      rgb_ids = 0;
      for (size_t k = 0; k < 3 && at + 6 + 3 * k < size; k++) rgb_ids += p[at + 6 + 3 * k] == "RGB"[k];
    }
    i += 2 + len;
  }
  return components == 3 && (rgb_ids == 3 || (transform == 0 && !jfif));
}

bool try_decode_image(const void* data, size_t size, int channels, Image* out, std::string* why,
                      const DecodeLimits& limits) {
  CHECK(channels == 1 || channels == 3);
  *out = Image();
  const auto* bytes = static_cast<const uint8_t*>(data);
  if (size > size_t(INT_MAX)) {
    *why = str_cat(size, " bytes is over stb_image's 2 GB limit");
    return false;
  }
  if (!looks_like_jpeg_or_png(bytes, size)) {
    *why = size == 0 ? "empty file" : "not a JPEG or PNG image";
    return false;
  }
  if (bytes[0] == 0xFF) {  // before stb reads any table, stbi_info included
    *why = check_jpeg_tables(bytes, size);
    if (!why->empty()) return false;
  }
  int w = 0, h = 0, c = 0;
  ScopedStbAllocLimit header_limit(alloc_limit(1, 1, size));  // the header alone needs little
  if (!stbi_info_from_memory(bytes, int(size), &w, &h, &c)) {
    *why = str_cat("unreadable header (stb_image: ", stbi_failure_reason(), ")");
    return false;
  }
  if (w > limits.max_side || h > limits.max_side || int64_t(w) * h > limits.max_pixels) {
    *why = str_cat(w, " x ", h, " pixels is over the limit (", limits.max_side, " per side, ", limits.max_pixels,
                   " in all)");
    return false;
  }
  // PNG data is deflated, which expands at most 1,032 times: a smaller file cannot hold the pixels (1 bit
  // each at least, and a filter byte per row) and would only make stb allocate them.
  if (bytes[0] == 0x89 && int64_t(h) * (1 + (int64_t(w) + 7) / 8) > 1032 * int64_t(size)) {
    *why = str_cat(w, " x ", h, " pixels cannot come from a ", size, "-byte PNG (deflate expands at most 1032 times)");
    return false;
  }
  ScopedStbAllocLimit limit(alloc_limit(w, h, size));
  std::unique_ptr<uint8_t, void (*)(void*)> px(stbi_load_from_memory(bytes, int(size), &w, &h, &c, channels),
                                               stbi_image_free);
  if (!px) {
    *why = str_cat("corrupt or truncated image (stb_image: ", stbi_failure_reason(), ")");
    return false;
  }
  *out = Image(w, h, channels);
  std::memcpy(out->pixels.data(), px.get(), out->pixels.size());
  return true;
}

Image decode_image(const void* data, size_t size, int channels, const std::string& what, const DecodeLimits& limits) {
  Image img;
  std::string why;
  if (!try_decode_image(data, size, channels, &img, &why, limits))
    user_error("cannot decode image '", what, "': ", why, "; re-encode it as JPEG or PNG or remove it.");
  return img;
}

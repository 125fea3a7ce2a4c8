// Decoding JPEG and PNG bytes written by stb_image_write: exact PNG round trips, gray and RGBA sources to
// RGB, JPEG within its loss, and bad bytes refused with a reason (before decoding, for absurd sizes; with
// a bounded allocation for streams that would grow without end).
#include "data/image_decode.h"
#include "data/image_encode.h"
#include "tests/image_bombs.h"
#include "tests/jpeg_samples.h"
#include "tests/test_util.h"

namespace {
Image gradient(int w, int h, int c) {
  Image img(w, h, c);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int k = 0; k < c; k++) img.at(x, y, k) = uint8_t((x * 37 + y * 11 + k * 80) % 256);
  return img;
}

std::string why_not(const std::string& bytes, int channels = 3, const DecodeLimits& limits = {}) {
  Image img;
  std::string why;
  if (try_decode_image(bytes.data(), bytes.size(), channels, &img, &why, limits)) return "decoded";
  EXPECT_TRUE(img.pixels.empty());
  return why;
}
}  // namespace

TEST(ImageDecode, PngRoundTripIsExact) {
  const Image src = gradient(7, 5, 3);
  const std::string png = encode_png(src);
  const Image got = decode_image(png.data(), png.size(), 3, "x.png");
  EXPECT_EQ(got.width, 7);
  EXPECT_EQ(got.height, 5);
  EXPECT_EQ(got.channels, 3);
  EXPECT_EQ(got.pixels, src.pixels);
}

TEST(ImageDecode, GrayBecomesRgbAndRgbaLosesAlpha) {
  const Image gray = gradient(6, 4, 1);
  for (const std::string& bytes : {encode_png(gray), encode_jpeg(gray, 95)}) {
    const Image rgb = decode_image(bytes.data(), bytes.size(), 3, "gray");
    ASSERT_EQ(rgb.channels, 3);
    const Image one = decode_image(bytes.data(), bytes.size(), 1, "gray");
    ASSERT_EQ(one.channels, 1);
    for (int y = 0; y < 4; y++)
      for (int x = 0; x < 6; x++) {
        EXPECT_EQ(rgb.at(x, y, 0), one.at(x, y, 0));  // replicated, exactly
        EXPECT_EQ(rgb.at(x, y, 1), one.at(x, y, 0));
        EXPECT_EQ(rgb.at(x, y, 2), one.at(x, y, 0));
      }
  }
  // The PNG is lossless: the gray values themselves come back.
  const std::string png = encode_png(gray);
  EXPECT_EQ(decode_image(png.data(), png.size(), 1, "g").pixels, gray.pixels);
  Image rgba = gradient(3, 2, 4);
  const std::string png4 = encode_png(rgba);
  const Image rgb = decode_image(png4.data(), png4.size(), 3, "rgba");
  for (int y = 0; y < 2; y++)
    for (int x = 0; x < 3; x++)
      for (int c = 0; c < 3; c++) EXPECT_EQ(rgb.at(x, y, c), rgba.at(x, y, c));
}

TEST(ImageDecode, OneComponentAndProgressiveJpegs) {
  const std::string base(kGrayJpeg, sizeof kGrayJpeg - 1), prog(kGrayProgressiveJpeg, sizeof kGrayProgressiveJpeg - 1);
  const Image one = decode_image(base.data(), base.size(), 1, "gray.jpg");
  const Image rgb = decode_image(base.data(), base.size(), 3, "gray.jpg");
  ASSERT_EQ(one.width, 8);
  ASSERT_EQ(one.height, 8);
  for (int y = 0; y < 8; y++)
    for (int x = 0; x < 8; x++) {
      EXPECT_NEAR(one.at(x, y, 0), 16 * x + 8 * y + 10, 2) << x << "," << y;
      for (int c = 0; c < 3; c++) EXPECT_EQ(rgb.at(x, y, c), one.at(x, y, 0));
    }
  // Progressive coding stores the same coefficients: the same pixels.
  EXPECT_EQ(decode_image(prog.data(), prog.size(), 1, "prog.jpg").pixels, one.pixels);
  EXPECT_NE(prog, base);
}

TEST(ImageDecode, JpegIsCloseToItsSource) {
  Image src(32, 24, 3);
  for (int y = 0; y < 24; y++)
    for (int x = 0; x < 32; x++) {
      src.at(x, y, 0) = 200;
      src.at(x, y, 1) = uint8_t(x < 16 ? 40 : 120);  // flat areas: JPEG keeps them within a few levels
      src.at(x, y, 2) = 90;
    }
  const std::string jpg = encode_jpeg(src, 95);
  ASSERT_EQ(uint8_t(jpg[0]), 0xFF);
  const Image got = decode_image(jpg.data(), jpg.size(), 3, "x.jpg");
  ASSERT_EQ(got.width, 32);
  ASSERT_EQ(got.height, 24);
  for (int c = 0; c < 3; c++) {
    EXPECT_NEAR(got.at(3, 3, c), src.at(3, 3, c), 3) << c;
    EXPECT_NEAR(got.at(28, 20, c), src.at(28, 20, c), 3) << c;
  }
}

TEST(ImageDecode, BadBytesGiveAReason) {
  EXPECT_EQ(why_not(""), "empty file");
  EXPECT_EQ(why_not("GIF89a......"), "not a JPEG or PNG image");
  const std::string jpg = encode_jpeg(gradient(40, 30, 3), 90), png = encode_png(gradient(40, 30, 3));
  EXPECT_EQ(why_not(jpg), "decoded");
  EXPECT_NE(why_not(jpg.substr(0, 3)).find("unreadable header"), std::string::npos);
  EXPECT_NE(why_not(png.substr(0, 60)).find("corrupt or truncated image (stb_image: "), std::string::npos);
  // A JPEG cut after its headers: the header reads, the image does not.
  const size_t sos = jpg.find("\xFF\xDA");
  ASSERT_NE(sos, std::string::npos);
  EXPECT_NE(why_not(jpg.substr(0, sos)).find("corrupt or truncated image"), std::string::npos);
  expect_user_error([&] { decode_image("nope", 4, 3, "shard-0003.tar:000017.jpg"); },
                    "cannot decode image 'shard-0003.tar:000017.jpg': not a JPEG or PNG image; re-encode");
}

// stb_image 2.27 copies a Huffman table's codes into arrays of 256 without checking the count: a table
// claiming more is refused before stb reads it, also when the file ends inside the table (stb reads
// missing bytes as 0, as the check does).
TEST(ImageDecode, OversizedHuffmanTablesAreRefused) {
  const std::string good(kGrayJpeg, sizeof kGrayJpeg - 1);
  const size_t dht = good.find("\xFF\xC4");
  ASSERT_NE(dht, std::string::npos);
  std::string bad = good;
  for (size_t k = 0; k < 16; k++) bad[dht + 5 + k] = char(0x20);  // 16 lengths x 32 codes
  EXPECT_EQ(why_not(bad), "corrupt JPEG (a Huffman table with 512 codes; at most 256 exist)");
  bad = good.substr(0, dht + 5) + std::string(8, char(0x40));  // cut inside the counts: 8 x 64
  EXPECT_EQ(why_not(bad), "corrupt JPEG (a Huffman table with 512 codes; at most 256 exist)");
  EXPECT_EQ(why_not(good), "decoded");
}

// A header that claims 20000 x 30 or 16000 x 16000 pixels is refused from the header alone: the bytes
// after it are a 40 x 30 image, so a decode attempt would fail differently (or allocate 768 MB first).
TEST(ImageDecode, AbsurdSizesAreRefusedBeforeDecoding) {
  std::string png = encode_png(gradient(40, 30, 3));
  auto set_be32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; i++) png[at + size_t(i)] = char((v >> (24 - 8 * i)) & 0xFF);
  };
  // PNG: 8-byte signature, IHDR length and type, then width and height (big-endian; stb skips CRCs).
  set_be32(16, 20000);
  EXPECT_EQ(why_not(png), "20000 x 30 pixels is over the limit (16384 per side, 67108864 in all)");
  set_be32(16, 16000);
  set_be32(20, 16000);
  EXPECT_EQ(why_not(png), "16000 x 16000 pixels is over the limit (16384 per side, 67108864 in all)");
  const std::string small = encode_png(gradient(100, 100, 3));
  DecodeLimits tight;
  tight.max_pixels = 5000;
  EXPECT_EQ(why_not(small, 3, tight), "100 x 100 pixels is over the limit (16384 per side, 5000 in all)");
  EXPECT_EQ(why_not(small, 3), "decoded");
}

// RGB-coded JPEGs are told apart as stb tells them: an Adobe APP14 marker with colour transform 0 and no
// JFIF marker (stb then keeps the components as R, G, B), or components named 'R', 'G', 'B'.
TEST(ImageDecode, RgbCodedJpegsAreRecognised) {
  const std::string jpg = encode_jpeg(gradient(16, 8, 3), 95);
  ASSERT_EQ(jpg.substr(2, 4), std::string("\xFF\xE0\x00\x10", 4));  // stb writes a JFIF APP0 first
  const std::string jfif = jpg.substr(2, 18), rest = jpg.substr(20);
  // Adobe's APP14 segment: marker, length 14, "Adobe\0", version, flags0, flags1, then the colour transform.
  const char app14[] = {'\xFF', '\xEE', 0, 14, 'A', 'd', 'o', 'b', 'e', 0, 100, 0, 0, 0, 0};
  auto adobe = [&](char transform) { return std::string(app14, sizeof app14) + transform; };
  EXPECT_FALSE(jpeg_codes_rgb(jpg.data(), jpg.size()));
  const std::string rgb = "\xFF\xD8" + adobe(0) + rest, ycc = "\xFF\xD8" + adobe(1) + rest,
                    both = "\xFF\xD8" + jfif + adobe(0) + rest;
  EXPECT_TRUE(jpeg_codes_rgb(rgb.data(), rgb.size()));
  EXPECT_FALSE(jpeg_codes_rgb(ycc.data(), ycc.size()));
  EXPECT_FALSE(jpeg_codes_rgb(both.data(), both.size()));  // JFIF means YCbCr
  // stb agrees: transform 0 decodes to other pixels than transform 1 (the YCbCr reading, the original's).
  EXPECT_EQ(decode_image(ycc.data(), ycc.size(), 3, "ycc").pixels, decode_image(jpg.data(), jpg.size(), 3, "j").pixels);
  EXPECT_NE(decode_image(rgb.data(), rgb.size(), 3, "rgb").pixels, decode_image(jpg.data(), jpg.size(), 3, "j").pixels);
  // Components named R, G, B (stb_image_write numbers them 1, 2, 3).
  std::string named = jpg;
  const size_t sof = named.find("\xFF\xC0");
  ASSERT_NE(sof, std::string::npos);
  for (size_t k = 0; k < 3; k++) named[sof + 10 + 3 * k] = "RGB"[k];
  EXPECT_TRUE(jpeg_codes_rgb(named.data(), named.size()));
  const std::string gray(kGrayJpeg, sizeof kGrayJpeg - 1), png = encode_png(gradient(4, 4, 3));
  EXPECT_FALSE(jpeg_codes_rgb(gray.data(), gray.size()));
  EXPECT_FALSE(jpeg_codes_rgb(png.data(), png.size()));
  EXPECT_FALSE(jpeg_codes_rgb(rgb.data(), 9));  // cut short
}

// The 76-byte PNG made stb 2.27 grow a buffer to 2 GiB for an IDAT chunk that claimed 2 GB; a
// header of 16384 x 4096 pixels with 4 bytes of data made it allocate its 64 MB output. stb's allocations
// are now capped from the header's size and the file's (data/stb_alloc.h), and a PNG too short for its
// size is refused before decoding: neither allocates.
TEST(ImageDecode, HostileStreamsAreRefusedBeforeTheyAllocate) {
  const std::string claim = idat_claim_png(), huge = huge_png();
  EXPECT_LT(claim.size(), 80u);
  EXPECT_EQ(why_not(claim, 1), "corrupt or truncated image (stb_image: outofmem)") << "refused before it was read";
  EXPECT_EQ(why_not(huge), "16384 x 4096 pixels cannot come from a 61-byte PNG (deflate expands at most 1032 times)");
}

// Found by tests/fuzz/fuzz_image.cpp: stb 2.27 decodes a scan with a Huffman table no DHT defined, reading
// the uninitialised table out of bounds. Refused before stb sees it; the file it came from still decodes.
TEST(ImageDecode, ScansOfUndefinedHuffmanTablesAreRefused) {
  EXPECT_EQ(why_not(progressive_jpeg_with_undefined_table(), 1),
            "corrupt JPEG (a scan uses a Huffman table that no DHT segment defines)");
  EXPECT_EQ(why_not(std::string(kGrayProgressiveJpeg, sizeof kGrayProgressiveJpeg - 1), 1), "decoded");
}

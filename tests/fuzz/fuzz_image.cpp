// Fuzz target: image decoding (data/image_decode.cpp, stb_image's JPEG and PNG decoders) and the
// transforms after it. The first byte of the input chooses the channels (1 or 3) and the transform
// settings; the rest is the file. A decodable image goes through the train transform (RandomResizedCrop,
// flip, RandAugment with every op applied) and the eval transform at 16 x 16: every value must be finite.
// Seeds: small JPEGs (baseline, gray, progressive) and PNGs from make_seeds.
#include <cmath>

#include "data/augment.h"
#include "data/image_decode.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int channels = data[0] & 1 ? 3 : 1;
  DecodeLimits limits;
  limits.max_pixels = 1 << 20;  // larger images only make the runs slower
  Image img;
  std::string why;
  if (!try_decode_image(data + 1, size - 1, channels, &img, &why, limits)) {
    FUZZ_EXPECT(!why.empty() && img.pixels.empty());
    return 0;
  }
  FUZZ_EXPECT(img.width > 0 && img.height > 0 && img.channels == channels &&
              img.pixels.size() == size_t(img.width) * size_t(img.height) * size_t(channels));
  TrainTransformOptions train;
  train.size = 16;
  train.filter = data[0] & 2 ? Filter::kBicubic : Filter::kBilinear;
  train.use_randaugment = true;
  train.randaugment.prob = 1.0;
  train.randaugment.num_ops = 3;
  EvalTransformOptions eval;
  eval.size = 16;
  eval.filter = train.filter;
  std::vector<float> out(size_t(channels) * 16 * 16);
  Rng rng(data[0]);
  train_transform(img, train, rng, out.data(), nullptr);
  for (float v : out) FUZZ_EXPECT(std::isfinite(v) && std::fabs(v) < 10.0f);
  eval_transform(img, eval, out.data(), nullptr);
  for (float v : out) FUZZ_EXPECT(std::isfinite(v) && std::fabs(v) < 10.0f);
  return 0;
}

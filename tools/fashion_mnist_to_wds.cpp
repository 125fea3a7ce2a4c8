// fashion_mnist_to_wds: Fashion-MNIST's IDX files (data.md A2: big-endian int32 magic, count and, for
// images, rows and cols; then uint8 pixels or labels) -> WebDataset shards laid out as imagenet-1k-wds is,
// so train_vit reads this small dataset through the same tar and image code as ImageNet: each sample is
// <key>.png (28x28 grayscale, written by stb_image_write) and <key>.cls (the class 0..9 in ASCII). The
// 60,000 training images go to fashion-mnist-train-{0000..0005}.tar (10,000 each, keys
// fmnist_train_000000...), the 10,000 test images to fashion-mnist-validation-0000.tar (fmnist_test_...).
//
//   scripts/prepare_fashion_mnist.sh          (installs the Debian package, unpacks the .gz files, runs this)
//   build/fashion_mnist_to_wds -i <folder with the four unpacked IDX files> --out data/fashion_mnist
//
// Both files of a split are checked (magic, counts, 28x28 images, file sizes, labels < 10) before a shard
// is written; each shard is written atomically (data/tar_writer.h).
#include <stb/stb_image_write.h>  // the implementation is data/stb_write_impl.cpp's (libhost.a)

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/error.h"
#include "data/tar_writer.h"

namespace {
constexpr int kSide = 28, kClasses = 10;

struct Split {
  int64_t count = 0;
  std::vector<uint8_t> pixels;  // count x 28 x 28, row-major
  std::vector<uint8_t> labels;
};

std::vector<uint8_t> read_whole(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    user_error("cannot read '", path,
               "'; scripts/prepare_fashion_mnist.sh unpacks the IDX files into a folder for -i.");
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

uint32_t big_endian(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

// The IDX header: magic and `dims` sizes; returns the bytes after it. UserError for anything unexpected.
std::vector<uint8_t> read_idx(const std::string& path, uint32_t magic, int dims, std::vector<uint32_t>* sizes) {
  std::vector<uint8_t> d = read_whole(path);
  const size_t header = 4 + 4 * size_t(dims);
  if (d.size() >= 2 && d[0] == 0x1f && d[1] == 0x8b)
    user_error("'", path, "' is still gzip-compressed; unpack it first (gzip -dc file.gz > file).");
  if (d.size() < header) user_error("'", path, "' is ", d.size(), " bytes, too short for an IDX header.");
  char want[16], got[16];
  std::snprintf(want, sizeof want, "0x%08x", magic);
  std::snprintf(got, sizeof got, "0x%08x", big_endian(d.data()));
  if (big_endian(d.data()) != magic)
    user_error("'", path, "' has magic ", got, " but an IDX ", dims == 3 ? "image" : "label", " file has ", want,
               "; check that -i holds the Fashion-MNIST files under their own names.");
  sizes->clear();
  for (int i = 0; i < dims; i++) sizes->push_back(big_endian(d.data() + 4 + 4 * i));
  return std::vector<uint8_t>(d.begin() + long(header), d.end());
}

Split read_split(const std::string& images_path, const std::string& labels_path) {
  std::vector<uint32_t> is, ls;
  Split s;
  s.pixels = read_idx(images_path, 0x00000803, 3, &is);
  s.labels = read_idx(labels_path, 0x00000801, 1, &ls);
  if (is[1] != kSide || is[2] != kSide)
    user_error("'", images_path, "' holds ", is[1], "x", is[2], " images; Fashion-MNIST's are 28x28.");
  if (is[0] != ls[0])
    user_error("'", images_path, "' holds ", is[0], " images but '", labels_path, "' ", ls[0],
               " labels; they must be the same split.");
  s.count = is[0];
  if (s.count == 0) user_error("'", images_path, "' holds no images.");
  if (int64_t(s.pixels.size()) != s.count * kSide * kSide)
    user_error("'", images_path, "' has ", s.pixels.size(), " bytes of pixels where its header promises ", s.count,
               " images of 784; the file is truncated or corrupt.");
  if (int64_t(s.labels.size()) != s.count)
    user_error("'", labels_path, "' has ", s.labels.size(), " labels where its header promises ", s.count,
               "; the file is truncated or corrupt.");
  for (int64_t i = 0; i < s.count; i++)
    if (s.labels[size_t(i)] >= kClasses)
      user_error("'", labels_path, "' has label ", int(s.labels[size_t(i)]), " at index ", i,
                 "; Fashion-MNIST's classes are 0 to 9.");
  return s;
}

void append_bytes(void* context, void* data, int size) {
  auto* out = static_cast<std::string*>(context);
  out->append(static_cast<const char*>(data), size_t(size));
}

std::string png_of(const uint8_t* pixels) {
  std::string png;
  if (!stbi_write_png_to_func(append_bytes, &png, kSide, kSide, 1, pixels, kSide))
    user_error("stb_image_write could not encode a PNG (out of memory?).");
  return png;
}

// Writes `s` as shards <out>/<name>-0000.tar, ... of `per_shard` samples, keys <key_prefix>000000, ...
int write_shards(const Split& s, const std::string& out, const std::string& name, const std::string& key_prefix,
                 int64_t per_shard) {
  int shards = 0;
  for (int64_t first = 0; first < s.count; first += per_shard, shards++) {
    char file[64];
    std::snprintf(file, sizeof file, "/%s-%04d.tar", name.c_str(), shards);
    TarWriter w(out + file);
    for (int64_t i = first; i < std::min(s.count, first + per_shard); i++) {
      char key[64];
      std::snprintf(key, sizeof key, "%s%06lld", key_prefix.c_str(), (long long)i);
      w.add(std::string(key) + ".png", png_of(s.pixels.data() + i * kSide * kSide));
      w.add(std::string(key) + ".cls", std::to_string(int(s.labels[size_t(i)])));
    }
    w.commit();
  }
  return shards;
}
}  // namespace

int main(int argc, char** argv) {
  std::string in_dir, out_dir = "data/fashion_mnist";
  int64_t per_shard = 10000;
  Cli cli("fashion_mnist_to_wds",
          "Writes Fashion-MNIST's IDX files as WebDataset tar shards (PNG + class index, imagenet-1k-wds layout).");
  cli.add('i', "input", &in_dir, "folder with the unpacked train-/t10k- images and labels IDX files");
  cli.add(0, "out", &out_dir, "output folder (created if missing)");
  cli.add(0, "shard-size", &per_shard, "samples per shard");
  try {
    if (!cli.parse(argc, argv)) return 0;
    if (in_dir.empty()) user_error("give the folder of unpacked IDX files with -i; see --help.");
    if (per_shard < 1 || per_shard > 1000000) user_error("--shard-size must be in [1, 1000000].");
    const Split train = read_split(in_dir + "/train-images-idx3-ubyte", in_dir + "/train-labels-idx1-ubyte");
    const Split test = read_split(in_dir + "/t10k-images-idx3-ubyte", in_dir + "/t10k-labels-idx1-ubyte");
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    if (ec) user_error("cannot create the output folder '", out_dir, "': ", ec.message(), ".");
    const int n_train = write_shards(train, out_dir, "fashion-mnist-train", "fmnist_train_", per_shard);
    const int n_val = write_shards(test, out_dir, "fashion-mnist-validation", "fmnist_test_", per_shard);
    std::printf(
        "fashion_mnist_to_wds: %lld training images in %d shard(s), %lld validation images in %d shard(s), in %s\n",
        (long long)train.count, n_train, (long long)test.count, n_val, out_dir.c_str());
  } catch (const UserError& e) {
    std::fprintf(stderr, "fashion_mnist_to_wds: %s\n", e.what());
    return 1;
  }
  return 0;
}

// bench_augment: one core's speed at decoding JPEG/PNG files and turning them into ViT inputs, the CPU side
// of train_vit's data pipeline. Reads every file into memory first, then times, over a few passes:
//   decode (stb_image to RGB), train (RandomResizedCrop + flip [+ RandAugment] + normalise to size x size floats),
//   eval (resize + centre crop + normalise), and decode + train together,
// and prints one JSON line per measurement (images per second on this one thread).
// --dump DIR writes the first few train and eval inputs back as PNGs (mean and std undone), to look at.
//
//   build/bench_augment -i "imagenet_like/stage/*.jpg" --passes 3
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "common/cli.h"
#include "common/error.h"
#include "common/tool_errors.h"
#include "data/augment.h"
#include "data/image_decode.h"
#include "data/image_encode.h"
#include "data/token_shards.h"

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void print(const char* what, int64_t images, double seconds, const std::string& extra) {
  std::printf(
      "{\"bench\": \"augment\", \"stage\": \"%s\", \"images\": %lld, \"seconds\": %.3f, \"img_per_s\": %.1f%s}\n", what,
      (long long)images, seconds, images / seconds, extra.c_str());
}

// A normalised (3, size, size) input back to an 8-bit RGB image.
Image to_image(const std::vector<float>& chw, int size, const Normalize& n) {
  Image img(size, size, 3);
  for (int c = 0; c < 3; c++)
    for (int y = 0; y < size; y++)
      for (int x = 0; x < size; x++) {
        const float v = (chw[size_t((c * size + y) * size + x)] * n.std[c] + n.mean[c]) * 255.0f;
        img.at(x, y, c) = uint8_t(std::lround(std::fmin(std::fmax(v, 0.0f), 255.0f)));
      }
  return img;
}

void write_png(const std::string& path, const Image& img) {
  const std::string png = encode_png(img);
  std::ofstream f(path, std::ios::binary);
  f.write(png.data(), std::streamsize(png.size()));
  f.close();
  if (!f) user_error("cannot write '", path, "'; check that the folder exists and is writable.");
}
// The files of every -i pattern, read into memory (bytes) and, by decode_all, decoded once (images).
struct Files {
  std::vector<std::string> names, bytes;
  std::vector<Image> images;
};

Files read_files(const std::vector<std::string>& inputs) {
  Files f;
  for (const std::string& p : inputs)
    for (const std::string& name : glob_files(p)) f.names.push_back(name);
  if (f.names.empty()) user_error("no images given; pass them with -i (files or glob patterns).");
  for (const std::string& name : f.names) {
    std::ifstream in(name, std::ios::binary);
    f.bytes.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return f;
}

// Decodes every file into f.images; returns the JSON fields that describe the files (count, mean size).
std::string decode_all(Files& f) {
  f.images.resize(f.names.size());
  double mb = 0, pixels = 0;
  for (size_t i = 0; i < f.names.size(); i++) {
    f.images[i] = decode_image(f.bytes[i].data(), f.bytes[i].size(), 3, f.names[i]);
    mb += double(f.bytes[i].size()) / 1e6;
    pixels += double(f.images[i].width) * f.images[i].height;
  }
  return str_cat(", \"files\": ", f.names.size(), ", \"mean_kb\": ", 1000 * mb / double(f.names.size()),
                 ", \"mean_mpix\": ", pixels / 1e6 / double(f.names.size()));
}

// The four measurements, each over `passes` passes of every file; augmentations draw from the (pass, file)
// stream, as the image loader's do.
void time_stages(const Files& f, const TrainTransformOptions& train, const EvalTransformOptions& eval, int passes,
                 const std::string& extra, std::vector<float>& out, AugmentScratch& scratch) {
  const size_t files = f.names.size();
  const int64_t n = int64_t(files) * passes;
  double t = now();
  Image img;
  std::string why;
  for (int p = 0; p < passes; p++)
    for (size_t i = 0; i < files; i++) CHECK(try_decode_image(f.bytes[i].data(), f.bytes[i].size(), 3, &img, &why));
  print("decode", n, now() - t, extra);
  t = now();
  for (int p = 0; p < passes; p++)
    for (size_t i = 0; i < files; i++) {
      Rng rng = Rng::derive(0, RngStream::kAugment, uint64_t(p), i);
      train_transform(f.images[i], train, rng, out.data(), &scratch);
    }
  print("train_transform", n, now() - t, extra);
  t = now();
  for (int p = 0; p < passes; p++)
    for (size_t i = 0; i < files; i++) eval_transform(f.images[i], eval, out.data(), &scratch);
  print("eval_transform", n, now() - t, extra);
  t = now();
  for (int p = 0; p < passes; p++)
    for (size_t i = 0; i < files; i++) {
      CHECK(try_decode_image(f.bytes[i].data(), f.bytes[i].size(), 3, &img, &why));
      Rng rng = Rng::derive(0, RngStream::kAugment, uint64_t(p), i);
      train_transform(img, train, rng, out.data(), &scratch);
    }
  print("decode+train_transform", n, now() - t, extra);
}

// --dump: the first 8 files' train (pass 0) and eval inputs as PNGs.
void dump_inputs(const std::string& dump, const Files& f, const TrainTransformOptions& train,
                 const EvalTransformOptions& eval, int size, std::vector<float>& out, AugmentScratch& scratch) {
  for (size_t i = 0; !dump.empty() && i < std::min<size_t>(8, f.names.size()); i++) {
    Rng rng = Rng::derive(0, RngStream::kAugment, 0, i);
    train_transform(f.images[i], train, rng, out.data(), &scratch);
    write_png(dump + str_cat("/train_", i, ".png"), to_image(out, size, train.norm));
    eval_transform(f.images[i], eval, out.data(), &scratch);
    write_png(dump + str_cat("/eval_", i, ".png"), to_image(out, size, eval.norm));
  }
}
}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> inputs;
  std::string dump, randaugment;
  int passes = 3, size = 224;
  Cli cli("bench_augment", "Single-thread speed of JPEG/PNG decoding and the ViT train/eval transforms (JSON lines).");
  cli.add('i', "input", &inputs, "image file or glob pattern (repeatable)");
  cli.add(0, "passes", &passes, "passes over the files per measurement");
  cli.add(0, "size", &size, "output size (pixels per side)");
  cli.add(0, "randaugment", &randaugment,
          "timm RandAugment spec for the train transform, e.g. rand-m9-mstd0.5-inc1 (empty: none)");
  cli.add(0, "dump", &dump, "folder to write the first 8 train and eval inputs to as PNG (empty: none)");
  try {
    if (!cli.parse(argc, argv)) return 0;
    if (passes < 1) user_error("--passes must be >= 1 (got ", passes, ").");
    Files files = read_files(inputs);
    TrainTransformOptions train;
    train.size = size;
    EvalTransformOptions eval;
    eval.size = size;
    if (!randaugment.empty()) {
      train.use_randaugment = true;
      train.randaugment = parse_randaugment(randaugment);
    }
    check_options(train);
    AugmentScratch scratch;
    std::vector<float> out(size_t(3 * size * size));
    const std::string extra = decode_all(files);
    time_stages(files, train, eval, passes, extra, out, scratch);
    dump_inputs(dump, files, train, eval, size, out, scratch);
  } catch (...) {
    return report_tool_error("bench_augment");
  }
  return 0;
}

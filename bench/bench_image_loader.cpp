// bench_image_loader: the data pipeline of train_vit on its own: WebDataset shards read, decoded and
// augmented by the image loader's threads into 8-bit batches (what train_vit copies to the GPU), timed
// over whole batches after a warm-up. One JSON line per thread count.
//
//   build/bench_image_loader -i "imagenet_like/imagenet1k-train-{0000..0009}.tar" --threads 16,8 -x 40
#include <chrono>
#include <cstdio>
#include <sstream>

#include "common/cli.h"
#include "common/error.h"
#include "data/image_loader.h"

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void run(const std::vector<std::string>& shards, ImageLoaderOptions o, int batches, int warmup) {
  ImageLoader loader(shards, o);
  const ImageLoaderOptions& lo = loader.options();
  std::vector<uint8_t> px(size_t(lo.batch) * lo.size * lo.size * lo.channels);
  std::vector<int32_t> y(size_t(lo.batch));
  std::vector<float> soft(size_t(lo.batch) * lo.classes);
  ImageMix mix;
  double t0 = 0;
  for (int i = 0; i < warmup + batches; i++) {
    if (i == warmup) t0 = now();
    loader.next({px.data(), y.data(), soft.data(), &mix});
  }
  const double s = now() - t0;
  std::printf(
      "{\"bench\": \"image_loader\", \"threads\": %d, \"batch\": %d, \"size\": %d, \"randaugment\": %s, \"images\": "
      "%lld, "
      "\"seconds\": %.3f, \"img_per_s\": %.1f, \"skipped\": %lld}\n",
      o.threads, lo.batch, lo.size, o.train_tf.use_randaugment ? "true" : "false", (long long)batches * lo.batch, s,
      batches * lo.batch / s, (long long)loader.skipped());
  std::fflush(stdout);
}
}  // namespace

int main(int argc, char** argv) {
  std::string input, threads = "0", randaugment;
  int batch = 256, size = 224, classes = 1000, batches = 20, warmup = 2;
  int64_t shuffle = 2000;
  Cli cli("bench_image_loader", "Times train_vit's data pipeline (shards -> decoded, augmented 8-bit batches).");
  cli.add('i', "train", &input, "shards: a brace pattern or a glob");
  cli.add(0, "threads", &threads, "comma-separated decoding thread counts (0 = one per hardware thread)");
  cli.add('b', "batch", &batch, "images per batch");
  cli.add(0, "image", &size, "output side in pixels");
  cli.add(0, "classes", &classes, "labels must be below this");
  cli.add('x', "steps", &batches, "timed batches");
  cli.add(0, "untimed", &warmup, "batches before the timing starts");
  cli.add(0, "shuffle", &shuffle, "shuffle buffer in samples");
  cli.add(0, "randaugment", &randaugment, "timm's RandAugment string; empty = off");
  try {
    if (!cli.parse(argc, argv)) return 0;
    if (input.empty()) user_error("-i (the shards) is required.");
    if (batches < 1 || warmup < 0) user_error("-x must be >= 1 and --untimed >= 0.");
    ImageLoaderOptions o;
    o.batch = batch;
    o.size = size;
    o.classes = classes;
    o.train = true;
    o.shuffle_buffer = shuffle;
    o.train_tf.use_randaugment = !randaugment.empty();
    if (o.train_tf.use_randaugment) o.train_tf.randaugment = parse_randaugment(randaugment);
    const std::vector<std::string> shards = list_shards(input);
    std::stringstream ss(threads);
    for (std::string t; std::getline(ss, t, ',');) {
      o.threads = std::atoi(t.c_str());
      if (o.threads < 0 || t.find_first_not_of("0123456789") != std::string::npos)
        user_error("--threads must be whole numbers separated by commas (got '", threads, "').");
      run(shards, o, batches, warmup);
    }
  } catch (const UserError& e) {
    std::fprintf(stderr, "bench_image_loader: %s\n", e.what());
    return 1;
  }
  return 0;
}

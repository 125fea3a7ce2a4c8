// bench_image_loader: the data pipeline of train_vit on its own: WebDataset shards read, decoded and
// augmented into 8-bit batches (what train_vit copies to the GPU) by the image loader's threads, or with
// --decoder nvjpeg by the GPU's JPEG engine and a resize kernel (the threads take PNG and what the engine
// refuses), timed over whole batches after a warm-up. One JSON line per decoder and thread count.
//
//   build/bench_image_loader -i "imagenet_like/imagenet1k-train-{0000..0009}.tar" --threads 16,8 -x 40
//   build/bench_image_loader -i "..." --decoder stb,nvjpeg --threads 16
#include <chrono>
#include <cstdio>
#include <sstream>

#include "common/cli.h"
#include "common/cuda_check.h"
#include "common/error.h"
#include "common/tool_errors.h"
#include "data/image_loader.h"
#include "data/nvjpeg_decoder.h"

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> items;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) items.push_back(item);
  return items;
}

void run(const std::vector<std::string>& shards, ImageLoaderOptions o, int batches, int warmup) {
  ImageLoader loader(shards, o, make_batch_decoder(o));
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
      "{\"bench\": \"image_loader\", \"decoder\": \"%s\", \"threads\": %d, \"batch\": %d, \"size\": %d, "
      "\"randaugment\": %s, \"images\": %lld, \"seconds\": %.3f, \"img_per_s\": %.1f, \"skipped\": %lld, "
      "\"device_decoded\": %lld}\n",
      loader.decoder_name().c_str(), o.threads, lo.batch, lo.size, o.train_tf.use_randaugment ? "true" : "false",
      (long long)batches * lo.batch, s, batches * lo.batch / s, (long long)loader.skipped(),
      (long long)loader.device_decoded());
  std::fflush(stdout);
}
}  // namespace

int main(int argc, char** argv) {
  std::string input, threads = "0", randaugment, decoders = "stb";
  int batch = 256, size = 224, classes = 1000, batches = 20, warmup = 2;
  int64_t shuffle = 2000;
  Cli cli("bench_image_loader", "Times train_vit's data pipeline (shards -> decoded, augmented 8-bit batches).");
  cli.add('i', "train", &input, "shards: a brace pattern or a glob");
  cli.add(0, "threads", &threads, "comma-separated decoding thread counts (0 = one per hardware thread)");
  cli.add(0, "decoder", &decoders, "comma-separated decoders: stb, nvjpeg (the GPU's JPEG engine), auto");
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
    for (const std::string& d : split(decoders)) check_decoder_option(d);
    std::vector<int> counts;
    for (const std::string& t : split(threads)) {
      if (t.empty() || t.size() > 3 || t.find_first_not_of("0123456789") != std::string::npos ||
          std::stoi(t) > ImageLoaderOptions::kMaxThreads)
        user_error("--threads must be whole numbers from 0 to ", ImageLoaderOptions::kMaxThreads,
                   " separated by commas (got '", threads, "').");
      counts.push_back(std::stoi(t));
    }
    for (const std::string& d : split(decoders))
      for (int t : counts) {
        o.decoder = d;
        o.threads = t;
        run(shards, o, batches, warmup);
      }
  } catch (const CudaError& e) {  // the nvjpeg decoder's
    std::fprintf(stderr, "bench_image_loader: CUDA error: %s\n", e.what());
    return 2;
  } catch (...) {
    return report_tool_error("bench_image_loader");
  }
  return 0;
}

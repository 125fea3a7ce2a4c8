// train_vit: ViT pretraining on WebDataset image shards (imagenet-1k-wds's layout) with any optimizer.
//
//   scripts/prepare_fashion_mnist.sh && make train_vit && ./train_vit -o adamw   (a ViT-Ti/4 on Fashion-MNIST)
//
// The loop, top to bottom: evaluation (loss, top-1, top-5) every -v steps, checkpoints every -n steps (and
// on SIGINT/SIGTERM), then per step: micro-batches with gradient accumulation, grad-norm clipping, one
// optimizer step, one log line. Images are decoded and augmented on CPU threads (data/image_loader), or with
// --decoder nvjpeg the JPEGs by the GPU's JPEG engine (data/nvjpeg_decoder), and normalised and mixed on the
// GPU (models/vit_bf16); what every trainer shares is in train/ (the set-up: train/trainer.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <vector>

#include "common/cuda_check.h"
#include "common/digest.h"
#include "data/image_prefetcher.h"
#include "data/nvjpeg_decoder.h"
#include "models/vit_bf16.h"
#include "train/data_error.h"
#include "train/program.h"
#include "train/trainer.h"

namespace {
struct Args : TrainFlags {  // train_vit's own flags beside the shared ones
  std::string train = "data/fashion_mnist/fashion-mnist-train-{0000..0005}.tar";
  std::string val = "data/fashion_mnist/fashion-mnist-validation-0000.tar";
  std::string model = "vit-ti4", qkv = "fused", mean = "0.2860", stdev = "0.3530", randaugment, decoder = "stb";
  int image = 28, channels = 1, classes = 10, threads = 0;
  bool synthetic = false;
  int64_t shuffle = 10000;
  double mixup = 0.0, cutmix = 0.0, smoothing = 0.1, scale_min = 0.75, crop_pct = 1.0, hflip = 0.5;
  Args() {  // the Fashion-MNIST demo: 40 epochs of 60,000 images (91.4% top-1 in 45 s on an H100)
    B = 256;
    steps = 9400;
    lr = 5e-4;
    wd = 0.05;
    val_every = 940;
    val_batches = 0;
    batch_unit = "images";
    val_all = true;
    micro_batch = "-b";
    adamw_beta2 = AdamWOptions().beta2;  // torch's, as timm and DeiT train ViTs
    muon_aux_decay = true;
  }
};

void add_flags(Cli& cli, Args* a) {
  cli.section(help_section::kData);
  cli.add('i', "train", &a->train, "training shards: a brace pattern ({0000..1023}) or a glob");
  cli.add('j', "val", &a->val, "validation shards; empty = no evaluation");
  cli.add('e', "model", &a->model, "vit-ti16 | vit-s16 | vit-b16 | vit-l16 (any patch size: vit-ti4 ...) | vit-test");
  cli.add(0, "qkv", &a->qkv, "fused (timm's layout) or separate (q, k, v matrices, the PyLO paper's setting)");
  cli.add(0, "image", &a->image, "image side in pixels (a multiple of the patch size)");
  cli.add(0, "channels", &a->channels, "1 (gray) or 3 (RGB): images are decoded to this");
  cli.add(0, "classes", &a->classes, "number of classes (labels must be below it)");
  cli.add(0, "mean", &a->mean, "per-channel mean of x / 255, comma-separated (ImageNet: 0.485,0.456,0.406)");
  cli.add(0, "std", &a->stdev, "per-channel std of x / 255 (ImageNet: 0.229,0.224,0.225)");
  add_train_flags(cli, a, "adamw | adafactor | muon | velo | small_fc_lopt | celo2 | elo | elo_celo2");
  cli.section("augmentation");
  cli.add(0, "scale-min", &a->scale_min, "RandomResizedCrop's smallest area fraction (timm: 0.08)");
  cli.add(0, "hflip", &a->hflip, "horizontal flip probability");
  cli.add(0, "crop-pct", &a->crop_pct, "evaluation: resize to image / crop-pct, then centre crop (timm: 0.875)");
  cli.add(0, "mixup", &a->mixup, "mixup alpha (0 = off; the DeiT / PyLO recipe: 0.8)");
  cli.add(0, "cutmix", &a->cutmix, "cutmix alpha (0 = off; the DeiT / PyLO recipe: 1.0)");
  cli.add(0, "smoothing", &a->smoothing, "label smoothing (0 = hard labels)");
  cli.add(0, "randaugment", &a->randaugment, "timm's RandAugment string, e.g. rand-m9-mstd0.5-inc1; empty = off");
  cli.section("image loading");
  cli.add(0, "threads", &a->threads, "decoding threads (0 = one per hardware thread)");
  cli.add(0, "decoder", &a->decoder,
          "stb (CPU threads, exact) | nvjpeg (the GPU's JPEG engine) | auto (nvjpeg where available)");
  cli.add(0, "shuffle", &a->shuffle, "shuffle buffer in samples (shard order is shuffled too)");
  cli.add(0, "synthetic", &a->synthetic,
          "train on a few fixed random batches held in memory (benchmarks: the model's step alone)");
}

std::vector<float> floats(const std::string& list, const char* flag, int want) {
  std::vector<float> v;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    v.push_back(std::strtof(item.c_str(), &end));
    if (item.empty() || *end != '\0' || !std::isfinite(v.back()))
      user_error("--", flag, " must be numbers separated by commas (got '", list, "').");
  }
  if (int(v.size()) != want && v.size() != 1)
    user_error("--", flag, " needs 1 or ", want, " values, one per channel (got ", v.size(), ").");
  v.resize(size_t(want), v[0]);
  return v;
}

VitShape model_shape(const Args& a) {
  VitShape s = vit_shape(a.model);
  if (a.qkv != "separate" && a.qkv != "fused") user_error("--qkv must be separate or fused (got '", a.qkv, "').");
  s.separate_qkv = a.qkv == "separate";
  s.image = a.image;
  s.in_chans = a.channels;
  s.classes = a.classes;
  if (a.channels != 1 && a.channels != 3) user_error("--channels must be 1 or 3 (got ", a.channels, ").");
  vit_param_table(s);  // checks the image, patch and classes
  return s;
}

ImageNorm image_norm(const Args& a) {
  ImageNorm n;
  const std::vector<float> m = floats(a.mean, "mean", a.channels), d = floats(a.stdev, "std", a.channels);
  for (int c = 0; c < a.channels; c++) {
    if (!(d[size_t(c)] > 0)) user_error("--std values must be positive (got ", d[size_t(c)], ").");
    n.mean[c] = m[size_t(c)];
    n.std[c] = d[size_t(c)];
  }
  return n;
}

// rank, world: data parallel, the training loader of process `rank` among `world` (its own shards and draws).
ImageLoaderOptions loader_options(const Args& a, bool train, int rank = 0, int world = 1) {
  ImageLoaderOptions o;
  o.rank = rank;
  o.world = world;
  o.batch = a.B;
  o.size = a.image;
  o.channels = a.channels;
  o.classes = a.classes;
  o.train = train;
  o.seed = uint64_t(a.seed) + uint64_t(rank) * 1000003u;  // rank 0's as one process's
  o.threads = a.threads;
  o.decoder = a.decoder;
  o.shuffle_buffer = a.shuffle;
  o.train_tf.rrc.scale_min = a.scale_min;
  o.train_tf.hflip = a.hflip;
  o.train_tf.use_randaugment = !a.randaugment.empty();
  if (o.train_tf.use_randaugment) o.train_tf.randaugment = parse_randaugment(a.randaugment);
  o.eval_tf.crop_pct = a.crop_pct;
  o.mix = a.mixup > 0 || a.cutmix > 0;
  o.mixup.mixup_alpha = a.mixup;
  o.mixup.cutmix_alpha = a.cutmix;
  o.mixup.label_smoothing = a.smoothing;
  return o;
}

// Training FLOPs of one image (3x the forward's): the matmuls' 2 per weight and token (patch embedding per
// patch, 12 C^2 per block and token, the head for the cls token) and attention's 4 T^2 C per block.
double flops_per_image(const VitShape& s) {
  const double C = s.channels, T = s.tokens(), P = T - 1;
  const double fwd = 2 * (P * s.patch_dim() * C + s.layers * T * 12 * C * C + s.classes * C) + s.layers * 4 * T * T * C;
  return 3 * fwd;
}

struct Eval {
  double loss = 0, top1 = 0, top5 = 0;
};
// One pass over the validation shards: mean loss, top-1 and top-5 accuracy, from the logits in double.
Eval evaluate(VitBf16& model, const Args& a) {
  const ImageLoaderOptions o = loader_options(a, false);
  ImageLoader loader(list_shards(a.val), o, make_batch_decoder(o));
  std::vector<uint8_t> px(size_t(a.B) * a.image * a.image * a.channels);
  std::vector<int32_t> y(size_t(a.B));
  std::vector<float> logits(size_t(a.B) * a.classes);
  ImageMix none;
  Eval e;
  int64_t n = 0;
  for (int batch = 0; a.val_batches == 0 || batch < a.val_batches; batch++) {
    const int real = read_data([&] { return loader.next({px.data(), y.data(), nullptr, &none}); });
    if (real == 0) break;
    Batch b;
    b.pixels = px.data();
    model.set_batch(b, 0);
    model.forward(0);
    model.logits_to_host(logits.data());
    for (int i = 0; i < real; i++) {
      const float* z = &logits[size_t(i) * a.classes];
      const float mx = *std::max_element(z, z + a.classes);
      double sum = 0;
      int above = 0;  // classes scored higher than the label: its rank
      for (int c = 0; c < a.classes; c++) {
        sum += std::exp(double(z[c]) - mx);
        above += z[c] > z[y[size_t(i)]];
      }
      e.loss += std::log(sum) + mx - z[y[size_t(i)]];
      e.top1 += above < 1;
      e.top5 += above < 5;
    }
    n += real;
  }
  if (n == 0) user_error("no validation images in '", a.val, "'.");
  e.loss /= double(n);
  e.top1 /= double(n);
  e.top5 /= double(n);
  return e;
}

// Random pixels and labels in pinned memory for four steps, cycled: the model's and the optimizer's step
// without the data pipeline (bench_vit.sh). Each step's images are drawn from their index in the step,
// (micro-batch * world + rank) * B + i, so that every split of a step's images over processes and
// micro-batches reads the same ones: N processes of B, one process of N micro-batches of B and one of
// N * B (the data-parallel check compares them).
class SyntheticBatches {
 public:
  SyntheticBatches(const Args& a, int rank, int world, int accum)
      : bytes_(size_t(a.image) * a.image * a.channels), B_(a.B), batches_(kSteps * accum) {
    CUDA_CHECK(cudaMallocHost(&pixels_, size_t(batches_) * size_t(B_) * bytes_));
    CUDA_CHECK(cudaMallocHost(&labels_, size_t(batches_) * size_t(B_) * sizeof(int32_t)));
    digest_.resize(size_t(batches_));
    for (int k = 0; k < batches_; k++) {  // micro-batch k % accum of step k / accum
      for (int i = 0; i < B_; i++) {
        const uint64_t step = uint64_t(k / accum), micro = uint64_t(k % accum);
        const uint64_t in_step = (micro * uint64_t(world) + uint64_t(rank)) * uint64_t(B_) + uint64_t(i);
        const uint64_t global = step * uint64_t(accum) * uint64_t(world) * uint64_t(B_) + in_step;
        uint8_t* px = pixel(k, i);
        for (size_t j = 0; j < bytes_; j += 8) {
          const uint64_t w = digest_mix(uint64_t(a.seed) ^ digest_mix(global * bytes_ + j));
          std::memcpy(px + j, &w, std::min<size_t>(8, bytes_ - j));
        }
        labels_[size_t(k) * size_t(B_) + size_t(i)] = int32_t(global * 7919 % uint64_t(a.classes));
      }
      digest_[size_t(k)] = digest_samples(pixel(k, 0), bytes_, labels_ + size_t(k) * size_t(B_), sizeof(int32_t), B_);
    }
  }
  ~SyntheticBatches() {
    cudaFreeHost(pixels_);
    cudaFreeHost(labels_);
  }
  Batch next() {
    Batch b;
    b.pixels = pixel(k_, 0);
    b.targets = labels_ + size_t(k_) * size_t(B_);
    b.digest = digest_[size_t(k_)];
    k_ = (k_ + 1) % batches_;
    return b;
  }

 private:
  static constexpr int kSteps = 4;
  uint8_t* pixel(int k, int i) const { return pixels_ + (size_t(k) * size_t(B_) + size_t(i)) * bytes_; }
  size_t bytes_;  // one image
  int B_, batches_, k_ = 0;
  uint8_t* pixels_ = nullptr;
  int32_t* labels_ = nullptr;
  std::vector<uint64_t> digest_;
};

struct Inputs {
  TrainPlan plan;  // what every trainer reads and checks (train/trainer.h)
  VitShape shape;
  ImageNorm norm;
  std::unique_ptr<ImageLoader> train;
};

// Decoding threads: the image loader's own limit (--threads 60000 once made 32,436 threads and exhausted
// the machine's processes), checked with the flags, before any shard is read.
constexpr int kMaxThreads = ImageLoaderOptions::kMaxThreads;

// train_vit's checks beside the shared ones (check_train_flags), before any file or GPU work.
void check_flags(const Args& a) {
  if (a.B < 1 || a.steps < 1) user_error("-b and -x must be >= 1.");
  check_train_flags(a);
  if (a.threads < 0 || a.threads > kMaxThreads)
    user_error("--threads must be from 0 (one per hardware thread) to ", kMaxThreads, " (got ", a.threads, ").");
  if (a.shuffle < 0) user_error("--shuffle must be >= 0 (got ", a.shuffle, ").");
  if (!(a.crop_pct >= 0.1 && a.crop_pct <= 1))
    user_error("--crop-pct must be in [0.1, 1] (got ", a.crop_pct, "); timm's is 0.875 (resize 256, crop 224).");
  check_decoder_option(a.decoder);
  TrainTransformOptions augment = loader_options(a, true).train_tf;  // parses --randaugment
  augment.size = a.image;
  check_options(augment);  // --scale-min, --hflip
  if (a.dropout > 0) user_error("this ViT has no dropout (timm's ViT defaults have none); leave out --dropout.");
  if (a.mixup < 0 || a.cutmix < 0 || !(a.smoothing >= 0 && a.smoothing < 1))
    user_error("--mixup and --cutmix must be >= 0 and --smoothing in [0, 1).");
}

// The shards (the first sample of each read and checked), the checkpoint to resume from, then the training
// loader at its position.
void prepare_data(const Args& a, Inputs& in) {
  TrainPlan& p = in.plan;
  const std::vector<std::string> train = list_shards(a.train);
  check_shard_starts(train, a.classes);
  if (!a.val.empty() && a.val_every > 0) check_shard_starts(list_shards(a.val), a.classes);
  const bool resume = p.open_resume(a, "-e, --image, --channels, --classes and --qkv");
  const ImageLoaderOptions o = loader_options(a, true, p.dp->rank(), p.dp->world());
  if (a.decoder != "stb") {  // the nvjpeg decoder is made on the GPU: this process's, not GPU 0 for all
    require_cuda_gpu();
    select_gpu(p.dp->group().local_rank);
  }
  in.train = std::make_unique<ImageLoader>(train, o, make_batch_decoder(o));
  if (resume) in.train->seek(ImageLoader::Position::from_ints(p.state.data));
}

// Everything read and checked before the GPU is touched: a mistake costs no GPU time, and nothing is
// created before the last check.
Inputs prepare(Args& a) {
  Inputs in;
  check_flags(a);
  in.plan.start(&a, a.B);
  in.shape = model_shape(a);
  check_attention_shape(a.attention, in.shape.tokens(), false);
  in.norm = image_norm(a);
  in.plan.set_model(a, vit_param_table(in.shape));
  if (a.synthetic) {
    if (!a.resume.empty()) user_error("--synthetic runs cannot be resumed; leave out --resume.");
    a.val.clear();
  } else {
    prepare_data(a, in);
  }
  in.plan.finish(a);
  return in;
}

void print_header(const Args& a, const Inputs& in, const Trainer& t) {
  const DevicePeak& peak = t.peak();
  std::printf(
      "train_vit | %s | %s %dx%dx%d q/k/v %s, %d tokens, %.2fM params | %s | batch %d x %d accum = %lld images/step | "
      "%lld steps\n",
      peak.name.c_str(), a.model.c_str(), a.image, a.image, a.channels, a.qkv.c_str(), in.shape.tokens(),
      in.plan.table.num_params() / 1e6, a.optimizer.c_str(), a.B, in.plan.accum, (long long)a.total_batch,
      (long long)a.steps);
  std::printf("MFU against %.0f TFLOP/s bf16 (%s)\n", peak.flops / 1e12, peak.how.c_str());
  std::printf("augmentation: crop scale >= %g, flip %g, mixup %g, cutmix %g, smoothing %g%s%s\n", a.scale_min, a.hflip,
              a.mixup, a.cutmix, a.smoothing, a.randaugment.empty() ? "" : ", ", a.randaugment.c_str());
  t.print_step_setup();
}

int run(Args& a) {
  Inputs in = prepare(a);
  const double step_flops = flops_per_image(in.shape) * double(a.total_batch);
  Trainer t(a, in.plan, step_flops, "img", /*bf16=*/true);  // the processes joined, the log, the arena
  VitBf16 model(in.shape, t.arena(), a.B, in.norm, attention_by_name(a.attention));
  t.set_model(model, vit_tensors(t.table(), in.shape).blocks);  // optimizer, clipper, --resume, signals
  print_header(a, in, t);

  std::unique_ptr<ImagePrefetcher> batches;
  std::unique_ptr<SyntheticBatches> synthetic;
  if (a.synthetic)
    synthetic = std::make_unique<SyntheticBatches>(a, in.plan.dp->rank(), in.plan.dp->world(), in.plan.accum);
  else
    batches = std::make_unique<ImagePrefetcher>(*in.train);
  auto next_batch = [&] {
    if (synthetic) return synthetic->next();
    const ImagePrefetcher::Batch p = read_data([&] { return batches->next(); });
    Batch b;
    b.pixels = p.pixels;
    b.targets = p.labels;
    b.soft_targets = p.soft_targets;
    b.mix = p.mix;
    b.digest = p.digest;
    return b;
  };
  t.start({next_batch, [&](cudaStream_t s) {
             if (batches) batches->release(s);
           }});
  for (int64_t step = t.first_step(); step < a.steps; step++) {
    const bool stop = t.guard(step, [&] {  // a bad shard: the steps done are saved
      if (!a.val.empty() && a.val_every > 0 && (step % a.val_every == 0 || step + 1 == a.steps)) {
        const Eval e = evaluate(model, a);
        t.log().validation(step, float(e.loss), e.top1, e.top5);
      }
      return t.step(step);  // micro-batches, clip, update, log
    });
    if (batches) t.state().data = batches->position().to_ints();
    if (t.end_step(step, stop)) return 0;  // a checkpoint every -n steps; a signal: checkpoint and stop
  }
  if (in.train && in.train->skipped() > 0)
    std::printf("skipped %lld undecodable images\n", (long long)in.train->skipped());
  t.checkpoint(a.steps);
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  Args a;
  Cli cli(
      "train_vit",
      "Pretrains a ViT on WebDataset image shards (prepare the default data with scripts/prepare_fashion_mnist.sh).");
  add_flags(cli, &a);
  return run_program("train_vit", cli, argc, argv, [&] {
    a.lr_given = cli.given("lr");
    return run(a);
  });
}
